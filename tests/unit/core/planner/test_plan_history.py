"""The log's missing beginning, through the planner in the simulated world: a revision whose
replay starts later than the serving index's (retention, delete-records) is built but never
promoted under `source.history: complete`; `fromLogStart` accepts it without a replay; a
revision serves only once hydrated; a stale serving index is not Ready.

The world's jobs resolve `earliest` to the log start when they first start (as Spark does)
and write it with every ledger row; a job that must read an offset the log deleted fails
unless its job config turns failOnDataLoss off."""

from __future__ import annotations

import datetime as dt

from derived_views.core.observed import TopicRetention
from support.world.samples import I1, I2, R1, R2, SQL_V1, SQL_V2, spec_body
from support.world.world import World, run_until, served_world

DELETE_WEEK = TopicRetention("delete", 604_800_000, -1)


def _status_message(world: World, type_: str) -> str:
    condition = world.parsed_status().condition(type_)
    assert condition is not None
    return condition.message


def test_a_candidate_starting_later_is_not_promoted_until_from_log_start_is_chosen() -> None:
    world = served_world()
    world.topic_configs = {"orders": DELETE_WEEK}
    world.starts = {("orders", 0): 100}  # retention deleted the first 100 records of one
    world.edit(spec_body(SQL_V2))
    for _ in range(30):
        world.reconcile()
        world.tick()
    assert world.alias == I1  # the active keeps serving
    record = world.parsed_status().record(R2)
    assert record is not None and record.phase.value == "CaughtUp"
    assert record.history_start == {"orders/0": 100}
    assert world.condition("Degraded") == ("True", "HistoryIncomplete")
    message = _status_message(world, "Degraded")
    assert "orders/0 (100 records)" in message
    assert "orders/1" not in message
    assert "retention.ms=604800000 (7 days)" in message
    assert f"revision {R1} keeps serving" in message
    assert "fromLogStart" in message
    assert world.event_reasons().count("HistoryIncomplete") == 1  # announced once
    assert world.condition("Reconciling") == ("True", "HistoryIncomplete")
    # the promote annotation does not override it
    world.annotations["derivedviews.io/promote"] = R2
    world.tick()
    world.reconcile()
    assert world.alias == I1
    creates = sum(1 for p in world.plans for a in p if type(a).__name__ ==
                  "CreateSparkApplication")
    world.edit(spec_body(SQL_V2, source={"history": "fromLogStart"}))
    run_until(world, lambda w: w.alias == I2)
    assert world.parsed_status().revision == R2  # the same revision: no replay
    restarted = sum(1 for p in world.plans for a in p if type(a).__name__ ==
                    "CreateSparkApplication") - creates
    assert restarted == 0  # what may serve changed, not how the jobs run: none restarted
    assert world.condition("Degraded") == ("False", "AsExpected")


def test_equal_history_starts_are_promoted() -> None:
    world = World(spec_body(SQL_V1))
    world.starts = {("orders", 0): 30, ("orders", 1): 30}
    world.edit(spec_body(SQL_V1, source={"history": "fromLogStart"}))
    world.settle(ticks=8)
    assert world.alias == I1
    world.edit(spec_body(SQL_V2))  # back to complete: held to the active's start, not to 0
    run_until(world, lambda w: w.alias == I2)
    record = world.parsed_status().record(R2)
    assert record is not None and record.history_start == {"orders/0": 30, "orders/1": 30}


def test_a_first_view_on_a_log_without_offset_0_is_stalled_then_serves_what_it_holds() -> None:
    world = World(spec_body(SQL_V1))
    world.topic_configs = {"orders": DELETE_WEEK}
    world.starts = {("orders", 0): 40, ("orders", 1): 20}
    world.settle(ticks=10)
    assert world.alias is None
    assert world.condition("Stalled") == ("True", "HistoryIncomplete")
    assert world.condition("Ready")[0] == "False"  # type: ignore[index]
    message = _status_message(world, "Stalled")
    assert "the log no longer holds offset 0" in message
    assert "orders/0 (40 records), orders/1 (20 records)" in message
    assert "nothing is served" in message and "fromLogStart" in message
    world.edit(spec_body(SQL_V1, source={"history": "fromLogStart"}))
    run_until(world, lambda w: w.alias == I1)
    assert world.condition("Ready") == ("True", "Serving")


def test_a_predicted_shortfall_is_said_before_the_first_batch() -> None:
    world = served_world()
    world.starts = {("orders", 1): 10}
    world.edit(spec_body(SQL_V2))
    world.reconcile()  # the candidate's record, no job yet
    assert world.condition("Degraded") == ("True", "HistoryIncomplete")
    assert "at least orders/1 (10 records)" in _status_message(world, "Degraded")


def test_the_log_start_passing_a_running_candidate_fails_it_and_says_why() -> None:
    world = served_world(rate=20)
    world.ends.update({("orders", 0): 400, ("orders", 1): 400})
    world.edit(spec_body(SQL_V2))
    for _ in range(4):
        world.reconcile()
        world.tick()
    record = world.parsed_status().record(R2)
    assert record is not None and record.phase.value == "Backfilling"
    committed = world.ledger[R2][0][("orders", 0)]
    world.starts = {("orders", 0): committed + 50}  # deleted before the replay read them
    for _ in range(3):
        world.reconcile()
        world.tick()
    world.reconcile()
    assert world.alias == I1
    assert world.condition("Degraded") == ("True", "HistoryIncomplete")
    message = _status_message(world, "Degraded")
    assert "the log deleted orders/0 (50 records) before revision" in message
    # fromLogStart: the failed job restarts (a new generation) and reads on past the gap
    world.rate = 200
    world.edit(spec_body(SQL_V2, source={"history": "fromLogStart"}))
    run_until(world, lambda w: w.alias == I2)
    record = world.parsed_status().record(R2)
    assert record is not None and record.history_gaps == {"orders/0": 50}


def test_lag_counts_only_what_the_log_still_holds() -> None:
    world = World(spec_body(SQL_V1, source={"history": "fromLogStart"}))
    world.starts = {("orders", 0): 100, ("orders", 1): 60}  # ends 120 and 80
    world.rate = 0
    world.reconcile()
    status = world.parsed_status()
    assert status.candidate is not None and status.candidate.lag is not None
    assert status.candidate.lag.messages == 20 + 20


def test_a_compacted_topic_is_said_in_the_status() -> None:
    world = World(spec_body(SQL_V1))
    world.topic_configs = {"orders": TopicRetention("compact", -1, -1)}
    world.settle(ticks=8)
    assert world.alias == I1  # log start 0: a compacted topic needs nothing more
    logs = world.parsed_status().source_logs
    assert [(log.topic, log.cleanup_policy) for log in logs] == [("orders", "compact")]


def test_a_first_revision_serves_only_once_hydrated() -> None:
    # A gate of 1000 messages on a topic of 200: within the gate from the first reading.
    world = World(spec_body(SQL_V1, cutover={"maxLagMessages": 1000}), rate=10)
    served_at = None
    for _ in range(40):
        world.reconcile()
        if world.alias is not None:
            served_at = world.ledger[R1][0]
            break
        assert world.condition("CaughtUp") in (("False", "Hydrating"), ("Unknown", "LagUnknown"),
                                               None)
        world.tick()
    assert served_at is not None
    assert served_at[("orders", 0)] >= 120 and served_at[("orders", 1)] >= 80


def test_hydration_waits_on_partitions_as_the_status_bounds_them() -> None:
    """More than 256 partitions: the target is kept per topic (its largest end), and a
    partition is hydrated at that bound or its own end, whichever is lower."""
    ends = {("orders", p): 10 + p for p in range(300)}
    world = World(spec_body(SQL_V1, cutover={"maxLagMessages": 100_000}), ends=ends, rate=20)
    world.reconcile()
    world.tick()
    world.reconcile()
    record = world.parsed_status().record(R1)
    assert record is not None and record.hydration_target == {"orders": 309}
    run_until(world, lambda w: w.alias == I1)
    committed = world.ledger[R1][0]
    assert all(committed[tp] >= end for tp, end in ends.items())


def test_a_serving_index_older_than_the_gate_is_not_ready_until_fresh_again() -> None:
    world = served_world(rate=50)
    world.edit(spec_body(SQL_V1, cutover={"maxLagSeconds": 10}))
    world.settle(ticks=2)
    assert world.condition("Ready") == ("True", "Serving")
    app = next(iter(world.apps.values()))
    world.rate = 0  # the job stops committing while records keep arriving
    for _ in range(4):
        world.tick(growth=5)
        world.reconcile()
    assert world.condition("Ready") == ("False", "Stale")
    assert "oldest missing record is" in _status_message(world, "Ready")
    world.rate = 50
    world.tick()
    world.reconcile()
    assert app.state == "RUNNING"
    assert world.condition("Ready") == ("True", "Serving")


def test_history_is_not_content() -> None:
    world = served_world()
    world.edit(spec_body(SQL_V1, source={"history": "fromLogStart"}))
    world.settle(ticks=3)
    assert world.parsed_status().revision == R1
    assert world.alias == I1
    status = world.parsed_status()
    assert status.active is not None
    assert status.active.since <= world.now - dt.timedelta(seconds=15)
