"""The planner, scenario by scenario, in the simulated world of core_world.

Each test follows one behaviour of the issue over time; expected revisions,
names and times are written out by hand (revision hashes come from
test_revision's independently computed values).
"""

from __future__ import annotations

import copy
import datetime as dt
import json

import pytest

from derived_views.core import actions as A
from derived_views.core.cutover.monotonic import Guard
from derived_views.core.plan import plan
from support.world.samples import I1, I2, I3, R1, R2, R3, SQL_V1, SQL_V2, SQL_V3, T0, spec_body
from support.world.world import World, run_until, served_world

APP1, APP2, APP3 = (f"orders-by-customer-{r}" for r in (R1, R2, R3))
CKPT = "s3a://checkpoints/dv/shop/orders-by-customer"


def kinds(actions: list[A.Action]) -> list[str]:
    return [type(a).__name__ for a in actions]


def effects(actions: list[A.Action]) -> list[A.Action]:
    return [a for a in actions if isinstance(a, A.EFFECTS)]


# First revision -----------------------------------------------------------------------------


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


# Candidate beside the active revision ----------------------------------------------------------


def test_content_change_builds_a_candidate_while_the_active_keeps_serving() -> None:
    world = served_world()
    world.edit(spec_body(SQL_V2))
    actions = world.reconcile()
    assert kinds(actions) == ["RecordIntent", "CreateSparkApplication", "UpdateStatus",
                              "PruneLedger", "EmitEvent"]
    create = actions[1]
    assert isinstance(create, A.CreateSparkApplication) and create.name == APP2
    config = json.loads(create.manifest["spec"]["arguments"][1])
    assert config["transform"] == {"sql": SQL_V2}
    assert config["sink"]["table"] == I2
    assert config["checkpointLocation"] == f"{CKPT}/{R2}"
    for _ in range(3):
        world.tick()
        world.reconcile()
        assert world.alias == I1
        assert APP1 in world.apps
    status = world.parsed_status()
    assert status.active is not None and status.active.revision == R1
    assert status.candidate is not None and status.candidate.revision == R2
    assert status.candidate.lag is not None and status.candidate.lag.messages > 0
    ready = status.condition("Ready")
    reconciling = status.condition("Reconciling")
    assert ready is not None and (ready.status, ready.reason) == ("False", "Backfilling")
    assert reconciling is not None and reconciling.reason == "Backfilling"
    assert f"lag {status.candidate.lag.messages} messages" in reconciling.message


@pytest.mark.parametrize("edit", [
    pytest.param({"spark": {"executor": {"instances": 4, "memory": "4g"}}}, id="spark resources"),
    pytest.param({"cutover": {"stableForSeconds": 30}}, id="cutover policy"),
    pytest.param({"deletionPolicy": "Delete"}, id="deletion policy"),
    pytest.param({"source": {"kafka": {"bootstrapServers": "kafka-2:9093"},
                             "topics": ["orders"], "format": "json",
                             "schema": "order_id STRING, customer_id STRING, amount DOUBLE"}},
                 id="bootstrap servers"),
])
def test_non_content_changes_never_start_a_replay(edit: dict[str, object]) -> None:
    world = served_world()
    world.edit(spec_body(SQL_V1, **edit))
    actions = world.reconcile()
    # job settings (spark, Kafka connection) restart the job from its checkpoint; policy
    # changes touch no job (deletionPolicy Delete holds the sink Secret for the cleanup);
    # nothing starts a new revision
    restart = "spark" in edit or "source" in edit
    hold = [A.HoldSecret("views-db")] if "deletionPolicy" in edit else []
    assert effects(actions) == ([A.DeleteSparkApplication(R1, APP1)] if restart else hold)
    status = world.parsed_status()
    assert status.observed_generation == 2
    assert [r.revision for r in status.revisions] == [R1]
    assert all(c.observed_generation == 2 for c in status.conditions)


def test_lag_above_the_gate_resets_caught_up_since() -> None:
    world = served_world()
    world.edit(spec_body(SQL_V2))
    run_until(world, lambda w: w.parsed_status().candidate is not None
              and w.parsed_status().candidate.caught_up_since is not None)
    first = world.parsed_status().candidate
    assert first is not None and first.caught_up_since == world.now
    world.ends[("orders", 0)] += 500  # a burst: the candidate falls behind
    world.rate = 0
    world.tick()
    world.reconcile()
    candidate = world.parsed_status().candidate
    assert candidate is not None
    assert candidate.caught_up_since is None and candidate.phase.value == "Backfilling"
    assert world.condition("CaughtUp") == ("False", "LagAboveGate")
    world.rate = 1000
    world.tick()
    world.reconcile()
    candidate = world.parsed_status().candidate
    assert candidate is not None and candidate.caught_up_since == world.now
    restarted = world.now
    switched = None
    for _ in range(4):
        world.tick()
        if any(isinstance(a, A.SwitchAlias) for a in world.reconcile()):
            switched = world.now
            break
    assert switched == restarted + dt.timedelta(seconds=10)


def test_max_lag_messages_passes_the_gate_behind_the_log_but_not_behind_the_serving_index(
) -> None:
    world = served_world()
    world.edit(spec_body(SQL_V2, cutover={"maxLagMessages": 30}))
    world.rate = 1000
    world.reconcile()
    world.tick()
    world.reconcile()
    world.tick()  # running, table created, positions 0
    # hydrated (every record of its start is in), then the log grows: 20 + 10 behind
    world.apps[APP2].position = {("orders", 0): 120, ("orders", 1): 80}
    world.ends.update({("orders", 0): 140, ("orders", 1): 90})
    world.rate = 0
    world.ledger[R2] = (dict(world.apps[APP2].position), world.now)
    world.apps[APP1].position = dict(world.ends)  # the serving index keeps up
    world.ledger[R1] = (dict(world.ends), world.now)
    world.reconcile()
    assert world.condition("CaughtUp") == ("True", "LagWithinGate")
    world.tick(seconds=10)
    world.reconcile()  # stable: the switch is tried and deferred (the serving index is ahead)
    assert world.alias == I1
    world.reconcile()
    assert world.condition("Reconciling") == ("True", "BehindActive")
    world.rate = 1000
    world.tick()  # the candidate commits up to the log's end
    world.reconcile()
    assert world.alias == I2


# Promotion and cutover ----------------------------------------------------------------------


def test_cutover_is_one_switch_and_the_same_plan_retires_the_old_revision() -> None:
    world = served_world()
    world.edit(spec_body(SQL_V2, cutover={"keepPreviousRunningSeconds": 0}))
    run_until(world, lambda w: w.alias == I2)
    actions = world.plans[-1]
    assert kinds(actions) == ["RecordIntent", "SwitchAlias", "DeleteSparkApplication",
                              "UpdateStatus", "PruneLedger", "EmitEvent"]
    intent = actions[0]
    assert isinstance(intent, A.RecordIntent)
    assert (intent.intent.cutover_to, intent.intent.cutover_from) == (R2, R1)
    assert actions[1] == A.SwitchAlias("public", "orders_by_customer", I2, I1,
                                       Guard(active=R1, candidate=R2,
                                             partitions=frozenset({("orders", 0), ("orders", 1)}),
                                             wait_seconds=5.0))
    assert actions[2] == A.DeleteSparkApplication(R1, APP1)
    assert actions[5] == A.EmitEvent(
        "CutoverCompleted", f"Switched readers of public.orders_by_customer from revision {R1} "
                            f"to {R2}.")
    status = world.parsed_status()
    old = status.record(R1)
    assert old is not None and old.phase.value == "Retiring"
    assert old.retire_after == world.now + dt.timedelta(seconds=60)
    assert status.active is not None and status.active.revision == R2
    assert world.condition("Ready") == ("True", "Serving")
    # The status lands only after the switch succeeded: nothing is left in
    # progress, so kstatus readers (kubectl wait, Flux) see Current at once.
    assert world.condition("Reconciling") == ("False", "Reconciled")


def switch_planned_next(world: World) -> None:
    """Run the world until its next pass would switch the alias (that pass not yet run)."""
    for _ in range(60):
        if any(isinstance(a, A.SwitchAlias) for a in plan(world.spec, world.observe(), world.now)):
            return
        world.reconcile()
        world.tick()
    raise AssertionError("no switch planned")


def test_a_candidate_short_of_the_serving_index_is_not_switched_to() -> None:
    # Readers must never go back in time. The gate holds (within maxLagMessages), but where
    # the switch happens the serving job has committed further than the candidate (a batch
    # that landed after the observation): nothing changes and the pass writes nothing, the
    # next pass shows why, and the one after switches once the candidate has caught up.
    world = served_world()
    world.traffic = 5
    world.edit(spec_body(SQL_V2, cutover={"maxLagMessages": 20}))
    switch_planned_next(world)
    before = copy.deepcopy(world.status)
    pos, at = world.ledger[R2]
    world.ledger[R2] = ({**pos, ("orders", 1): pos[("orders", 1)] - 3}, at)
    actions = world.reconcile()
    assert any(isinstance(a, A.SwitchAlias) for a in actions)
    assert world.alias == I1
    assert {k: v for k, v in world.status.items() if k != "intent"} == {
        k: v for k, v in before.items() if k != "intent"}
    world.reconcile()  # the deferral observed: held for this pass, and shown
    assert world.alias == I1
    assert world.condition("Reconciling") == ("True", "BehindActive")
    reconciling = next(c for c in world.status["conditions"] if c["type"] == "Reconciling")
    assert "readers never go back in time: short on orders/1" in reconciling["message"]
    world.tick()  # both jobs commit up to the log's end
    world.reconcile()
    assert world.alias == I2


def test_manual_mode_waits_for_the_promote_annotation_naming_the_revision() -> None:
    world = served_world()
    world.edit(spec_body(SQL_V2, cutover={"mode": "manual"}))
    world.settle(ticks=12)
    assert world.alias == I1
    assert world.condition("Reconciling") == ("True", "AwaitingPromotion")
    world.annotations["derivedviews.io/promote"] = R1  # not the candidate
    world.reconcile()
    assert world.alias == I1
    world.annotations["derivedviews.io/promote"] = R2
    world.reconcile()
    assert world.alias == I2


def test_retired_after_the_retention_period_and_not_before() -> None:
    world = served_world()
    world.edit(spec_body(SQL_V2, cutover={"keepPreviousRunningSeconds": 0}))
    run_until(world, lambda w: w.alias == I2)
    cut_at = world.now
    while world.now < cut_at + dt.timedelta(seconds=55):
        world.tick()
        assert not any(isinstance(a, A.DropIndex) for a in world.reconcile())
    assert I1 in world.tables
    world.tick()  # +60s
    actions = world.reconcile()
    assert A.DropIndex("public", I1, R1) in actions
    assert world.phases() == {R1: "Retired", R2: "Active"}
    assert world.tables == {I2}
    assert "Retired" in world.event_reasons()


def orders_ends(world: World) -> dict[tuple[str, int], int]:
    return {tp: end for tp, end in world.ends.items() if tp[0] == "orders"}


def test_the_previous_job_keeps_following_the_log_for_the_keep_window() -> None:
    world = served_world()
    world.edit(spec_body(SQL_V2, cutover={"keepPreviousRunningSeconds": 30}))
    run_until(world, lambda w: w.alias == I2)
    cut_at = world.now
    assert not any(isinstance(a, A.DeleteSparkApplication) for a in world.plans[-1])
    old = world.parsed_status().record(R1)
    assert old is not None and old.follow_until == cut_at + dt.timedelta(seconds=30)
    while world.now < cut_at + dt.timedelta(seconds=25):
        world.tick(growth=3)
        actions = world.reconcile()
        assert not any(isinstance(a, A.DeleteSparkApplication) for a in actions)
    assert world.apps[APP1].position == orders_ends(world)  # it kept up with the log
    world.tick()  # +30s: the window is over, the job goes; the index stays for a rollback
    actions = world.reconcile()
    assert A.DeleteSparkApplication(R1, APP1) in actions
    old = world.parsed_status().record(R1)
    assert old is not None and old.follow_until is None and old.phase.value == "Retiring"
    run_until(world, lambda w: I1 not in w.tables)
    assert world.now >= cut_at + dt.timedelta(seconds=60)  # retainPreviousSeconds
    assert world.violations == []


def test_rollback_inside_the_keep_window_switches_back_in_one_pass() -> None:
    world = served_world()
    world.edit(spec_body(SQL_V2))
    run_until(world, lambda w: w.alias == I2)
    for _ in range(4):  # 20 s of traffic: the retiring job follows and holds the gate
        world.tick(growth=5)
        world.reconcile()
    world.tick(growth=5)
    world.edit(spec_body(SQL_V1))
    actions = world.reconcile()
    assert A.SwitchAlias("public", "orders_by_customer", I1, I2, Guard(
        active=R2, candidate=R1, partitions=frozenset({("orders", 0), ("orders", 1)}),
        wait_seconds=5.0)) in actions
    assert not any(isinstance(a, A.CreateSparkApplication | A.DeleteSparkApplication)
                   for a in actions)
    assert world.alias == I1 and world.phases() == {R1: "Active", R2: "Retiring"}
    assert "RollbackStarted" in world.event_reasons()
    run_until(world, lambda w: w.apps[APP1].position == orders_ends(w), growth=2)
    assert world.violations == []


def test_rollback_waits_for_the_gate_when_the_follower_is_behind() -> None:
    world = served_world()
    world.edit(spec_body(SQL_V2))
    run_until(world, lambda w: w.alias == I2)
    world.tick(growth=5)
    world.edit(spec_body(SQL_V1))  # its job has not committed the newest records yet
    actions = world.reconcile()
    assert not any(isinstance(a, A.SwitchAlias) for a in actions)
    assert not any(isinstance(a, A.CreateSparkApplication) for a in actions)
    run_until(world, lambda w: w.alias == I1)
    assert world.violations == []


# Rollback, supersede, abort, failure ------------------------------------------------------------


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


def test_a_newer_spec_supersedes_the_candidate() -> None:
    world = served_world(delete_lingers=True)
    world.edit(spec_body(SQL_V2))
    for _ in range(3):
        world.reconcile()
        world.tick()
    assert I2 in world.tables
    world.edit(spec_body(SQL_V3))
    actions = world.reconcile()
    assert A.DeleteSparkApplication(R2, APP2) in actions
    assert not any(isinstance(a, A.DropIndex) for a in actions)  # its job may still run
    assert any(isinstance(a, A.CreateSparkApplication) and a.revision == R3 for a in actions)
    assert ("Superseded" in world.event_reasons())
    assert world.phases()[R2] == "Superseded"
    world.tick()  # the job is gone now
    actions = world.reconcile()
    assert A.DropIndex("public", I2, R2) in actions
    assert world.alias == I1
    run_until(world, lambda w: w.alias == I3)
    assert world.violations == []


def test_returning_to_the_active_revision_tears_the_candidate_down() -> None:
    world = served_world()
    world.edit(spec_body(SQL_V2))
    for _ in range(3):
        world.reconcile()
        world.tick()
    world.edit(spec_body(SQL_V1))
    world.reconcile()
    world.reconcile()
    assert world.phases() == {R1: "Active", R2: "Superseded"}
    assert world.tables == {I1}
    assert world.condition("Ready") == ("True", "Serving")


def test_candidate_past_its_deadline_is_torn_down_and_the_active_keeps_serving() -> None:
    world = served_world()
    world.edit(spec_body(SQL_V2))
    world.reconcile()
    started = world.now
    world.rate = 0  # never catches up
    while world.now < started + dt.timedelta(seconds=595):
        world.tick(growth=1)
        world.reconcile()
        assert world.phases()[R2] != "Failed"
    world.tick()
    actions = world.reconcile()
    assert A.DeleteSparkApplication(R2, APP2) in actions
    assert A.EmitEvent("DeadlineExceeded", f"Aborted candidate revision {R2}: not promoted within "
                                           "600s of starting; torn down.", "Warning") in actions
    world.reconcile()
    assert world.tables == {I1} and world.alias == I1
    assert world.condition("Degraded") == ("True", "DeadlineExceeded")
    assert world.condition("Stalled") == ("True", "DeadlineExceeded")
    assert world.condition("Ready") == ("False", "DeadlineExceeded")
    for _ in range(5):  # no retry loop
        world.tick()
        assert effects(world.reconcile()) == []
    world.rate = 1000
    world.annotations["derivedviews.io/retry"] = "1"
    actions = world.reconcile()
    create = next(a for a in actions if isinstance(a, A.CreateSparkApplication))
    assert json.loads(create.manifest["spec"]["arguments"][1])["checkpointLocation"] == \
        f"{CKPT}/{R2}.1"
    run_until(world, lambda w: w.alias == I2)
    assert world.violations == []


def test_failed_candidate_job_degrades_without_a_retry_loop_until_asked() -> None:
    world = served_world()
    world.edit(spec_body(SQL_V2))
    for _ in range(3):
        world.reconcile()
        world.tick()
    assert world.fail_job(R2, "Job aborted: OutOfMemoryError")
    actions = world.reconcile()
    assert A.EmitEvent("JobFailed", f"Stopped waiting for revision {R2}: its job ended (FAILED): "
                                    "Job aborted: OutOfMemoryError", "Warning") in actions
    degraded = world.parsed_status().condition("Degraded")
    assert degraded is not None and degraded.status == "True" and degraded.reason == "JobFailed"
    assert "Job aborted: OutOfMemoryError" in degraded.message
    assert world.alias == I1
    for _ in range(5):
        world.tick()
        assert effects(world.reconcile()) == []
    assert APP2 in world.apps  # kept for inspection
    world.annotations["derivedviews.io/retry"] = "please"
    actions = world.reconcile()
    assert effects(actions) == [A.DeleteSparkApplication(R2, APP2)]
    actions = world.reconcile()
    create = next(a for a in actions if isinstance(a, A.CreateSparkApplication))
    config = json.loads(create.manifest["spec"]["arguments"][1])
    assert config["checkpointLocation"] == f"{CKPT}/{R2}"  # its index is kept: resume
    run_until(world, lambda w: w.alias == I2)
    assert world.violations == []


def test_a_spec_change_retries_a_failed_job_once() -> None:
    world = served_world()
    world.edit(spec_body(SQL_V2))
    for _ in range(3):
        world.reconcile()
        world.tick()
    world.fail_job(R2)
    world.reconcile()
    world.edit(spec_body(SQL_V2, spark={"driver": {"memory": "4g"}}))
    # the failed candidate is retried; the active's job restarts to take the new settings
    assert sorted(effects(world.reconcile()), key=repr) == [
        A.DeleteSparkApplication(R2, APP2), A.DeleteSparkApplication(R1, APP1)]
    actions = world.reconcile()
    create = next(a for a in actions if isinstance(a, A.CreateSparkApplication))
    assert create.manifest["spec"]["driver"]["memory"] == "4g"


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


def test_topics_of_each_revision_decide_its_lag() -> None:
    world = served_world()
    with_payments = spec_body(SQL_V2, source={"topics": ["orders", "payments"]})
    world.edit(with_payments)
    world.reconcile()
    status = world.parsed_status()
    assert status.candidate is not None and status.candidate.lag is not None
    assert status.candidate.lag.partitions == {"orders/0": 120, "orders/1": 80, "payments/0": 40}
    assert status.active is not None and status.active.lag is not None
    assert status.active.lag.partitions == {"orders/0": 0, "orders/1": 0}


# Pause, resume after a crash, alias repair, unreachable services ---------------------------------


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
        from derived_views.core.plan import plan
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


# Deletion -----------------------------------------------------------------------------------


def test_deletion_with_retain_stops_jobs_and_keeps_alias_and_indexes() -> None:
    world = served_world()
    world.deletion_timestamp = world.now
    actions = world.reconcile()
    assert kinds(actions) == ["RecordIntent", "DeleteSparkApplication", "EmitEvent",
                              "RemoveFinalizer"]
    assert actions[-1] == A.RemoveFinalizer("derivedviews.io/cleanup")
    assert world.gone and world.alias == I1 and world.tables == {I1}


def test_deletion_with_delete_drops_alias_and_indexes_once_jobs_are_gone() -> None:
    world = served_world(delete_lingers=True)
    world.edit(spec_body(SQL_V1, deletionPolicy="Delete"))
    world.reconcile()
    world.edit(spec_body(SQL_V2, deletionPolicy="Delete"))
    for _ in range(3):
        world.reconcile()
        world.tick()
    world.deletion_timestamp = world.now
    actions = world.reconcile()
    assert kinds(actions) == ["RecordIntent", "DeleteSparkApplication", "DeleteSparkApplication",
                              "UpdateStatus"]
    assert not world.gone
    world.tick()
    actions = world.reconcile()
    assert kinds(actions) == ["RecordIntent", "DropAlias", "DropIndex", "DropIndex",
                              "ReleaseSecret", "EmitEvent", "RemoveFinalizer"]
    assert [a.index for a in actions if isinstance(a, A.DropIndex)] == sorted([I1, I2])
    assert world.gone and world.alias is None and world.tables == set()
    assert world.held_secrets == set()


def test_deletion_with_delete_and_no_sink_gives_up_after_the_grace_period() -> None:
    world = served_world()
    world.edit(spec_body(SQL_V1, deletionPolicy="Delete"))
    world.reconcile()
    world.sink_up = False
    world.deletion_timestamp = world.now
    world.reconcile()
    assert not world.gone
    world.tick(seconds=290)
    world.reconcile()
    assert not world.gone
    world.tick(seconds=10)
    actions = world.reconcile()
    assert world.gone
    assert any(isinstance(a, A.EmitEvent) and a.reason == "LeftBehind" for a in actions)


def test_deletion_without_our_finalizer_plans_nothing() -> None:
    world = served_world()
    world.finalizers.clear()
    world.deletion_timestamp = world.now
    assert world.reconcile() == []


# Corner cases the random histories rarely reach ----------------------------------------------


def test_a_rollback_never_switches_before_its_job_runs_again() -> None:
    world = served_world()
    world.edit(spec_body(SQL_V2, cutover={"stableForSeconds": 0}))
    run_until(world, lambda w: w.alias == I2)
    world.edit(spec_body(SQL_V1, cutover={"stableForSeconds": 0}))
    # R1's ledger is exactly at the log's end: lag 0 while its job is being recreated.
    for _ in range(4):
        actions = world.reconcile()
        switches = [a for a in actions if isinstance(a, A.SwitchAlias)]
        if switches:
            assert world.apps[APP1].state == "RUNNING"
            break
        world.tick()
    assert world.alias == I1


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


def test_a_sink_table_owned_by_another_view_stalls_without_touching_it() -> None:
    world = World(spec_body(SQL_V1))
    world.alias_owner = "billing/orders-by-customer"  # another namespace's view got there first
    actions = world.reconcile()
    assert effects(actions) == []
    assert world.condition("Stalled") == ("True", "SinkTableClaimed")
    assert world.condition("Ready") == ("False", "SinkTableClaimed")
    stalled = world.parsed_status().condition("Stalled")
    assert stalled is not None and "billing/orders-by-customer" in stalled.message


def test_a_view_that_lost_its_table_to_another_stops_its_jobs_and_deletes_nothing() -> None:
    world = served_world(alias_owner="shop/orders-by-customer")
    world.edit(spec_body(SQL_V1, deletionPolicy="Delete"))
    world.alias_owner = "billing/orders-by-customer"
    assert effects(world.reconcile()) == [A.DeleteSparkApplication(R1, APP1)]
    world.tick()
    world.deletion_timestamp = world.now
    world.settle(ticks=3)
    assert world.gone and world.alias == I1 and I1 in world.tables


# Live traffic, stalled progress, missing and reset topics ----------------------------------


PRODUCTION_GATE = {"maxLagMessages": 0, "maxLagSeconds": 10}
"""The spec's defaults (test_api_spec checks them): messages or time."""


def busy_served_world(traffic: int) -> World:
    """A served view whose topic receives `traffic` records per partition after every batch."""
    world = World(spec_body(SQL_V1, cutover=PRODUCTION_GATE), traffic=traffic)
    run_until(world, lambda w: w.alias == I1)
    return world


def test_a_candidate_cuts_over_on_a_topic_that_never_stops_receiving_records() -> None:
    world = busy_served_world(traffic=20)
    world.edit(spec_body(SQL_V2, cutover=PRODUCTION_GATE))
    lags = []
    for _ in range(40):
        world.reconcile()
        record = world.parsed_status().record(R2)
        if record is not None and record.lag is not None:
            lags.append(record.lag.messages)
        if world.alias == I2:
            break
        world.tick()
    assert world.alias == I2
    assert min(lags) > 0  # the lag in messages was never 0 on any reading
    cutover = world.parsed_status().last_cutover
    assert cutover is not None and cutover.to_revision == R2


def test_gating_on_messages_alone_never_cuts_over_under_live_traffic() -> None:
    world = busy_served_world(traffic=20)
    world.edit(spec_body(SQL_V2, cutover={"maxLagSeconds": 0}))
    for _ in range(40):
        world.reconcile()
        world.tick()
    assert world.alias == I1
    assert world.condition("CaughtUp") == ("False", "LagAboveGate")


def test_a_stalled_candidate_is_torn_down_on_progress_not_on_age() -> None:
    no_age_cap = {"maxLagMessages": 0, "stableForSeconds": 10, "deadlineSeconds": None,
                  "progressDeadlineSeconds": 120, "retainPreviousSeconds": 60}
    world = served_world()
    world.ends = {tp: end + 100_000 for tp, end in world.ends.items()}  # a big log
    world.edit(spec_body(SQL_V2, cutover=no_age_cap))
    world.rate = 100
    for _ in range(100):  # 500 s: far past the progress deadline, but committing all along
        world.reconcile()
        world.tick()
        assert world.phases()[R2] in ("Pending", "Backfilling")
    world.rate = 0  # the job hangs
    for _ in range(23):  # 115 s without a commit
        world.reconcile()
        world.tick()
        assert world.phases()[R2] == "Backfilling"
    world.tick()
    world.reconcile()
    assert world.phases()[R2] == "Failed"
    assert world.condition("Degraded") == ("True", "ProgressDeadlineExceeded")
    assert world.alias == I1 and world.condition("Ready")[0] == "False"  # type: ignore[index]
    world.reconcile()
    assert I2 not in world.tables


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
