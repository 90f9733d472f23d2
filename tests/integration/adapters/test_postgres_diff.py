"""The diff check against the stack's PostgreSQL: two indexes built with known differences,
compared row by row and by hashed key ranges, with the counts written out by hand."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import replace
from typing import Any

import psycopg
import pytest

from derived_views.adapters.postgres.checks import run_sql_checks
from derived_views.adapters.sink import diff_indexes
from derived_views.adapters.sink_contract import SinkUnavailable
from derived_views.api.spec import CutoverChecks, DiffCheck
from derived_views.api.status import CheckOutcome
from derived_views.cli.diff import Compared, diff_json, diff_table
from derived_views.core import check_runs
from derived_views.core.cutover import checks
from derived_views.core.cutover.diff import ColumnChanges, DiffFound, Mode

CAND, ACTIVE = "acct__cand0000d1", "acct__actv0000d1"
T0 = dt.datetime(2026, 11, 24, tzinfo=dt.UTC)


def request(schema: str, diff: dict[str, Any], *, key: tuple[str, ...] = ("customer_id",)
            ) -> check_runs.CheckRequest:
    return check_runs.CheckRequest(
        revision="cand0000d1", schema=schema, index=CAND, active_index=ACTIVE,
        primary_key=key, same_key=True,
        checks=CutoverChecks.model_validate({"diff": diff, "timeoutSeconds": 30}),
        checks_hash="h")


def build(conn: psycopg.Connection[Any], schema: str, rows: int, candidate_sql: str,
          *, extra: str = "") -> None:
    """The active: `rows` customers c-00000.. with balance 10 and note 'n'; the candidate the
    same rows changed by `candidate_sql` (statements on "cand")."""
    for table in (ACTIVE, CAND):
        conn.execute(f'CREATE TABLE "{schema}"."{table}" (customer_id text PRIMARY KEY, '
                     f"balance double precision, note text{extra if table == CAND else ''})")
        conn.execute(f'INSERT INTO "{schema}"."{table}" (customer_id, balance, note) '
                     "SELECT format('c-%s', lpad(i::text, 5, '0')), 10, 'n' "
                     f"FROM generate_series(0, {rows - 1}) i")
    for statement in candidate_sql.split(";"):
        if statement.strip():
            conn.execute(statement.replace("cand", f'"{schema}"."{CAND}"'))


def diff_of(conn: psycopg.Connection[Any], req: check_runs.CheckRequest) -> DiffFound:
    measured, seconds = run_sql_checks(conn, req)["diff"]
    assert isinstance(measured, DiffFound), measured
    assert seconds >= 0
    return measured


THREE_CHANGED = ("UPDATE cand SET balance = 11 "
                 "WHERE customer_id IN ('c-00007', 'c-00042', 'c-00099')")


def test_three_changed_rows_of_a_hundred(conn: psycopg.Connection[Any], schema: str) -> None:
    build(conn, schema, 100, THREE_CHANGED)
    found = diff_of(conn, request(schema, {"maxChangedRows": "1%"}))
    assert found == DiffFound(
        mode=Mode.FULL, candidate_rows=100, active_rows=100, only_candidate=0, only_active=0,
        changed=3, columns=(ColumnChanges("balance", 3, ("c-00007", "c-00042", "c-00099")),
                            ColumnChanges("note", 0)),
        changed_examples=("c-00007", "c-00042", "c-00099"), compared=200)


@pytest.mark.parametrize(("threshold", "outcome"), [
    ("1%", CheckOutcome.Failed), ("2%", CheckOutcome.Failed), ("3%", CheckOutcome.Passed),
    ("5%", CheckOutcome.Passed), (2, CheckOutcome.Failed), (3, CheckOutcome.Passed)])
def test_the_threshold_blocks_the_cutover(conn: psycopg.Connection[Any], schema: str,
                                          threshold: int | str, outcome: CheckOutcome) -> None:
    build(conn, schema, 100, THREE_CHANGED)
    req = request(schema, {"maxChangedRows": threshold})
    run = checks.judge_checks(req, run_sql_checks(conn, req), T0)
    assert run.results[0].outcome == outcome
    assert run.results[0].observed == (
        "3 of 100 rows differ (row by row): 0 only in the candidate, 0 only in the active, "
        "3 changed (e.g. c-00007, c-00042, c-00099); by column: balance 3")


def test_a_column_threshold_blocks_on_its_own(conn: psycopg.Connection[Any],
                                              schema: str) -> None:
    build(conn, schema, 100, THREE_CHANGED)
    req = request(schema, {"maxChangedRows": "5%", "maxChangedRowsByColumn": {"balance": 2,
                                                                            "note": 0}})
    run = checks.judge_checks(req, run_sql_checks(conn, req), T0)
    assert run.results[0].outcome == CheckOutcome.Failed
    assert run.results[0].expected == ("at most 5 rows (5% of 100) differ; balance at most 2 "
                                       "rows; note at most 0 rows")


# The candidate: 2 rows dropped, 4 added, 3 balances and 2 notes changed (one row both).
MIXED = ("DELETE FROM cand WHERE customer_id IN ('c-00010', 'c-00020');"
         "INSERT INTO cand VALUES ('c-90000', 1, 'x'), ('c-90001', 1, 'x'), ('c-90002', 1, 'x'),"
         " ('c-90003', NULL, NULL);"
         "UPDATE cand SET balance = -1 WHERE customer_id IN ('c-00001', 'c-00002', 'c-00003');"
         "UPDATE cand SET note = NULL WHERE customer_id IN ('c-00003', 'c-00004')")


@pytest.mark.parametrize(("full_max", "mode"), [(100_000, Mode.FULL), (0, Mode.HASHED)])
def test_rows_on_one_side_and_changed_columns(conn: psycopg.Connection[Any], schema: str,
                                              full_max: int, mode: Mode) -> None:
    build(conn, schema, 2000, MIXED)
    found = diff_of(conn, request(schema, {"maxChangedRows": 0,
                                           "fullComparisonMaxRows": full_max}))
    assert found.mode == mode
    assert (found.candidate_rows, found.active_rows) == (2002, 2000)
    assert (found.only_candidate, found.only_active, found.changed) == (4, 2, 4)
    assert found.columns == (ColumnChanges("balance", 3, ("c-00001", "c-00002", "c-00003")),
                             ColumnChanges("note", 2, ("c-00003", "c-00004")))
    assert found.only_candidate_examples == ("c-90000", "c-90001", "c-90002")
    assert found.only_active_examples == ("c-00010", "c-00020")
    assert found.changed_examples == ("c-00001", "c-00002", "c-00003")
    assert found.different == 10
    if mode is Mode.HASHED:
        # 10 rows differ: at most 10 of the 1024 ranges are compared row by row
        assert found.ranges == 1024 and 1 <= found.differing_ranges <= 10


def test_hashed_on_a_larger_index(conn: psycopg.Connection[Any], schema: str) -> None:
    build(conn, schema, 50_000, "UPDATE cand SET note = 'm' WHERE customer_id IN "
                                "('c-00005', 'c-12345', 'c-49999')")
    found = diff_of(conn, request(schema, {"maxChangedRows": 0, "fullComparisonMaxRows": 10_000}))
    assert found.mode == Mode.HASHED
    assert (found.only_candidate, found.only_active, found.changed) == (0, 0, 3)
    assert found.columns[1] == ColumnChanges("note", 3, ("c-00005", "c-12345", "c-49999"))
    assert found.ranges == 4096 and 1 <= found.differing_ranges <= 3


def test_only_named_columns_are_compared(conn: psycopg.Connection[Any], schema: str) -> None:
    build(conn, schema, 100, MIXED.split(";", 1)[1])  # all but the deletion
    found = diff_of(conn, request(schema, {"maxChangedRows": 0, "columns": ["note"]}))
    assert [c.column for c in found.columns] == ["note"]
    assert (found.only_candidate, found.only_active, found.changed) == (4, 0, 2)


def test_a_column_of_one_index_is_said_not_compared(conn: psycopg.Connection[Any],
                                                    schema: str) -> None:
    build(conn, schema, 100, "UPDATE cand SET tier = 'gold' WHERE customer_id = 'c-00001'",
          extra=", tier text")
    found = diff_of(conn, request(schema, {"maxChangedRows": 0}))
    assert (found.changed, found.not_compared) == (0, ("tier",))


def test_unknown_columns_are_refused(conn: psycopg.Connection[Any], schema: str) -> None:
    build(conn, schema, 10, "", extra=", tier text")
    for named in (["tier"], ["balanse"], ["customer_id"]):
        measured, _ = run_sql_checks(conn, request(schema, {"maxChangedRows": 0,
                                                            "columns": named}))["diff"]
        assert measured == checks.CouldNotRun(
            f"diff.columns names {named[0]}, which is not a compared column of both indexes "
            "(the primary key is matched, not compared); columns both have: balance, note")


def test_a_compound_key_and_quoted_names(conn: psycopg.Connection[Any], schema: str) -> None:
    for table in (ACTIVE, CAND):
        conn.execute(f'CREATE TABLE "{schema}"."{table}" ("Region" text, "id; drop" int, '
                     '"Amount ""x""" numeric, PRIMARY KEY ("Region", "id; drop"))')
        conn.execute(f'INSERT INTO "{schema}"."{table}" SELECT r, i, 1.0 FROM '
                     "unnest(ARRAY['eu', 'us']) r, generate_series(1, 50) i")
    conn.execute(f'UPDATE "{schema}"."{CAND}" SET "Amount ""x""" = 1.00 '
                 """WHERE "Region" = 'us' AND "id; drop" = 7""")
    found = diff_of(conn, request(schema, {"maxChangedRows": 0}, key=("Region", "id; drop")))
    # 1.00 reads otherwise than 1.0: a changed value (compared by the text the type writes)
    assert (found.candidate_rows, found.changed, found.changed_examples) == (100, 1, ("us,7",))


def test_dv_diff_compares_through_the_sink_secret(conn: psycopg.Connection[Any], schema: str,
                                                  stack: Any) -> None:
    """What `dv diff` runs and prints: a connection of its own from the Secret's keys."""
    build(conn, schema, 100, THREE_CHANGED)
    secret = dict(item.split("=", 1) for item in stack.pg_dsn.split())
    secret = {"host": secret["host"], "port": secret["port"], "database": secret["dbname"],
              "user": secret["user"], "password": secret["password"]}
    judged = DiffCheck.model_validate({"maxChangedRows": "1%"})
    compared = Compared("shop/balances", request(schema, {"maxChangedRows": "1%"}),
                        "cand0000d1", "actv0000d1", judged)
    measured, seconds = diff_indexes("postgres", secret, compared.request)
    assert isinstance(measured, DiffFound) and measured.changed == 3
    table = diff_table(compared, measured, 0.01)
    assert table.splitlines()[2:] == [
        "                      ROWS  EXAMPLE KEYS",
        "only in the revision     0  -",
        "only in --against        0  -",
        "changed                  3  c-00007, c-00042, c-00099",
        "  balance                3  c-00007, c-00042, c-00099",
        "  note                   0  -",
        "",
        "3 rows differ: the diff check blocks the cutover (expected at most 1 row (1% of 100) "
        "differ)"]
    shown = json.loads(diff_json(compared, measured, seconds))
    assert (shown["changed"], shown["verdict"]["outcome"]) == (
        {"rows": 3, "examples": ["c-00007", "c-00042", "c-00099"]}, "Failed")
    with pytest.raises(SinkUnavailable, match=r"cannot connect to 127\.0\.0\.1:1/"):
        diff_indexes("postgres", secret, compared.request, address="127.0.0.1:1")


def _ledger(conn: psycopg.Connection[Any], schema: str, revision: str, batch: int,
            end: int) -> None:
    conn.execute(f'CREATE TABLE IF NOT EXISTS "{schema}".dv_ledger (revision text, '
                 "batch_id bigint, end_offsets jsonb, PRIMARY KEY (revision, batch_id))")
    conn.execute(f'INSERT INTO "{schema}".dv_ledger VALUES (%s, %s, %s)',
                 (revision, batch, json.dumps({"orders": {"0": end}})))


def test_keys_written_past_the_common_position_are_left_out(
        conn: psycopg.Connection[Any], schema: str) -> None:
    """Under traffic the active's job committed one batch more (records 100..119) than the
    candidate's: the 5 keys that batch wrote may differ by the lag alone, and are left out of
    both sides; c-00007, one of them, is then not counted as changed either."""
    build(conn, schema, 100, THREE_CHANGED)
    _ledger(conn, schema, "cand0000d1", 0, 100)
    _ledger(conn, schema, "actv0000d1", 0, 100)
    with conn.transaction():  # one batch: its rows and its ledger row, as the job writes them
        conn.execute(f'UPDATE "{schema}"."{ACTIVE}" SET balance = 99 WHERE customer_id IN '
                     "('c-00001', 'c-00002', 'c-00003', 'c-00004', 'c-00007')")
        _ledger(conn, schema, "actv0000d1", 1, 120)
    req = replace(request(schema, {"maxChangedRows": "1%"}), active_revision="actv0000d1")
    found = diff_of(conn, req)
    assert (found.changed, found.in_flight, found.changed_examples) == (
        2, 5, ("c-00042", "c-00099"))
    assert found.active_rows == 100  # the threshold's base is still the whole index
    assert "5 keys left out: written past the log position both indexes have reached" in \
        checks.judge_checks(req, run_sql_checks(conn, req), T0).results[0].observed
    # once the candidate's job has read as far, nothing is in flight and all of them count
    with conn.transaction():
        conn.execute(f'UPDATE "{schema}"."{CAND}" SET balance = 99 WHERE customer_id IN '
                     "('c-00001', 'c-00002')")
        _ledger(conn, schema, "cand0000d1", 1, 120)
    found = diff_of(conn, req)
    assert (found.changed, found.in_flight) == (5, 0)  # c-00003, -04, -07 (99 vs 10/11), -42, -99
