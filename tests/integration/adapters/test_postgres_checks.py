"""The cutover checks against the stack's PostgreSQL: counts, key samples, assertions, and the
read-only transaction, statement timeout and check role they run under."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from derived_views.adapters.postgres_checks import run_checks
from derived_views.api.spec import CutoverChecks
from derived_views.core import checks

CAND, ACTIVE = "acct__cand000001", "acct__actv000001"


def request(schema: str, body: dict[str, Any], *, active: str | None = ACTIVE
            ) -> checks.CheckRequest:
    return checks.CheckRequest(
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
    found = run_checks(conn, req)
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
    run = checks.judge(req, found, dt.datetime(2026, 11, 24, tzinfo=dt.UTC))
    assert checks.summary(run) == "rowCount failed +3"


def test_a_slow_query_times_out_as_an_error(conn: psycopg.Connection[Any], indexes: str) -> None:
    req = request(indexes, {"assertions": [
        {"name": "slow", "timeoutSeconds": 1,
         "sql": "SELECT a.customer_id FROM {index} a, {index} b, {index} c, {index} d "
                "WHERE a.balance + b.balance + c.balance + d.balance < -1000"}]})
    measured, seconds = run_checks(conn, req)["slow"]
    assert measured == checks.CouldNotRun("timed out after 1s (statement timeout)")
    assert 0.9 < seconds < 30
    # the session is usable afterwards, outside any transaction
    assert conn.execute("SELECT 1").fetchone() == (1,)
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


def test_checks_cannot_write(conn: psycopg.Connection[Any], indexes: str) -> None:
    # a data-modifying CTE gets past a naive "starts with SELECT"; the server refuses it even
    # if core.check_sql were bypassed (this request never passed it): DECLARE CURSOR takes
    # none, and the transaction is read-only besides
    req = request(indexes, {"assertions": [
        {"name": "writes", "sql": "WITH gone AS (DELETE FROM {index} RETURNING customer_id) "
                                  "SELECT customer_id FROM gone"}]})
    measured, _ = run_checks(conn, req)["writes"]
    assert isinstance(measured, checks.CouldNotRun)
    assert measured.cause == "DECLARE CURSOR must not contain data-modifying statements in WITH"
    assert conn.execute(f'SELECT count(*) FROM "{indexes}"."{CAND}"').fetchone() == (400,)


def test_a_sql_error_is_reported(conn: psycopg.Connection[Any], indexes: str) -> None:
    req = request(indexes, {"assertions": [
        {"name": "typo", "sql": "SELECT customer_id FROM {index} WHERE balanse < 0"}]})
    measured, _ = run_checks(conn, req)["typo"]
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
    measured, _ = run_checks(conn, req, role=reader_role)["rowCount"]
    assert isinstance(measured, checks.CouldNotRun)
    assert measured.cause.startswith(f"permission denied for schema {indexes}")
    assert f"role {reader_role} needs SELECT on the view's index tables" in measured.cause
    conn.execute(f'GRANT USAGE ON SCHEMA "{indexes}" TO "{reader_role}"')
    conn.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{indexes}" TO "{reader_role}"')
    measured, _ = run_checks(conn, req, role=reader_role)["rowCount"]
    assert measured == checks.RowCounts(candidate=400, active=500)
    # the role ends with the transaction
    assert conn.execute("SELECT current_user = session_user").fetchone() == (True,)
