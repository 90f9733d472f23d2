"""Run a candidate's cutover checks against PostgreSQL: measurements only, judged in core.cutover.checks.

Every check runs in its own read-only transaction with its own statement timeout (a slow
or failing one does not take the others with it), as the sink Secret's optional
`checkRole` when it names one (`SET LOCAL ROLE`: a role without write privileges, so a
check cannot write even where a read-only transaction would let it). The assertions'
SQL has passed core.judges.assertion_sql before it gets here, and is run as a server-side cursor
(DECLARE, sent by the extended protocol): the server itself refuses a second
`;`-separated statement and anything but a plain query, so nothing can COMMIT its way
out of the read-only transaction and the role even if the parser check were bypassed.
The transaction is always rolled back, and the pool resets the session (DISCARD ALL)
when the pass gives it back.
The parity counts of both indexes are read in one REPEATABLE READ snapshot so they
describe the same moment; so is the diff (adapters.postgres.diff), whose statements share
the check's timeout.

The transaction first pins (SET LOCAL) every setting that changes how the server reads
the text or what its names resolve to (PINNED_SETTINGS): the session carries the sink
user's own defaults (ALTER ROLE ... SET), which the tenant chooses, and core.judges.assertion_sql
judged the text as PostgreSQL reads it with the defaults. What an assertion returns is
capped in the query itself (capped_query): one row of at most COLUMN_LIMIT values of at
most VALUE_LIMIT characters reaches the operator, the other rows are only counted by the
server (MOVE), up to the row limit, whatever the check builds.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import Any

import psycopg
from psycopg import sql

from derived_views.adapters.postgres.diff import diff_tables, timeout_until
from derived_views.core.check_runs import EXAMPLES, CheckKind, CheckRequest, measured
from derived_views.core.cutover.checks import (
    SHOWN_LIMIT,
    AssertionAnswer,
    CouldNotRun,
    KeySampleFound,
    Measurement,
    RowCounts,
    rendered_sql,
)
from derived_views.core.judges.assertion_sql import statement_text
from derived_views.core.naming import LEDGER_TABLE

ASSERTION_ROW_LIMIT = 1000
"""Rows of a `noRows` assertion counted before stopping: enough to say how bad it is."""
VALUE_LIMIT = SHOWN_LIMIT
"""Characters of one value of an assertion's first row that reach the operator: no more
than the status shows (at most 4 bytes each in UTF-8)."""
COLUMN_LIMIT = 64
"""Values of an assertion's first row that reach the operator; the status shows fewer."""
CURSOR = "dv_check"
SHAPE_CURSOR = "dv_check_shape"

PINNED_SETTINGS = (
    # How the text is read: as core.judges.assertion_sql's parser (libpg_query, with PostgreSQL's
    # defaults) read it. Off, a backslash escapes a quote inside '...', and a string ends
    # elsewhere: text the policy saw inside a literal becomes SQL.
    "SET LOCAL standard_conforming_strings = on",
    "SET LOCAL backslash_quote = safe_encoding",
    "SET LOCAL escape_string_warning = on",
    # The bytes the server reads are the characters the policy read: in a client-only
    # encoding such as SJIS, psycopg sends U+00A5 as the byte the server reads as a backslash.
    "SET LOCAL client_encoding = 'UTF8'",
    # What names resolve to: functions, operators, types and collations only from
    # pg_catalog (the tables are schema-qualified; pg_temp last, and empty: a check cannot
    # create tables), never from a schema first on the sink user's search_path.
    "SET LOCAL search_path = pg_catalog, pg_temp",
    # What literals and expressions mean: `x = NULL` stays a comparison (on, it is read as
    # IS NULL), NULL in an array literal is a null, dates and intervals are read (and
    # written back) one way, times in UTC, numbers and month names in the C locale.
    "SET LOCAL transform_null_equals = off",
    "SET LOCAL array_nulls = on",
    "SET LOCAL DateStyle = 'ISO, MDY'",
    "SET LOCAL IntervalStyle = postgres",
    "SET LOCAL TimeZone = 'UTC'",
    "SET LOCAL lc_numeric = 'C'",
    "SET LOCAL lc_monetary = 'C'",
    "SET LOCAL lc_time = 'C'",
    "SET LOCAL extra_float_digits = 1",
    "SET LOCAL bytea_output = hex",
    # What a check may take of the server (PostgreSQL's defaults): memory per sort or hash
    # node; the sink user may have raised them for itself.
    "SET LOCAL work_mem = '4MB'",
    "SET LOCAL hash_mem_multiplier = 2",
)
"""Pinned in every check's transaction, before any text of the check reaches the server."""
CHECK_TEMP_FILE_LIMIT = "2GB"
"""temp_file_limit of a check's transaction when the operator connects as a superuser: only a
superuser may set it, and nothing else bounds how much a sort or hash larger than work_mem
writes to disk. Otherwise the platform sets it for the sink user (ALTER ROLE ... SET
temp_file_limit, as a superuser)."""


def run_sql_checks(conn: psycopg.Connection[Any], request: CheckRequest,
               role: str | None = None, ledger: str = LEDGER_TABLE
               ) -> dict[str, tuple[Measurement, float]]:
    """Each check's measurement and how long it took; a check that cannot run says why.

    With a budget (request.budget_seconds) each query's timeout is cut to what is left of
    it, and the checks after it is spent are not run: errors that name the budget."""
    found: dict[str, tuple[Measurement, float]] = {}
    budget = _Budget(request.budget_seconds)
    for check in measured(request):  # the registry of check kinds, in its order
        timeout = request.checks.timeout_seconds
        measure: Callable[[float], Measurement]
        if check.kind is CheckKind.ROW_COUNT:
            measure = lambda _: _row_counts(conn, request)  # noqa: E731
        elif check.kind is CheckKind.KEY_SAMPLE:
            measure = lambda _: _key_sample(conn, request)  # noqa: E731
        elif check.kind is CheckKind.DIFF:
            measure = partial(_diff, conn, request, ledger, role)
        else:
            assert check.assertion is not None
            query = rendered_sql(check.assertion, request.schema, request.index,
                                 request.active_index)
            timeout, measure = check.assertion.timeout_seconds, partial(_assertion, conn, query)
        found[check.name] = _timed(conn, role, budget, timeout, measure)
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
           timeout_seconds: int, measure: Callable[[float], Measurement]
           ) -> tuple[Measurement, float]:
    """`measure` run in the check's own transaction; it is given its deadline (monotonic),
    which bounds all of its statements together, not each one."""
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
            conn.execute(session_settings(timeout_ms,
                                          superuser=_is_superuser(conn)))
            if role:
                conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(role)))
            measured: Measurement = measure(time.monotonic() + timeout_ms / 1000)
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


def session_settings(timeout_ms: int, *, superuser: bool = False) -> sql.Composed:
    """One round trip of SET LOCALs (utility statements: nothing on the sink user's
    search_path can stand in for them, as it could for set_config())."""
    statements: list[sql.Composable] = [sql.SQL(s) for s in PINNED_SETTINGS]
    if superuser:
        statements.append(sql.SQL("SET LOCAL temp_file_limit = {}").format(
            sql.Literal(CHECK_TEMP_FILE_LIMIT)))
    statements.append(sql.SQL("SET LOCAL statement_timeout = {}").format(
        sql.Literal(timeout_ms)))
    return sql.SQL("; ").join(statements)


def _is_superuser(conn: psycopg.Connection[Any]) -> bool:
    """As the server reported it at connection (it reports every change too)."""
    return conn.info.parameter_status("is_superuser") == "on"


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


def _diff(conn: psycopg.Connection[Any], request: CheckRequest, ledger: str, role: str | None,
          deadline: float) -> Measurement:
    found = diff_tables(conn, request, deadline, ledger, role)
    return CouldNotRun(found) if isinstance(found, str) else found


def _assertion(conn: psycopg.Connection[Any], query: str, deadline: float) -> AssertionAnswer:
    """The query (validated by core.judges.assertion_sql) inside capped_query, as a server-side cursor:
    psycopg sends `DECLARE ... CURSOR FOR <query>` by the extended protocol, so the server
    refuses a second statement, and DECLARE takes only a SELECT or VALUES without
    data-modifying WITH. The first row is fetched; the server counts the others (MOVE) and
    sends none of them."""
    statement = statement_text(query) or query
    types = _columns(conn, statement)
    with conn.cursor(name=CURSOR) as cur:
        timeout_until(conn, deadline)
        cur.execute(capped_query(statement, types))
        timeout_until(conn, deadline)
        row = cur.fetchone()
        counted = 0
        if row is not None:
            timeout_until(conn, deadline)
            counted = 1 + max(0, conn.execute(sql.SQL("MOVE FORWARD {} FROM {}").format(
                sql.Literal(ASSERTION_ROW_LIMIT), sql.Identifier(CURSOR))).rowcount)
    first = None if row is None else tuple(_shown(v) for v in row)
    return AssertionAnswer(rows=min(counted, ASSERTION_ROW_LIMIT), first_row=first,
                           more=counted > ASSERTION_ROW_LIMIT)


def _columns(conn: psycopg.Connection[Any], statement: str) -> tuple[int, ...]:
    """The type of each column the statement returns: the server declares it as a cursor of
    its own (parsed and planned, never run; one statement of a query, or the server refuses
    it) and describes it. psycopg waits for the answer without holding the GIL, unlike
    libpq's synchronous Parse and Describe, which would stall every thread of the operator."""
    with conn.cursor(name=SHAPE_CURSOR) as shape:
        shape.execute(statement)
        return tuple(int(column.type_code) for column in shape.description or ())


TEXT_TYPES = frozenset({25, 1043, 1042, 19})
"""text, varchar, bpchar, name: cut as they are."""
BOOL_TYPE = 16


def capped_query(statement: str, types: tuple[int, ...]) -> sql.Composed:
    """The check as a subquery whose first COLUMN_LIMIT columns are cut to VALUE_LIMIT + 1
    characters (one more: the cut shows) and whose rows stop one past the row limit. The cut
    is the server's, before anything is sent; LIMIT also bounds an ORDER BY of the check to
    the rows kept (a top-N sort). The columns are renamed by position (c1, c2, ...), whatever
    the check named them; the newline ends a trailing `--` comment of the check. Values
    become text by their types' output functions (format), not by casts: a cast is looked up
    in pg_cast, where a type's owner may have put a function of its own."""
    names = [sql.Identifier(f"c{i}") for i in range(1, len(types) + 1)]
    values = sql.SQL(", ").join(
        _cut(name, type_oid)
        for name, type_oid in zip(names[:COLUMN_LIMIT], types[:COLUMN_LIMIT], strict=True))
    renamed = sql.SQL("({})").format(sql.SQL(", ").join(names)) if names else sql.SQL("")
    return sql.SQL("SELECT {values} FROM (\n{statement}\n) AS dv_check_rows{renamed} "
                   "LIMIT {limit}").format(values=values, statement=sql.SQL(statement),
                                           renamed=renamed,
                                           limit=sql.Literal(ASSERTION_ROW_LIMIT + 1))


def _cut(name: sql.Identifier, type_oid: int) -> sql.Composed:
    cut = sql.Literal(VALUE_LIMIT + 1)
    if type_oid in TEXT_TYPES:
        return sql.SQL("pg_catalog.substr({}, 1, {})").format(name, cut)
    if type_oid == BOOL_TYPE:  # `true`/`false`, as a check's verdict reads (its output is t/f)
        return sql.SQL("{}::pg_catalog.text").format(name)
    return sql.SQL("CASE WHEN pg_catalog.num_nulls({name}) = 0 THEN pg_catalog.substr("
                   "pg_catalog.format('%s', {name}), 1, {cut}) END").format(name=name, cut=cut)


def _shown(value: Any) -> str:
    text = _text(value)
    return text if len(text) <= VALUE_LIMIT else text[:VALUE_LIMIT - 3] + "..."


def _text(value: Any) -> str:
    if value is None:
        return "NULL"
    return str(value).lower() if isinstance(value, bool) else str(value)
