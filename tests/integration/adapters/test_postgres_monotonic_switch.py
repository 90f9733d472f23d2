"""Readers never go back in time: the PostgreSQL switch against real PostgreSQL, with the
serving job's commits held while it compares the two ledgers (core.cutover.monotonic)."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import psycopg
import pytest

from derived_views.adapters.postgres import sink as pg
from derived_views.adapters.sink_contract import SwitchDeferred
from derived_views.core.cutover.monotonic import Guard
from derived_views.core.observed import IndexOwner
from dvstack.testing.waiting import wait_for

PARTITIONS = frozenset({("t", 0), ("t", 1)})
OWNER = IndexOwner("ns", "v", "uid-v")


def _setup(conn: Any, schema: str, serving: dict[str, int], candidate: dict[str, int]) -> None:
    conn.execute(f'CREATE TABLE "{schema}".dv_ledger (revision text, batch_id bigint, '
                 "end_offsets jsonb, committed_at timestamptz DEFAULT now(), "
                 "PRIMARY KEY (revision, batch_id))")
    for rev, offsets in (("a", serving), ("c", candidate)):
        conn.execute(f'CREATE TABLE "{schema}".v__{rev} (k text PRIMARY KEY, n int)')
        _commit_batch(conn, schema, rev, 0, offsets)
    pg.switch_alias(conn, schema, "v", "v__a", None, owner=OWNER)


def _commit_batch(conn: Any, schema: str, rev: str, batch: int, offsets: dict[str, int]) -> None:
    """What a job's batch does: its rows and its ledger row in one transaction."""
    with conn.transaction():
        conn.execute(f'INSERT INTO "{schema}".v__{rev} VALUES (%s, %s) '
                     "ON CONFLICT (k) DO UPDATE SET n = excluded.n", (f"k{batch}", batch))
        conn.execute(f'INSERT INTO "{schema}".dv_ledger (revision, batch_id, end_offsets) '
                     "VALUES (%s, %s, %s)", (rev, batch, json.dumps({"t": offsets})))


def _share_lock_held(conn: Any, schema: str, table: str) -> bool:
    return bool(conn.execute(
        "SELECT count(*) FROM pg_locks WHERE relation = to_regclass(%s) AND mode = 'ShareLock' "
        "AND granted", (f'"{schema}".{table}',)).fetchone()[0])


def _waiting_on_a_lock(conn: Any, pid: int) -> bool:
    row = conn.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s",
                       (pid,)).fetchone()
    return row is not None and row[0] == "Lock"


def test_a_candidate_that_stays_behind_is_refused_and_nothing_changes(conn: Any,
                                                                     schema: str) -> None:
    _setup(conn, schema, serving={"0": 10, "1": 5}, candidate={"0": 12, "1": 4})
    guard = Guard("a", "c", PARTITIONS, wait_seconds=0.5)
    started = time.monotonic()
    with pytest.raises(SwitchDeferred, match=r"behind the serving revision a .* on t/1 by 1"):
        pg.switch_alias(conn, schema, "v", "v__c", "v__a", owner=OWNER, not_behind=guard)
    assert time.monotonic() - started >= 0.5  # it waited for the candidate first
    assert pg.alias_target(conn, schema, "v") == "v__a"
    # a partition outside the guard's (recreated under the serving index) is not compared
    pg.switch_alias(conn, schema, "v", "v__c", "v__a", owner=OWNER,
                    not_behind=Guard("a", "c", frozenset({("t", 0)}), wait_seconds=0.5))
    assert pg.alias_target(conn, schema, "v") == "v__c"


def _lock_requested(conn: Any, schema: str, table: str, *, granted: bool) -> bool:
    return bool(conn.execute(
        "SELECT count(*) FROM pg_locks WHERE relation = to_regclass(%s) AND mode = 'ShareLock' "
        "AND granted = %s", (f'"{schema}".{table}', granted)).fetchone()[0])


def test_a_candidate_far_behind_is_awaited_before_anything_is_held(conn: Any,
                                                                  schema: str) -> None:
    _setup(conn, schema, serving={"0": 10, "1": 5}, candidate={"0": 10, "1": 3})
    with pytest.raises(SwitchDeferred, match=r"for 0.5s while both jobs committed, on t/1 by 2"):
        pg.switch_alias(conn, schema, "v", "v__c", "v__a", owner=OWNER,
                        not_behind=Guard("a", "c", PARTITIONS, wait_seconds=0.5))
    assert pg.alias_target(conn, schema, "v") == "v__a"


def test_the_switch_holds_the_serving_job_and_waits_for_the_candidate(stack: Any, conn: Any,
                                                                     schema: str) -> None:
    """The candidate is level with the serving ledger, but the serving job is committing a
    batch as the switch locks: the held ledger is ahead, and the switch waits for the
    candidate's next batch with the serving job's following batch held."""
    _setup(conn, schema, serving={"0": 10, "1": 5}, candidate={"0": 10, "1": 5})
    outcome: list[BaseException | None] = []

    def switch() -> None:
        try:
            with psycopg.connect(stack.pg_dsn, autocommit=True) as op:
                pg.switch_alias(op, schema, "v", "v__c", "v__a", owner=OWNER,
                                lock_timeout_ms=60_000,
                                not_behind=Guard("a", "c", PARTITIONS, wait_seconds=60))
            outcome.append(None)
        except BaseException as exc:  # reported by the test thread
            outcome.append(exc)

    with psycopg.connect(stack.pg_dsn, autocommit=True) as serving_job:
        pid = serving_job.info.backend_pid
        batch_1 = serving_job.transaction()
        batch_1.__enter__()  # the serving job's batch 1, written but not yet committed
        serving_job.execute(f'INSERT INTO "{schema}".v__a VALUES (%s, %s)', ("k1", 1))
        serving_job.execute(f'INSERT INTO "{schema}".dv_ledger (revision, batch_id, end_offsets) '
                            "VALUES ('a', 1, %s)", (json.dumps({"t": {"0": 11, "1": 6}}),))
        switching = threading.Thread(target=switch)
        switching.start()
        try:
            wait_for(lambda: _lock_requested(conn, schema, "v__a", granted=False), timeout=30,
                     what="the switch to ask for the serving index's lock")
            batch_1.__exit__(None, None, None)  # commits: the held ledger is now ahead
            wait_for(lambda: _share_lock_held(conn, schema, "v__a"), timeout=30,
                     what="the switch to hold the serving index")
            # The serving job's next batch cannot land while the switch compares ...
            landed = threading.Thread(target=_commit_batch,
                                      args=(serving_job, schema, "a", 2, {"0": 12, "1": 7}))
            landed.start()
            wait_for(lambda: _waiting_on_a_lock(conn, pid), timeout=30,
                     what="the serving job's commit to wait on the switch")
            assert pg.alias_target(conn, schema, "v") == "v__a"
            # ... and the candidate's next batch, reaching the held ledger, lets it through.
            with psycopg.connect(stack.pg_dsn, autocommit=True) as candidate_job:
                _commit_batch(candidate_job, schema, "c", 1, {"0": 11, "1": 6})
        finally:
            switching.join(timeout=60)
        assert outcome == [None]
        landed.join(timeout=60)
    assert pg.alias_target(conn, schema, "v") == "v__c"
    # the serving job's batch landed after the switch, in the index readers no longer see
    assert conn.execute(f'SELECT max(batch_id) FROM "{schema}".dv_ledger WHERE revision = '
                        "'a'").fetchone() == (2,)


def _has_read_the_ledger(conn: Any, pid: int) -> bool:
    row = conn.execute("SELECT query FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()
    return row is not None and "dv_ledger" in (row[0] or "")


def test_a_candidate_trailing_a_serving_job_that_keeps_committing_still_switches(
        stack: Any, conn: Any, schema: str) -> None:
    """On a loaded cluster each job's batch takes many trigger intervals, and the candidate's
    newest batch almost never reaches the serving job's newest: the switch waits for the
    serving ledger as it stood when it began, then holds it."""
    _setup(conn, schema, serving={"0": 10, "1": 5}, candidate={"0": 8, "1": 5})
    outcome: list[BaseException | None] = []
    pids: list[int] = []

    def switch() -> None:
        try:
            with psycopg.connect(stack.pg_dsn, autocommit=True) as op:
                pids.append(op.info.backend_pid)
                pg.switch_alias(op, schema, "v", "v__c", "v__a", owner=OWNER,
                                not_behind=Guard("a", "c", PARTITIONS, wait_seconds=60))
            outcome.append(None)
        except BaseException as exc:  # reported by the test thread
            outcome.append(exc)

    switching = threading.Thread(target=switch)
    switching.start()
    try:
        wait_for(lambda: pids and _has_read_the_ledger(conn, pids[0]), timeout=30,
                 what="the switch to read the serving ledger at 10")
        with psycopg.connect(stack.pg_dsn, autocommit=True) as serving_job, \
                psycopg.connect(stack.pg_dsn, autocommit=True) as candidate_job:
            _commit_batch(serving_job, schema, "a", 1, {"0": 12, "1": 5})
            # The candidate reaches where the serving job stood, not where it is now ...
            _commit_batch(candidate_job, schema, "c", 1, {"0": 10, "1": 5})
            # ... and the switch holds the serving job there, instead of waiting for a level
            # the candidate would reach only by chance.
            wait_for(lambda: _share_lock_held(conn, schema, "v__a"), timeout=30,
                     what="the switch to hold the serving index")
            assert pg.alias_target(conn, schema, "v") == "v__a"
            _commit_batch(candidate_job, schema, "c", 2, {"0": 12, "1": 5})
    finally:
        switching.join(timeout=90)
    assert outcome == [None]
    assert pg.alias_target(conn, schema, "v") == "v__c"
