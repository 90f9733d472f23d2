"""The served revision and the ones kept for a rollback (phases/served.py): retention,
rollback, a failed active job, a pause, a crash after the switch, the alias repaired,
unreachable services, lost tables and logs.

The planner, scenario by scenario, in the simulated world of tests/support/world; expected
revisions, names and times are written out by hand (revision hashes come from
tests/unit/core/test_revision.py's independently computed values).
"""

from __future__ import annotations

import json

from derived_views.core import actions as A
from derived_views.core.plan import plan
from support.world.samples import I1, I2, R1, R2, SQL_V1, SQL_V2, spec_body
from support.world.scenarios import (
    APP1,
    CKPT,
    effects,
)
from support.world.world import run_until, served_world


def test_rollback_within_retention_resumes_from_the_checkpoint_without_replay() -> None:
    world = served_world()
    world.edit(spec_body(SQL_V2, cutover={"keepPreviousRunningSeconds": 0}))
    run_until(world, lambda w: w.alias == I2)
    world.tick(growth=10)
    world.edit(spec_body(SQL_V1, cutover={"keepPreviousRunningSeconds": 0}))
    actions = world.reconcile()
    create = next(a for a in actions if isinstance(a, A.CreateSparkApplication))
    assert create.name == APP1
    config = json.loads(create.manifest["spec"]["arguments"][1])
    assert config["checkpointLocation"] == f"{CKPT}/{R1}"  # the same one: a resume
    assert not any(isinstance(a, A.DropIndex) for a in actions)
    assert "RollbackStarted" in world.event_reasons()
    world.tick()
    world.tick()  # running: resumes where it stopped
    assert world.apps[APP1].position != {tp: 0 for tp in world.apps[APP1].position}
    run_until(world, lambda w: w.alias == I1, growth=1)
    assert world.phases() == {R1: "Active", R2: "Retiring"}
    assert world.violations == []


def test_reverting_after_the_index_was_dropped_rebuilds_with_a_fresh_checkpoint() -> None:
    world = served_world()
    world.edit(spec_body(SQL_V2))
    run_until(world, lambda w: w.alias == I2)
    run_until(world, lambda w: I1 not in w.tables)
    world.edit(spec_body(SQL_V1))
    actions = world.reconcile()
    create = next(a for a in actions if isinstance(a, A.CreateSparkApplication))
    config = json.loads(create.manifest["spec"]["arguments"][1])
    assert config["checkpointLocation"] == f"{CKPT}/{R1}.1"
    run_until(world, lambda w: w.alias == I1)
    assert world.violations == []


def test_failed_active_job_degrades_and_keeps_serving_until_retried() -> None:
    world = served_world()
    world.fail_job(R1, "Connection refused")
    world.reconcile()
    assert world.alias == I1
    assert world.condition("Degraded") == ("True", "JobFailed")
    assert world.condition("Ready") == ("False", "JobFailed")
    for _ in range(3):
        world.tick()
        assert effects(world.reconcile()) == []
    world.annotations["derivedviews.io/retry"] = "2026-03-01"
    assert effects(world.reconcile()) == [A.DeleteSparkApplication(R1, APP1)]
    actions = world.reconcile()
    assert [a.revision for a in actions if isinstance(a, A.CreateSparkApplication)] == [R1]
    world.settle(ticks=4)
    assert world.condition("Ready") == ("True", "Serving")


def test_active_job_is_recreated_from_its_own_content_after_the_spec_moved_on() -> None:
    world = served_world()
    world.edit(spec_body(SQL_V2))
    world.reconcile()
    del world.apps[APP1]  # someone deleted the active revision's job
    actions = world.reconcile()
    create = next(a for a in actions if isinstance(a, A.CreateSparkApplication))
    assert create.revision == R1
    config = json.loads(create.manifest["spec"]["arguments"][1])
    assert config["transform"] == {"sql": SQL_V1}
    assert config["revision"] == R1 and config["checkpointLocation"] == f"{CKPT}/{R1}"


def test_paused_view_gets_status_only() -> None:
    world = served_world()
    world.annotations["derivedviews.io/paused"] = "true"
    world.edit(spec_body(SQL_V2))
    for _ in range(5):
        actions = world.reconcile()  # the ledger's pruning is upkeep, not an effect
        assert [type(a) for a in actions] in ([A.PruneLedger], [A.UpdateStatus, A.PruneLedger])
        world.tick()
    assert world.condition("Reconciling") == ("False", "Paused")
    del world.annotations["derivedviews.io/paused"]
    actions = world.reconcile()
    assert any(isinstance(a, A.CreateSparkApplication) and a.revision == R2 for a in actions)


def test_a_cutover_interrupted_after_the_switch_is_finished_not_repeated() -> None:
    world = served_world()
    world.edit(spec_body(SQL_V2, cutover={"keepPreviousRunningSeconds": 0}))
    for _ in range(40):
        observed = world.observe()
        if any(isinstance(a, A.SwitchAlias) for a in plan(world.spec, observed, world.now)):
            break
        world.reconcile()
        world.tick()
    world.reconcile(stop_after=2)  # RecordIntent and SwitchAlias landed, then the crash
    assert world.alias == I2
    status = world.parsed_status()
    assert status.intent is not None and status.intent.cutover_to == R2
    assert status.active is not None and status.active.revision == R1
    actions = world.reconcile()
    assert not any(isinstance(a, A.SwitchAlias) for a in actions)
    assert A.DeleteSparkApplication(R1, APP1) in actions
    status = world.parsed_status()
    assert status.intent is None
    assert world.phases() == {R1: "Retiring", R2: "Active"}


def test_alias_moved_by_someone_else_is_pointed_back() -> None:
    world = served_world()
    world.tables.add("orders_by_customer__0000000000")
    world.alias = "orders_by_customer__0000000000"
    actions = world.reconcile()
    assert A.SwitchAlias("public", "orders_by_customer", I1,
                         "orders_by_customer__0000000000") in actions
    assert any(isinstance(a, A.EmitEvent) and a.reason == "AliasRepaired" and a.type == "Warning"
               for a in actions)
    assert world.alias == I1


def test_unreachable_sink_means_no_switch_no_drop_and_ready_unknown() -> None:
    world = served_world()
    world.edit(spec_body(SQL_V2))
    world.sink_up = False
    for _ in range(30):
        actions = world.reconcile()
        assert not any(isinstance(a, A.SwitchAlias | A.DropIndex) for a in actions)
        world.tick()
    assert world.condition("Ready") == ("Unknown", "SinkUnreachable")
    assert world.condition("CaughtUp") == ("Unknown", "LagUnknown")
    world.sink_up = True
    run_until(world, lambda w: w.alias == I2)


def test_unreachable_kafka_means_no_promotion() -> None:
    world = served_world()
    world.edit(spec_body(SQL_V2))
    world.kafka_up = False
    for _ in range(20):
        assert not any(isinstance(a, A.SwitchAlias) for a in world.reconcile())
        world.tick()
    assert world.alias == I1
    world.kafka_up = True
    run_until(world, lambda w: w.alias == I2)


def test_an_orphan_spark_application_of_the_view_is_deleted() -> None:
    world = served_world()
    world.status["revisions"] = [r for r in world.status["revisions"]]
    orphan = dict(world.apps[APP1].obj)
    orphan = {**orphan, "metadata": {**orphan["metadata"], "name": "orders-by-customer-0123456789",
                                     "labels": {"derivedviews.io/revision": "0123456789"}}}
    from support.world.world import App
    world.apps["orders-by-customer-0123456789"] = App(orphan, world.apps[APP1].config)
    actions = world.reconcile()
    assert A.DeleteSparkApplication("0123456789", "orders-by-customer-0123456789") in actions


def test_the_index_the_alias_selects_from_is_never_dropped_even_past_retention() -> None:
    world = served_world()
    world.edit(spec_body(SQL_V2))
    run_until(world, lambda w: w.alias == I2)
    world.tick(seconds=120)  # R1 is due for retirement ...
    world.alias = I1  # ... but someone pointed readers back at it
    actions = world.reconcile()
    assert A.SwitchAlias("public", "orders_by_customer", I2, I1) in actions
    assert not any(isinstance(a, A.DropIndex) and a.index == I1 for a in actions)
    actions = world.reconcile()
    assert A.DropIndex("public", I1, R1) in actions


def test_an_index_is_not_dropped_while_its_job_object_still_exists() -> None:
    world = served_world(delete_lingers=True)
    world.edit(spec_body(SQL_V2, cutover={"retainPreviousSeconds": 0}))
    run_until(world, lambda w: w.alias == I2)
    assert APP1 in world.apps and world.apps[APP1].deleting
    actions = world.reconcile()  # retention is over, but the old job is still going away
    assert not any(isinstance(a, A.DropIndex) for a in actions)
    world.tick()
    actions = world.reconcile()
    assert A.DropIndex("public", I1, R1) in actions
    assert world.violations == []


def test_a_spark_settings_change_restarts_the_job_from_its_checkpoint_without_replay() -> None:
    world = served_world()
    old_manifest = world.apps[APP1].obj
    world.edit(spec_body(SQL_V1, spark={"driver": {"cores": 2, "memory": "3g"}}))
    actions = world.reconcile()
    assert effects(actions) == [A.DeleteSparkApplication(R1, APP1)]
    assert ("Normal", "JobRestarted") in [(e.type, e.reason) for e in world.events]
    run_until(world, lambda w: APP1 in w.apps and w.apps[APP1].obj is not old_manifest)
    new = world.apps[APP1].obj
    assert new["spec"]["driver"]["cores"] == 2 and new["spec"]["driver"]["memory"] == "3g"
    config = json.loads(new["spec"]["arguments"][1])
    assert config["checkpointLocation"] == f"{CKPT}/{R1}"  # same checkpoint: no replay
    assert world.alias == I1 and world.phases() == {R1: "Active"}
    world.settle(ticks=4)
    assert all(not isinstance(a, A.DeleteSparkApplication) for p in world.plans[-4:] for a in p)


def test_a_job_without_the_settings_stamp_is_left_alone() -> None:
    world = served_world()
    world.apps[APP1].obj["metadata"]["annotations"] = {}  # created by an older operator
    world.edit(spec_body(SQL_V1, spark={"driver": {"cores": 2}}))
    assert effects(world.reconcile()) == []


def test_a_view_that_lost_its_table_to_another_stops_its_jobs_and_deletes_nothing() -> None:
    world = served_world(alias_owner="shop/orders-by-customer")
    world.edit(spec_body(SQL_V1, deletionPolicy="Delete"))
    world.alias_owner = "billing/orders-by-customer"
    assert effects(world.reconcile()) == [A.DeleteSparkApplication(R1, APP1)]
    world.tick()
    world.deletion_timestamp = world.now
    world.settle(ticks=3)
    assert world.gone and world.alias == I1 and I1 in world.tables


def test_a_log_recreated_below_the_index_is_degraded_until_a_new_revision_rebuilds() -> None:
    world = served_world()
    world.ends = {tp: 3 for tp in world.ends}  # topic deleted and recreated: 3 records each
    for _ in range(3):
        world.reconcile()
        world.tick()
    assert world.condition("Degraded") == ("True", "TopicReset")
    message = world.parsed_status().condition("Degraded").message  # type: ignore[union-attr]
    assert f"revision {R1}" in message and "orders/0" in message
    world.edit(spec_body(SQL_V2))  # new content: replays the new log from offset 0
    run_until(world, lambda w: w.alias == I2)
    world.reconcile()
    assert world.condition("Degraded") == ("False", "AsExpected")


def test_a_gate_that_moves_the_interval_restarts_the_job_from_its_checkpoint() -> None:
    """The job's micro-batch interval is half the view's gate (the samples gate on messages
    alone: 1 s): a gate of 30 s makes it 15 s, which the running job only takes up when it
    starts again, from its checkpoint; a change that leaves the interval alone restarts
    nothing."""
    world = served_world()
    old_manifest = world.apps[APP1].obj
    assert json.loads(old_manifest["spec"]["arguments"][1])["trigger"] == {
        "processingTimeSeconds": 1}
    world.edit(spec_body(SQL_V1, cutover={"maxLagSeconds": 30}))
    actions = world.reconcile()
    assert effects(actions) == [A.DeleteSparkApplication(R1, APP1)]
    run_until(world, lambda w: APP1 in w.apps and w.apps[APP1].obj is not old_manifest)
    config = json.loads(world.apps[APP1].obj["spec"]["arguments"][1])
    assert config["trigger"] == {"processingTimeSeconds": 15}
    assert config["checkpointLocation"] == f"{CKPT}/{R1}"  # same checkpoint: no replay
    world.edit(spec_body(SQL_V1, cutover={"maxLagSeconds": 30, "stableForSeconds": 20}))
    assert not any(isinstance(a, A.DeleteSparkApplication) for a in world.reconcile())
