"""Cutover checks against the stack's PostgreSQL as a hostile tenant writes them: what the
server does with each SQL text of tests/hostile_checks.py when it is run anyway (as if
core.judges.assertion_sql were bypassed), the extended protocol that refuses a second statement, the
time budget, and the pooled connection that is reset before anyone else gets it.

The per-attempt results go to `results/hostile_checks.json` under the stack's state
directory, for the table in docs/security.md: the refusal, how long core.judges.assertion_sql took to
judge the text (uncached), and what the server did with it.
"""

from __future__ import annotations

import datetime as dt
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from derived_views.adapters.postgres.checks import run_sql_checks
from derived_views.adapters.postgres.pool import PgPool
from derived_views.api.spec import CutoverChecks, SqlAssertion
from derived_views.core import check_runs
from derived_views.core.cutover import checks
from derived_views.core.judges.assertion_sql import check_sql_problem
from support.corpora.hostile_checks import HOSTILE, LEGITIMATE

CAND, ACTIVE = "acct__cand000002", "acct__actv000002"
ESCAPED = "escaped_by_check"


def request(schema: str, assertions: list[dict[str, Any]], *, budget: float | None = None
            ) -> check_runs.CheckRequest:
    return check_runs.CheckRequest(
        revision="cand000002", schema=schema, index=CAND, active_index=ACTIVE,
        primary_key=("customer_id",), same_key=True,
        checks=CutoverChecks.model_validate({"assertions": assertions}), checks_hash="h",
        budget_seconds=budget)


@pytest.fixture()
def indexes(conn: psycopg.Connection[Any], schema: str) -> str:
    for table in (CAND, ACTIVE):
        conn.execute(f'CREATE TABLE "{schema}"."{table}" (customer_id text PRIMARY KEY, '
                     "balance double precision)")
        conn.execute(f'INSERT INTO "{schema}"."{table}" SELECT format(\'c-%s\', '
                     "lpad(i::text, 4, '0')), 10 FROM generate_series(0, 99) i")
    return schema


@pytest.fixture()
def check_role(conn: psycopg.Connection[Any], indexes: str) -> Iterator[str]:
    """What the sink Secret's checkRole should be: SELECT on the view's tables, nothing else."""
    role = f"dv_check_{uuid.uuid4().hex[:8]}"
    conn.execute(f'CREATE ROLE "{role}" NOLOGIN')
    conn.execute(f'GRANT "{role}" TO current_user')
    conn.execute(f'GRANT USAGE ON SCHEMA "{indexes}" TO "{role}"')
    conn.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{indexes}" TO "{role}"')
    yield role
    conn.execute(f'DROP OWNED BY "{role}"')
    conn.execute(f'DROP ROLE "{role}"')


def _tables_named(conn: psycopg.Connection[Any], *names: str) -> int:
    row = conn.execute("SELECT count(*) FROM pg_class WHERE relname = ANY(%s)",
                       (list(names),)).fetchone()
    return int(row[0]) if row else -1


def _session_state(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """Everything a check could leave in a session that the next user would inherit."""
    row = conn.execute(
        "SELECT current_user = session_user, current_setting('role'), "
        "current_setting('work_mem'), current_setting('default_transaction_read_only'), "
        "(SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
        " AND pid = pg_backend_pid()), "
        "(SELECT count(*) FROM pg_prepared_statements), "
        "(SELECT count(*) FROM pg_listening_channels()), "
        "(SELECT count(*) FROM pg_class WHERE relpersistence = 't' "
        " AND pg_table_is_visible(oid))").fetchone()
    assert row is not None
    keys = ("own user", "role", "work_mem", "read only default", "advisory locks",
            "prepared statements", "listening", "temporary tables")
    return dict(zip(keys, row, strict=True))


def test_the_server_refuses_a_second_statement_sent_by_the_extended_protocol(
        stack: Any, conn: psycopg.Connection[Any], indexes: str, check_role: str) -> None:
    # The parser check would refuse this text; run it anyway, as if it had been bypassed.
    escape = (f"SELECT 1 FROM {{index}} WHERE false ORDER BY 1 USING <; COMMIT; "
              f'RESET ROLE; CREATE TABLE "{indexes}"."{ESCAPED}"()')
    req = request(indexes, [{"name": "escape", "sql": escape}])
    measured, _ = run_sql_checks(conn, req, role=check_role)["escape"]
    assert measured == checks.CouldNotRun(
        "cannot insert multiple commands into a prepared statement")
    assert _tables_named(conn, ESCAPED) == 0
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert conn.execute("SELECT current_user = session_user").fetchone() == (True,)
    # the same text through the simple protocol (what checks used before) does escape
    with psycopg.connect(stack.pg_dsn, autocommit=True) as simple:
        simple.execute("BEGIN READ ONLY")
        simple.execute(escape.replace("{index}", f'"{indexes}"."{CAND}"'))
        assert _tables_named(simple, ESCAPED) == 1


def test_a_check_that_would_create_a_table_leaves_none(
        conn: psycopg.Connection[Any], indexes: str, check_role: str) -> None:
    req = request(indexes, [
        {"name": "into", "sql": f'SELECT * INTO "{indexes}"."{ESCAPED}" FROM {{index}}'},
        {"name": "as", "sql": f'CREATE TABLE "{indexes}"."{ESCAPED}" AS SELECT * FROM {{index}}'},
    ])
    found = run_sql_checks(conn, req, role=check_role)
    # DECLARE ... CURSOR FOR takes a query only
    assert found["into"][0] == checks.CouldNotRun("SELECT ... INTO is not allowed here")
    assert found["as"][0] == checks.CouldNotRun('syntax error at or near "CREATE"')
    assert _tables_named(conn, ESCAPED) == 0


def test_the_budget_cuts_a_slow_run_short_and_names_itself(
        conn: psycopg.Connection[Any], indexes: str) -> None:
    slow = ("SELECT a.customer_id FROM {index} a, {index} b, {index} c, {index} d, {index} e "
            "WHERE a.balance + b.balance + c.balance + d.balance + e.balance < -1000")
    req = request(indexes, [{"name": "slow", "sql": slow, "timeoutSeconds": 3600},
                            {"name": "after", "sql": "SELECT 1 FROM {index} WHERE false"}],
                  budget=1.5)
    found = run_sql_checks(conn, req)
    slow_measured, seconds = found["slow"]
    assert isinstance(slow_measured, checks.CouldNotRun)
    assert slow_measured.cause.startswith("timed out after 1.5s: the run's time budget of "
                                          "1.5s (operator setting DV_CHECK_BUDGET_SECONDS) "
                                          "ran out")
    assert 1.0 < seconds < 10
    after = found["after"][0]
    assert isinstance(after, checks.CouldNotRun)
    assert after.cause.startswith("not run: the run's time budget of 1.5s")


def test_a_pooled_connection_is_reset_before_the_next_user(stack: Any, conn: psycopg.Connection[Any],
                                                           check_role: str) -> None:
    pool = PgPool(1)
    key = f"reset-{uuid.uuid4().hex[:8]}"
    lock_key = int(uuid.uuid4().int % 2**31)

    def connect() -> psycopg.Connection[Any]:
        return psycopg.connect(stack.pg_dsn, autocommit=True)

    first = pool.acquire(key, connect)
    clean = _session_state(first)
    pid = first.info.backend_pid
    first.execute("CREATE TEMP TABLE left_behind (x int)")
    first.execute(f'SET ROLE "{check_role}"')
    first.execute("SET work_mem = '64kB'")
    first.execute("SET default_transaction_read_only = on")
    first.execute("SELECT pg_advisory_lock(%s)", (lock_key,))
    first.execute("PREPARE left_prepared AS SELECT 1")
    first.execute("LISTEN left_channel")
    dirty = _session_state(first)
    assert dirty != clean and dirty["advisory locks"] == 1 and dirty["temporary tables"] == 1
    pool.release(key, first)
    # another session can take the lock at once: the idle pooled connection no longer holds it
    row = conn.execute("SELECT pg_try_advisory_lock(%s)", (lock_key,)).fetchone()
    assert row == (True,)
    conn.execute("SELECT pg_advisory_unlock(%s)", (lock_key,))

    second = pool.acquire(key, connect)
    assert second.info.backend_pid == pid  # the same connection, reused
    assert _session_state(second) == clean
    # psycopg prepares nothing on pooled connections, so none of its statements went missing
    for _ in range(10):
        assert second.execute("SELECT 1 WHERE 1 = 1").fetchone() == (1,)
    pool.release(key, second)
    pool.close_all()


def test_a_connection_that_cannot_be_reset_is_not_kept(stack: Any) -> None:
    pool = PgPool(1)
    key = f"noreset-{uuid.uuid4().hex[:8]}"
    first = pool.acquire(key, lambda: psycopg.connect(stack.pg_dsn, autocommit=True))
    pid = first.info.backend_pid
    first.execute("BEGIN")  # DISCARD ALL cannot run in a transaction block: closed instead
    pool.release(key, first)
    assert first.closed
    second = pool.acquire(key, lambda: psycopg.connect(stack.pg_dsn, autocommit=True))
    assert second.info.backend_pid != pid
    pool.release(key, second)
    pool.close_all()


def test_legitimate_checks_run_and_pass(conn: psycopg.Connection[Any], indexes: str,
                                        check_role: str) -> None:
    req = request(indexes, [{"name": f"legit-{i}", "sql": c.sql, "expect": c.expect}
                            for i, c in enumerate(LEGITIMATE)])
    found = run_sql_checks(conn, req, role=check_role)
    run = checks.judge_checks(req, found, dt.datetime(2026, 11, 26, tzinfo=dt.UTC))
    assert [(r.name, r.outcome.value, r.observed) for r in run.failing()] == []


def test_the_hostile_corpus_against_the_server(stack: Any, conn: psycopg.Connection[Any],
                                               indexes: str, check_role: str) -> None:
    """Each hostile text refused by core.judges.assertion_sql; run anyway as the check role, on a pooled
    connection, nothing survives: no table, no write, no lock, no setting, no role."""
    pool = PgPool(1)
    key = f"hostile-{uuid.uuid4().hex[:8]}"
    seen = []
    for i, hostile in enumerate(HOSTILE):
        assertion = SqlAssertion(name=f"h{i}", sql=hostile.sql, timeout_seconds=1)
        tables = frozenset({(indexes, CAND), (indexes, ACTIVE)})
        rendered = checks.rendered_sql(assertion, indexes, CAND, ACTIVE)
        started = time.perf_counter()
        refusal = check_sql_problem.__wrapped__(rendered, tables)  # judged, not the cache's
        judged = time.perf_counter() - started
        assert refusal is not None and hostile.expected in refusal, hostile.sql
        entry: dict[str, Any] = {"class": hostile.cls, "sql": hostile.sql,
                                 "layer": "core.judges.assertion_sql", "message": refusal,
                                 "judge_ms": round(judged * 1000, 3)}
        if hostile.unrun:
            entry["server"] = f"not run here ({hostile.unrun})"
            seen.append(entry)
            continue
        session = pool.acquire(key, lambda: psycopg.connect(stack.pg_dsn, autocommit=True))
        try:
            req = request(indexes, [{"name": assertion.name, "sql": hostile.sql,
                                     "timeoutSeconds": 1}])
            measured, _ = run_sql_checks(session, req, role=check_role)[assertion.name]
        finally:
            pool.release(key, session)
        entry["server"] = (measured.cause if isinstance(measured, checks.CouldNotRun)
                           else f"ran: {measured}")
        seen.append(entry)
    after = pool.acquire(key, lambda: psycopg.connect(stack.pg_dsn, autocommit=True))
    state = _session_state(after)
    pool.release(key, after)
    pool.close_all()
    assert state["own user"] and state["advisory locks"] == 0
    assert state["temporary tables"] == 0 and state["prepared statements"] == 0
    assert _tables_named(conn, "x", "stolen", ESCAPED) == 0
    for table in (CAND, ACTIVE):
        rows = conn.execute(f'SELECT count(*), sum(balance) FROM "{indexes}"."{table}"'
                            ).fetchone()
        assert rows == (100, 1000.0)
    results = Path(stack.state_dir) / "results"
    results.mkdir(exist_ok=True)
    (results / "hostile_checks.json").write_text(json.dumps(
        {"hostile": seen, "legitimate": [{"what": c.what, "sql": c.sql} for c in LEGITIMATE]},
        indent=2))
