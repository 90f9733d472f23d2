"""A view's first revision, and what stops it before any job starts (phases/start.py):
the backfill and its intent, the first promotion, a missing topic, Secret or checkpoint
store, a sink table another view owns.

The planner, scenario by scenario, in the simulated world of tests/support/world; expected
revisions, names and times are written out by hand (revision hashes come from
tests/unit/core/test_revision.py's independently computed values).
"""

from __future__ import annotations

import datetime as dt

from derived_views.core import actions as A
from support.world.samples import I1, R1, SQL_V1, T0, spec_body
from support.world.scenarios import (
    APP1,
    CKPT,
    effects,
    kinds,
)
from support.world.world import World, served_world


def test_first_reconcile_starts_the_backfill_and_records_intent_first() -> None:
    world = World(spec_body(SQL_V1))
    actions = world.reconcile()
    assert kinds(actions) == ["RecordIntent", "AddFinalizer", "CreateSparkApplication",
                              "UpdateStatus", "PruneLedger", "EmitEvent"]
    intent = actions[0]
    assert isinstance(intent, A.RecordIntent)
    assert intent.intent.steps == [
        "add finalizer derivedviews.io/cleanup",
        f"create SparkApplication {APP1} (revision {R1})"]
    create = actions[2]
    assert isinstance(create, A.CreateSparkApplication)
    assert (create.revision, create.name) == (R1, APP1)
    event = actions[5]
    assert event == A.EmitEvent("BackfillStarted", f"Started replaying revision {R1} from offset 0 "
                                                   f"into index {I1}.")
    status = world.parsed_status()
    assert status.intent is None
    assert status.revision == R1 and status.observed_generation == 1
    assert status.phase is not None and status.phase.value == "Pending"
    assert status.candidate is not None and status.candidate.revision == R1
    assert status.active is None
    record = status.record(R1)
    assert record is not None
    assert record.checkpoint_location == f"{CKPT}/{R1}"
    assert record.started_at == T0
    assert world.condition("Ready") == ("False", "Backfilling")
    assert world.condition("Reconciling") == ("True", "Backfilling")
    assert world.condition("Stalled") == ("False", "AsExpected")


def test_first_revision_becomes_active_once_caught_up() -> None:
    world = World(spec_body(SQL_V1))
    # t=0 create; 5 submitted; 10 running (table created); 15 commits 50 of 120/80;
    # 20: 100/80; 25: 120/80 -> lag 0 first seen at 25 (checked at the next reconcile).
    switched_at = None
    for _ in range(12):
        actions = world.reconcile()
        if any(isinstance(a, A.SwitchAlias) for a in actions):
            switched_at = world.now
            switch = next(a for a in actions if isinstance(a, A.SwitchAlias))
            assert switch == A.SwitchAlias("public", "orders_by_customer", I1, None)
            break
        assert world.alias is None
        world.tick()
    assert switched_at is not None
    status = world.parsed_status()
    # caught up observed at t=25 (after the batch of tick 25): a first revision serves at
    # once (stableForSeconds guards a move from a serving revision, and there is none)
    assert switched_at == T0 + dt.timedelta(seconds=25)
    assert status.active is not None and status.active.revision == R1
    assert status.active.since == switched_at
    assert status.candidate is None
    assert world.condition("Ready") == ("True", "Serving")
    assert "CutoverCompleted" in world.event_reasons()


def test_manual_mode_still_promotes_the_first_revision() -> None:
    world = World(spec_body(SQL_V1, cutover={"mode": "manual"}))
    world.settle(ticks=10)
    assert world.alias == I1


def test_a_sink_table_owned_by_another_view_stalls_without_touching_it() -> None:
    world = World(spec_body(SQL_V1))
    world.alias_owner = "billing/orders-by-customer"  # another namespace's view got there first
    actions = world.reconcile()
    assert effects(actions) == []
    assert world.condition("Stalled") == ("True", "SinkTableClaimed")
    assert world.condition("Ready") == ("False", "SinkTableClaimed")
    stalled = world.parsed_status().condition("Stalled")
    assert stalled is not None and "billing/orders-by-customer" in stalled.message


def test_a_missing_topic_stalls_the_view_without_starting_a_job() -> None:
    world = World(spec_body(SQL_V1))
    world.missing_topics = {"orders"}
    for _ in range(3):
        world.reconcile()
        world.tick()
    assert world.apps == {}
    assert world.condition("Stalled") == ("True", "TopicMissing")
    assert "orders not found on kafka:9092" in world.parsed_status().condition("Stalled").message  # type: ignore[union-attr]
    world.missing_topics = set()
    world.settle(ticks=8)
    assert world.alias == I1 and world.condition("Ready") == ("True", "Serving")


def test_a_missing_sink_secret_is_named_in_degraded_and_heals_when_created() -> None:
    world = served_world()
    world.sink_up = False
    world.sink_problem = ("SecretMissing", "sink secret shop/views-db not found: create it")
    world.reconcile()
    assert world.condition("Degraded") == ("True", "SecretMissing")
    assert world.condition("Ready") == ("False", "SecretMissing")
    message = world.parsed_status().condition("Ready").message  # type: ignore[union-attr]
    assert "secret shop/views-db not found" in message
    assert world.alias == I1 and world.tables == {I1}  # nothing switched or dropped
    world.sink_up = True
    world.reconcile()
    assert world.condition("Ready") == ("True", "Serving")
    assert world.condition("Degraded") == ("False", "AsExpected")


def test_a_pod_local_checkpoint_base_in_a_cluster_starts_no_job_and_says_what_to_set() -> None:
    from dataclasses import replace

    from support.world.samples import SAMPLE_TENANCY, make_settings

    own_bases = replace(SAMPLE_TENANCY, checkpoint_override=True)  # tenancy.checkpoints
    world = World(spec_body(SQL_V1, spark={"checkpointBase": "/tmp/ck"}),
                  settings=make_settings(in_cluster=True, tenancy=own_bases))
    world.reconcile()
    assert world.apps == {}
    assert world.condition("Stalled") == ("True", "CheckpointNotDurable")
    message = world.parsed_status().condition("Stalled").message  # type: ignore[union-attr]
    assert "'/tmp/ck'" in message and "s3a://bucket/prefix" in message
    assert world.parsed_status().revisions == []  # nothing recorded with that location
    world.edit(spec_body(SQL_V1, spark={"checkpointBase": "s3a://views/ck"}))
    world.settle(ticks=8)
    assert world.alias == I1
    location = world.parsed_status().record(R1).checkpoint_location  # type: ignore[union-attr]
    assert location == f"s3a://views/ck/shop/orders-by-customer/{R1}"
    # outside a cluster (the local stack) a plain directory is fine
    local = World(spec_body(SQL_V1, spark={"checkpointBase": "/tmp/ck"}),
                  settings=make_settings(tenancy=own_bases))
    local.settle(ticks=8)
    assert local.alias == I1
