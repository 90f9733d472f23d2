"""Run a candidate's cutover checks against PostgreSQL: measurements only, judged in core.checks.

Every check runs in its own read-only transaction with its own statement timeout (a slow
or failing one does not take the others with it), as the sink Secret's optional
`checkRole` when it names one (`SET LOCAL ROLE`: a role without write privileges, so a
check cannot write even where a read-only transaction would let it). The assertions'
SQL has passed core.check_sql before it gets here, and is run as a server-side cursor
(DECLARE, sent by the extended protocol): the server itself refuses a second
`;`-separated statement and anything but a plain query, so nothing can COMMIT its way
out of the read-only transaction and the role even if the parser check were bypassed.
The transaction is always rolled back, and the pool resets the session (DISCARD ALL)
when the pass gives it back.
The parity counts of both indexes are read in one REPEATABLE READ snapshot so they
describe the same moment.
"""

from __future__ import annotations

import time
from typing import Any

import psycopg
from psycopg import sql

from derived_views.core.checks import (
    KEY_SAMPLE,
    ROW_COUNT,
    AssertionAnswer,
    CheckRequest,
    CouldNotRun,
    KeySampleFound,
    Measurement,
    RowCounts,
    rendered_sql,
)

ASSERTION_ROW_LIMIT = 1000
"""Rows of a `noRows` assertion counted before stopping: enough to say how bad it is."""
EXAMPLES = 3


def run_checks(conn: psycopg.Connection[Any], request: CheckRequest,
               role: str | None = None) -> dict[str, tuple[Measurement, float]]:
    """Each check's measurement and how long it took; a check that cannot run says why.

    With a budget (request.budget_seconds) each query's timeout is cut to what is left of
    it, and the checks after it is spent are not run: errors that name the budget."""
    found: dict[str, tuple[Measurement, float]] = {}
    checks = request.checks
    budget = _Budget(request.budget_seconds)
    if request.parity and checks.row_count is not None:
        found[ROW_COUNT] = _timed(conn, role, budget, checks.timeout_seconds,
                                  lambda: _row_counts(conn, request))
    if request.parity and checks.key_sample is not None:
        found[KEY_SAMPLE] = _timed(conn, role, budget, checks.timeout_seconds,
                                   lambda: _key_sample(conn, request))
    for assertion in checks.assertions:
        query = rendered_sql(assertion, request.schema, request.index, request.active_index)
        found[assertion.name] = _timed(conn, role, budget, assertion.timeout_seconds,
                                       lambda q=query: _assertion(conn, q))
    return found


class _Budget:
    """What is left of a run's time budget (None: no budget)."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.deadline = None if seconds is None else time.monotonic() + seconds

    def left_ms(self) -> int | None:
        if self.deadline is None:
            return None
        return max(0, int((self.deadline - time.monotonic()) * 1000))

    def named(self) -> str:
        return (f"the run's time budget of {self.seconds:g}s (operator setting "
                "DV_CHECK_BUDGET_SECONDS)")


def _timed(conn: psycopg.Connection[Any], role: str | None, budget: _Budget,
           timeout_seconds: int, measure: Any) -> tuple[Measurement, float]:
    started = time.perf_counter()
    timeout_ms, left = timeout_seconds * 1000, budget.left_ms()
    if left is not None and left < 1:
        return CouldNotRun(f"not run: {budget.named()} was spent by the checks before it; "
                           "make them faster or raise the budget"), 0.0
    cut = left is not None and left < timeout_ms
    timeout_ms = min(timeout_ms, left) if left is not None else timeout_ms
    try:
        # Rolled back, never committed: a check only reads, and whatever a query might have
        # changed in the transaction (a setting, a transaction lock) ends with it.
        with conn.transaction(force_rollback=True):
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            conn.execute(sql.SQL("SET LOCAL statement_timeout = {}").format(
                sql.Literal(timeout_ms)))
            if role:
                conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(role)))
            measured: Measurement = measure()
    except psycopg.errors.QueryCanceled:
        measured = CouldNotRun(
            f"timed out after {timeout_ms / 1000:.1f}s: {budget.named()} ran out; make the "
            "checks faster or raise the budget" if cut
            else f"timed out after {timeout_ms // 1000}s (statement timeout)")
    except psycopg.errors.InsufficientPrivilege as exc:
        who = f"role {role}" if role else "the sink Secret's user"
        measured = CouldNotRun(f"{_first_line(exc)}: {who} needs SELECT on the view's index "
                               "tables (e.g. ALTER DEFAULT PRIVILEGES ... GRANT SELECT ON "
                               "TABLES)")
    except psycopg.errors.ReadOnlySqlTransaction as exc:
        measured = CouldNotRun(f"{_first_line(exc)}: checks only read")
    except psycopg.Error as exc:
        measured = CouldNotRun(_first_line(exc))
    return measured, time.perf_counter() - started


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _count(conn: psycopg.Connection[Any], schema: str, table: str) -> int:
    row = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(
        sql.Identifier(schema, table))).fetchone()
    return int(row[0]) if row else 0


def _row_counts(conn: psycopg.Connection[Any], request: CheckRequest) -> RowCounts:
    assert request.active_index is not None
    return RowCounts(candidate=_count(conn, request.schema, request.index),
                     active=_count(conn, request.schema, request.active_index))


def _missing(conn: psycopg.Connection[Any], request: CheckRequest, source: str, other: str
             ) -> tuple[int, int, list[str]]:
    """(sampled, missing, examples): keys sampled from `source` absent from `other`.

    The sample is random per run (ORDER BY random(): one scan and a top-N sort), so runs
    while a check fails look at other keys too. Key columns are the index's primary key,
    hence NOT NULL: plain equality lets PostgreSQL probe the primary-key index or hash the
    other side (IS NOT DISTINCT FROM can do neither and made this a nested loop of scans).
    """
    assert request.checks.key_sample is not None
    keys = sql.SQL(", ").join(sql.Identifier(k) for k in request.primary_key)
    match = sql.SQL(" AND ").join(
        sql.SQL("o.{k} = s.{k}").format(k=sql.Identifier(k))
        for k in request.primary_key)
    shown = sql.SQL(" || ',' || ").join(
        sql.SQL("s.{k}::text").format(k=sql.Identifier(k))
        for k in request.primary_key)
    query = sql.SQL(
        "WITH s AS (SELECT {keys} FROM {source} ORDER BY random() LIMIT {size}) "
        "SELECT (SELECT count(*) FROM s), count(*), "
        "(array_agg({shown}))[1:{examples}] FROM s "
        "WHERE NOT EXISTS (SELECT 1 FROM {other} o WHERE {match})").format(
            keys=keys, source=sql.Identifier(request.schema, source),
            size=sql.Literal(request.checks.key_sample.size), shown=shown,
            examples=sql.Literal(EXAMPLES), other=sql.Identifier(request.schema, other),
            match=match)
    row = conn.execute(query).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), list(row[2] or [])


def _key_sample(conn: psycopg.Connection[Any], request: CheckRequest) -> KeySampleFound:
    assert request.active_index is not None
    sampled_a, missing_c, ex_c = _missing(conn, request, request.active_index, request.index)
    sampled_c, missing_a, ex_a = _missing(conn, request, request.index, request.active_index)
    return KeySampleFound(sampled_active=sampled_a, missing_from_candidate=missing_c,
                          sampled_candidate=sampled_c, missing_from_active=missing_a,
                          examples=tuple((ex_c + ex_a)[:EXAMPLES]))


def _assertion(conn: psycopg.Connection[Any], query: str) -> AssertionAnswer:
    """The query (validated by core.check_sql) as a server-side cursor: psycopg sends
    `DECLARE ... CURSOR FOR <query>` by the extended protocol, so the server refuses a
    second statement, and DECLARE takes only a SELECT or VALUES without data-modifying
    WITH; rows are fetched only up to the limit."""
    with conn.cursor(name="dv_check") as cur:
        cur.execute(query)
        rows = cur.fetchmany(ASSERTION_ROW_LIMIT + 1)
    first = None if not rows else tuple(_text(v) for v in rows[0])
    return AssertionAnswer(rows=min(len(rows), ASSERTION_ROW_LIMIT), first_row=first,
                           more=len(rows) > ASSERTION_ROW_LIMIT)


def _text(value: Any) -> str:
    if value is None:
        return "NULL"
    return str(value).lower() if isinstance(value, bool) else str(value)
