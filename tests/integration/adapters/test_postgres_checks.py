"""The cutover checks against the stack's PostgreSQL: counts, key samples, assertions, and the
read-only transaction, statement timeout and check role they run under; what an assertion
may transfer to the operator (measured on the wire), and the settings pinned against the
sink user's own defaults."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from derived_views.adapters.postgres import checks as postgres_checks
from derived_views.adapters.postgres.checks import (
    COLUMN_LIMIT,
    VALUE_LIMIT,
    capped_query,
    run_sql_checks,
    session_settings,
)
from derived_views.api.spec import CutoverChecks, SqlAssertion
from derived_views.core import check_runs
from derived_views.core.cutover import checks
from support.corpora.hostile_checks import MISREAD, Misread

CAND, ACTIVE = "acct__cand000001", "acct__actv000001"


def request(schema: str, body: dict[str, Any], *, active: str | None = ACTIVE
            ) -> check_runs.CheckRequest:
    return check_runs.CheckRequest(
        revision="cand000001", schema=schema, index=CAND, active_index=active,
        primary_key=("customer_id",), same_key=True,
        checks=CutoverChecks.model_validate(body), checks_hash="h")


@pytest.fixture()
def indexes(conn: psycopg.Connection[Any], schema: str) -> str:
    """The active: 500 customers c-0000..c-0499 with balance 10; the candidate drops the
    customers from c-0400 on and holds one negative balance."""
    for table in (CAND, ACTIVE):
        conn.execute(f'CREATE TABLE "{schema}"."{table}" (customer_id text PRIMARY KEY, '
                     "balance double precision)")
    conn.execute(f'INSERT INTO "{schema}"."{ACTIVE}" SELECT format(\'c-%s\', '
                 "lpad(i::text, 4, '0')), 10 FROM generate_series(0, 499) i")
    conn.execute(f'INSERT INTO "{schema}"."{CAND}" SELECT format(\'c-%s\', '
                 "lpad(i::text, 4, '0')), CASE WHEN i = 7 THEN -2.5 ELSE 10 END "
                 "FROM generate_series(0, 399) i")
    return schema


def test_counts_samples_and_assertions(conn: psycopg.Connection[Any], indexes: str) -> None:
    req = request(indexes, {
        "rowCount": {"maxDifference": 0}, "keySample": {"size": 500},
        "assertions": [
            {"name": "no-negative-balances",
             "sql": "SELECT customer_id, balance FROM {index} WHERE balance < 0"},
            {"name": "same-total", "expect": "true",
             "sql": "SELECT (SELECT sum(balance) FROM {index}) = "
                    "(SELECT sum(balance) FROM {active})"}]})
    found = run_sql_checks(conn, req)
    assert found["rowCount"][0] == checks.RowCounts(candidate=400, active=500)
    sample = found["keySample"][0]
    assert isinstance(sample, checks.KeySampleFound)
    # every active key sampled (500): the 100 from c-0400 on are missing from the candidate
    assert (sample.sampled_active, sample.missing_from_candidate) == (500, 100)
    assert (sample.sampled_candidate, sample.missing_from_active) == (400, 0)
    assert all(e >= "c-0400" for e in sample.examples) and len(sample.examples) == 3
    assert found["no-negative-balances"][0] == checks.AssertionAnswer(1, ("c-0007", "-2.5"))
    assert found["same-total"][0] == checks.AssertionAnswer(1, ("false",))
    assert all(seconds >= 0 for _, seconds in found.values())
    run = checks.judge_checks(req, found, dt.datetime(2026, 11, 24, tzinfo=dt.UTC))
    assert checks.checks_summary(run) == "rowCount failed +3"


def test_a_slow_query_times_out_as_an_error(conn: psycopg.Connection[Any], indexes: str) -> None:
    req = request(indexes, {"assertions": [
        {"name": "slow", "timeoutSeconds": 1,
         "sql": "SELECT a.customer_id FROM {index} a, {index} b, {index} c, {index} d "
                "WHERE a.balance + b.balance + c.balance + d.balance < -1000"}]})
    measured, seconds = run_sql_checks(conn, req)["slow"]
    assert measured == checks.CouldNotRun("timed out after 1s (statement timeout)")
    assert 0.9 < seconds < 30
    # the session is usable afterwards, outside any transaction
    assert conn.execute("SELECT 1").fetchone() == (1,)
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


def test_checks_cannot_write(conn: psycopg.Connection[Any], indexes: str) -> None:
    # a data-modifying CTE gets past a naive "starts with SELECT"; the server refuses it even
    # if core.judges.assertion_sql were bypassed (this request never passed it): DECLARE CURSOR takes
    # none, and the transaction is read-only besides
    req = request(indexes, {"assertions": [
        {"name": "writes", "sql": "WITH gone AS (DELETE FROM {index} RETURNING customer_id) "
                                  "SELECT customer_id FROM gone"}]})
    measured, _ = run_sql_checks(conn, req)["writes"]
    assert isinstance(measured, checks.CouldNotRun)
    assert measured.cause == "DECLARE CURSOR must not contain data-modifying statements in WITH"
    assert conn.execute(f'SELECT count(*) FROM "{indexes}"."{CAND}"').fetchone() == (400,)


def test_a_sql_error_is_reported(conn: psycopg.Connection[Any], indexes: str) -> None:
    req = request(indexes, {"assertions": [
        {"name": "typo", "sql": "SELECT customer_id FROM {index} WHERE balanse < 0"}]})
    measured, _ = run_sql_checks(conn, req)["typo"]
    assert measured == checks.CouldNotRun('column "balanse" does not exist')


@pytest.fixture()
def reader_role(conn: psycopg.Connection[Any]) -> Iterator[str]:
    role = f"dv_check_{uuid.uuid4().hex[:8]}"
    conn.execute(f'CREATE ROLE "{role}" NOLOGIN')
    conn.execute(f'GRANT "{role}" TO current_user')
    yield role
    conn.execute(f'DROP OWNED BY "{role}"')
    conn.execute(f'DROP ROLE "{role}"')


def test_the_check_role_reads_only_what_it_was_granted(conn: psycopg.Connection[Any],
                                                      indexes: str, reader_role: str) -> None:
    req = request(indexes, {"rowCount": {"maxDifference": 0}})
    measured, _ = run_sql_checks(conn, req, role=reader_role)["rowCount"]
    assert isinstance(measured, checks.CouldNotRun)
    assert measured.cause.startswith(f"permission denied for schema {indexes}")
    assert f"role {reader_role} needs SELECT on the view's index tables" in measured.cause
    conn.execute(f'GRANT USAGE ON SCHEMA "{indexes}" TO "{reader_role}"')
    conn.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{indexes}" TO "{reader_role}"')
    measured, _ = run_sql_checks(conn, req, role=reader_role)["rowCount"]
    assert measured == checks.RowCounts(candidate=400, active=500)
    # the role ends with the transaction
    assert conn.execute("SELECT current_user = session_user").fetchone() == (True,)


class CountingProxy:
    """A TCP relay to the stack's PostgreSQL that counts the bytes the server sends: what a
    check transfers to the operator, on the wire, whatever the client library buffers."""

    def __init__(self, pg: dict[str, Any]) -> None:
        self.pg = pg
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._lock = threading.Lock()
        self._received = 0
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection((self.pg["host"], int(self.pg["port"])))
            self._sockets += [client, server]
            for source, sink, counted in ((client, server, False), (server, client, True)):
                threading.Thread(target=self._pump, args=(source, sink, counted),
                                 daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, counted: bool) -> None:
        try:
            while data := source.recv(65536):
                if counted:  # before it is passed on: the client cannot have it uncounted
                    with self._lock:
                        self._received += len(data)
                sink.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_WR)

    @property
    def received(self) -> int:
        with self._lock:
            return self._received

    def connect(self) -> psycopg.Connection[Any]:
        return psycopg.connect(host="127.0.0.1", port=self.port, dbname=self.pg["database"],
                               user=self.pg["user"], password=self.pg["password"],
                               sslmode="disable", autocommit=True)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        for each in self._sockets:
            each.close()


@pytest.fixture()
def proxy(stack: Any) -> Iterator[CountingProxy]:
    relay = CountingProxy(stack.pg)
    yield relay
    relay.close()


CAP_BYTES = COLUMN_LIMIT * (VALUE_LIMIT + 1) * 4
"""The most an assertion's values can take on the wire: one row, COLUMN_LIMIT values of
VALUE_LIMIT + 1 characters of at most 4 bytes."""
PROTOCOL_BYTES = 16 * 1024
"""Everything else a check exchanges (settings echoed, the row descriptions, statuses)."""


def test_a_check_returning_1001_rows_of_huge_values_sends_one_capped_row(
        proxy: CountingProxy, indexes: str) -> None:
    huge = 1_000_000
    many = ", ".join(f"repeat('{i % 10}', 10000) || a.customer_id AS v{i}" for i in range(100))
    req = request(indexes, {"assertions": [
        {"name": "huge", "sql": f"SELECT repeat('x', {huge}) || a.customer_id AS wide, "
                                f"repeat('y', {huge}) AS wider, a.balance "
                                "FROM {index} a, {index} b"},
        {"name": "many", "sql": f"SELECT {many} FROM {{index}} a, {{index}} b"}]})
    with proxy.connect() as conn:
        before = proxy.received
        found = run_sql_checks(conn, req)
        received = proxy.received - before
        # the counter sees what crosses: the same value fetched as it is takes a megabyte
        conn.execute(f"SELECT repeat('x', {huge})").fetchone()
        assert proxy.received - before - received > huge
    cut = "x" * (VALUE_LIMIT - 3) + "..."
    assert found["huge"][0] == checks.AssertionAnswer(rows=1000, first_row=(
        cut, "y" * (VALUE_LIMIT - 3) + "...", "10"), more=True)
    many_answer = found["many"][0]
    assert isinstance(many_answer, checks.AssertionAnswer)
    assert (many_answer.rows, many_answer.more) == (1000, True)
    assert many_answer.first_row is not None and len(many_answer.first_row) == COLUMN_LIMIT
    assert all(len(v) == VALUE_LIMIT for v in many_answer.first_row)
    # two checks of 1,001 rows of 2 MB and 1 MB each: one capped row of each crossed
    assert received < 2 * (CAP_BYTES + PROTOCOL_BYTES), received


def _plan(conn: psycopg.Connection[Any], query: sql.Composable) -> dict[str, Any]:
    with conn.transaction(force_rollback=True):
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        conn.execute(session_settings(30_000))
        row = conn.execute(sql.SQL("EXPLAIN (ANALYZE, FORMAT JSON) {}").format(query)).fetchone()
    assert row is not None
    found: dict[str, Any] = (row[0] if isinstance(row[0], list) else json.loads(row[0]))[0]
    return found


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", ()):
        yield from _nodes(child)


def test_an_ordered_cross_join_keeps_only_the_rows_it_returns(
        conn: psycopg.Connection[Any], indexes: str) -> None:
    """The outer LIMIT bounds the check's own ORDER BY: a top-N heap of 1,001 rows in
    memory instead of a sort of 160,000 rows (on disk once past work_mem)."""
    check = checks.rendered_sql(SqlAssertion(name="c", sql=(
        "SELECT a.customer_id, b.customer_id, md5(a.customer_id || b.customer_id) "
        "FROM {index} a, {index} b ORDER BY 3")), indexes, CAND, ACTIVE)
    plan = _plan(conn, capped_query(check, (25, 25, 25)))["Plan"]
    sorts = [n for n in _nodes(plan) if n["Node Type"] == "Sort"]
    assert [(s["Sort Method"], s["Sort Space Type"]) for s in sorts] == [
        ("top-N heapsort", "Memory")], sorts
    assert plan["Node Type"] == "Limit" and plan["Actual Rows"] == 1001
    unbounded = _plan(conn, sql.SQL(check))["Plan"]
    assert [n.get("Sort Space Type") for n in _nodes(unbounded) if n["Node Type"] == "Sort"
            ] == ["Disk"]


LoginRole = Callable[[dict[str, str], str], psycopg.Connection[Any]]


@pytest.fixture()
def sink_user(stack: Any, conn: psycopg.Connection[Any], indexes: str) -> Iterator[LoginRole]:
    """Connections as a sink user of its own (a login role owning a schema, reading the
    indexes) whose defaults are its own choice (`ALTER ROLE ... SET`); `{schema}` in a value
    or in the setup SQL is its schema."""
    made: list[tuple[str, str, psycopg.Connection[Any]]] = []

    def login(settings: dict[str, str], setup: str = "") -> psycopg.Connection[Any]:
        role, password = f"dv_sink_{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
        own = f"{role}_own"
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
            sql.Identifier(role), sql.Literal(password)))
        conn.execute(sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(
            sql.Identifier(own), sql.Identifier(role)))
        conn.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(
            sql.Identifier(indexes), sql.Identifier(role)))
        conn.execute(sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}").format(
            sql.Identifier(indexes), sql.Identifier(role)))
        for name, value in settings.items():
            conn.execute(sql.SQL("ALTER ROLE {} SET {} = {}").format(
                sql.Identifier(role), sql.Identifier(name), sql.SQL(value.format(schema=own))))
        session = psycopg.connect(host=stack.pg["host"], port=stack.pg["port"],
                                  dbname=stack.pg["database"], user=role, password=password,
                                  autocommit=True)
        made.append((role, own, session))
        if setup:
            session.execute(setup.format(schema=own))
        return session

    yield login
    for role, own, session in made:
        session.close()
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(own)))
        conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
        conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def _as_text(row: tuple[Any, ...] | None) -> tuple[str, ...] | None:
    if row is None:
        return None
    return tuple(str(v).lower() if isinstance(v, bool) else str(v) for v in row)


@pytest.mark.parametrize("misread", MISREAD, ids=lambda m: m.what)
def test_the_sink_user_s_defaults_do_not_change_how_a_check_reads(
        sink_user: LoginRole, indexes: str, misread: Misread) -> None:
    """Each text reads otherwise in a plain session of a sink user whose defaults say so
    (what core.judges.assertion_sql could not see); as a check it reads as the policy read it."""
    session = sink_user(misread.settings, misread.setup)
    rendered = checks.rendered_sql(SqlAssertion(name="m", sql=misread.sql), indexes, CAND,
                                   ACTIVE)
    assert _as_text(session.execute(rendered).fetchone()) != misread.read
    measured, _ = run_sql_checks(session, request(indexes, {"assertions": [
        {"name": "m", "sql": misread.sql}]}))["m"]
    assert measured == checks.AssertionAnswer(rows=1, first_row=misread.read)
    assert _as_text(session.execute(rendered).fetchone()) != misread.read  # rolled back


SETTINGS_READ = ("SELECT current_setting('work_mem'), current_setting('hash_mem_multiplier'), "
                 "current_setting('search_path'), current_setting('standard_conforming_strings'),"
                 " current_setting('client_encoding'), current_setting('temp_file_limit') "
                 "FROM {index} LIMIT 1")
"""Refused by core.judges.assertion_sql (current_setting); run here directly to read the session."""


def test_a_check_gets_no_more_memory_than_postgres_defaults_whatever_the_sink_user_set(
        conn: psycopg.Connection[Any], sink_user: LoginRole, indexes: str) -> None:
    session = sink_user({"work_mem": "'2GB'", "hash_mem_multiplier": "1000",
                         "search_path": '"{schema}", pg_catalog', "client_encoding": "'LATIN1'",
                         "standard_conforming_strings": "off"}, "")
    req = request(indexes, {"assertions": [{"name": "s", "sql": SETTINGS_READ}]})
    measured, _ = run_sql_checks(session, req)["s"]
    # temp_file_limit needs a superuser: the sink user cannot set it, so it stays unbounded
    assert measured == checks.AssertionAnswer(rows=1, first_row=(
        "4MB", "2", "pg_catalog, pg_temp", "on", "UTF8", "-1"))
    measured, _ = run_sql_checks(conn, req)["s"]  # the stack's user is a superuser
    assert measured == checks.AssertionAnswer(rows=1, first_row=(
        "4MB", "2", "pg_catalog, pg_temp", "on", "UTF8", "2GB"))


def test_a_superuser_s_check_stops_at_its_temp_file_limit(
        conn: psycopg.Connection[Any], indexes: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(postgres_checks, "CHECK_TEMP_FILE_LIMIT", "1MB")
    req = request(indexes, {"assertions": [{"name": "spills", "expect": "true", "sql": (
        "SELECT count(DISTINCT a.customer_id || b.customer_id || md5(a.customer_id || "
        "b.customer_id)) > 0 FROM {index} a, {index} b")}]})
    measured, _ = run_sql_checks(conn, req)["spills"]
    assert measured == checks.CouldNotRun(
        "temporary file size exceeds temp_file_limit (1024kB)")


def test_values_reach_the_operator_by_their_output_functions_not_by_casts(
        conn: psycopg.Connection[Any], indexes: str) -> None:
    """The cap turns values into text as PostgreSQL writes them: a cast its owner gave the
    index's row type is not called (the check's own text could call it, with its rights)."""
    row_type = sql.Identifier(indexes, CAND)
    conn.execute(sql.SQL("CREATE FUNCTION {}(r {}) RETURNS text LANGUAGE sql "
                         "AS $$SELECT 'the owner''s code ran'$$").format(
        sql.Identifier(indexes, "as_text"), row_type))
    conn.execute(sql.SQL("CREATE CAST ({} AS text) WITH FUNCTION {}({})").format(
        row_type, sql.Identifier(indexes, "as_text"), row_type))
    req = request(indexes, {"assertions": [{"name": "row", "sql": (
        "SELECT c, NULL::int, c.balance > 0, ARRAY[c.customer_id], NULL::text "
        "FROM {index} c ORDER BY c.customer_id LIMIT 1")}]})
    measured, _ = run_sql_checks(conn, req)["row"]
    assert measured == checks.AssertionAnswer(rows=1, first_row=(
        "(c-0000,10)", "NULL", "true", "{c-0000}", "NULL"))
