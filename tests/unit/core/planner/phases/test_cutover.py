"""Promotion and cutover (phases/cutover.py): one switch, never short of the serving
index, manual approval, the keep window, under live traffic.

The planner, scenario by scenario, in the simulated world of tests/support/world; expected
revisions, names and times are written out by hand (revision hashes come from
tests/unit/core/test_revision.py's independently computed values).
"""

from __future__ import annotations

import copy
import datetime as dt

from derived_views.core import actions as A
from derived_views.core.cutover.monotonic import Guard
from support.world.samples import I1, I2, R1, R2, SQL_V1, SQL_V2, spec_body
from support.world.scenarios import (
    APP1,
    PRODUCTION_GATE,
    busy_served_world,
    kinds,
    orders_ends,
    switch_planned_next,
)
from support.world.world import run_until, served_world


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
