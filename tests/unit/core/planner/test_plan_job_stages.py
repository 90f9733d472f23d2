"""A job's stage through the planner (core.job.stages, phases/candidate.py settle_stage and
apply_job_settings, the promotion hold `replaying`), in the simulated world.

The samples' topic holds 200 records (orders/0: 120, orders/1: 80). With a replay threshold
of 150 and 60 records per executor, its build replays with ceil(200 / 60) = 4 executors;
the default threshold (10,000,000) starts it steady. Expected values are written by hand.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from derived_views.core import actions as A
from derived_views.core.settings import SparkSettings
from support.world.samples import I1, I2, R1, R2, SQL_V1, SQL_V2, make_settings, spec_body
from support.world.scenarios import APP1, APP2, effects
from support.world.world import World, run_until, served_world

STAGE = "derivedviews.io/job-stage"
DAEMON = "spark.python.use.daemon"
ALL_READ = {("orders", 0): 120, ("orders", 1): 80}


def replay_world(body: dict[str, Any] | None = None) -> World:
    return World(body or spec_body(SQL_V1), settings=make_settings(spark=SparkSettings(
        replay_min_backlog=150, replay_records_per_executor=60, replay_max_executors=8)))


def job(world: World, name: str) -> tuple[str, int, str | None]:
    """(stage label, executor pods, the daemon setting) of a job object; 0 executor pods: the
    job runs its tasks in the driver, and is rendered with no executor count."""
    spec = world.apps[name].obj["spec"]
    in_driver = spec["sparkConf"]["spark.derivedviews.tasksInDriver"] == "true"
    assert in_driver == ("instances" not in spec["executor"])
    return (world.apps[name].obj["metadata"]["labels"][STAGE],
            0 if in_driver else spec["executor"]["instances"], spec["sparkConf"].get(DAEMON))


def created(world: World) -> list[str]:
    return [a.name for plan in world.plans for a in plan
            if isinstance(a, A.CreateSparkApplication)]


def test_a_big_backlog_replays_wide_then_restarts_steady_before_the_switch() -> None:
    world = replay_world()
    world.reconcile()
    assert job(world, APP1) == ("replay", 4, None)
    record = world.parsed_status().revisions[0]
    assert (record.stage, record.replay_executors) == ("replay", 4)
    reconciling: list[tuple[str, str] | None] = []

    def serving(w: World) -> bool:
        reconciling.append(w.condition("Reconciling"))
        return w.alias == I1

    run_until(world, serving, ticks=30)
    # hydrated and within the gate in its replay stage: held, not served
    assert ("True", "ReplayStage") in reconciling
    reasons = world.event_reasons()
    assert reasons.count("SteadyStageStarted") == 1 and "JobRestarted" not in reasons
    assert reasons.index("SteadyStageStarted") < reasons.index("CutoverCompleted")
    assert job(world, APP1) == ("steady", 0, "false")
    assert created(world) == [APP1, APP1]  # one restart, from the same checkpoint
    assert world.parsed_status().revisions[0].stage == "steady"
    assert world.violations == []  # never a fresh checkpoint over its ledger, nor a spent one
    assert world.ledger[R1][0] == ALL_READ
    # served, it stays steady: later passes restart nothing
    world.settle(ticks=6)
    assert [a for plan in world.plans[-7:] for a in plan
            if isinstance(a, A.DeleteSparkApplication)] == []


def test_a_candidate_replays_beside_the_active_and_goes_steady_before_it_serves() -> None:
    world = replay_world()
    run_until(world, lambda w: w.alias == I1, ticks=30)
    world.edit(spec_body(SQL_V2))
    world.reconcile()
    assert job(world, APP2) == ("replay", 4, None)
    run_until(world, lambda w: w.alias == I2, ticks=40)
    assert job(world, APP2) == ("steady", 0, "false")
    told = [(e.reason, e.message) for e in world.events
            if e.reason in ("SteadyStageStarted", "CutoverCompleted")]
    assert [reason for reason, _ in told] == ["SteadyStageStarted", "CutoverCompleted"] * 2
    assert R2 in told[2][1] and f"from revision {R1} to {R2}" in told[3][1]
    assert world.violations == []
    assert world.ledger[R2][0] == ALL_READ


def test_with_records_arriving_readers_switch_after_the_steady_drivers_first_batch() -> None:
    """The replay job's commits hold the gate through its restart's first seconds; served
    then, the index would age until the steady driver's first batch (promotion.not_kept_fresh)."""
    world = replay_world(spec_body(SQL_V1, cutover={"maxLagMessages": 20}))
    world.traffic = 2  # records per partition per tick: never 0 to read
    reconciling: list[tuple[str, str] | None] = []

    def serving(w: World) -> bool:
        reconciling.append(w.condition("Reconciling"))
        return w.alias == I1

    run_until(world, serving, ticks=40)
    assert job(world, APP1)[0] == "steady"
    started = dt.datetime.fromisoformat(world.apps[APP1].obj["metadata"]["creationTimestamp"])
    cutover = world.parsed_status().last_cutover
    assert cutover is not None
    steady_commits = [at for _, at in world.ledger_history[R1]
                      if started < at <= cutover.switched_at]
    assert steady_commits, (started, cutover.switched_at)
    assert ("True", "JobStarting") in reconciling
    assert world.violations == []


def test_a_backlog_below_the_threshold_starts_steady_and_never_restarts() -> None:
    world = served_world()  # the installation's default threshold: 10,000,000 records
    assert job(world, APP1) == ("steady", 0, "false")
    assert created(world) == [APP1]
    assert not any(isinstance(a, A.DeleteSparkApplication) for p in world.plans for a in p)
    assert "SteadyStageStarted" not in world.event_reasons()
    assert world.parsed_status().revisions[0].stage == "steady"


def test_a_caught_up_job_restarted_later_comes_back_steady() -> None:
    world = replay_world()
    run_until(world, lambda w: w.alias == I1, ticks=30)
    # a failure, retried: the revision hydrated, so steady
    world.fail_job(R1, "OOMKilled")
    world.reconcile()
    world.annotations["derivedviews.io/retry"] = "2026-03-01"
    assert effects(world.reconcile()) == [A.DeleteSparkApplication(R1, APP1)]
    world.settle(ticks=3)
    assert job(world, APP1) == ("steady", 0, "false")
    # a settings change: steady, with the new executors
    world.edit(spec_body(SQL_V1, spark={"executor": {"instances": 2}}))
    world.settle(ticks=3)
    assert job(world, APP1) == ("steady", 2, "false")
    assert world.event_reasons().count("JobRestarted") == 1
    assert world.event_reasons().count("SteadyStageStarted") == 1


def test_a_replay_restarted_before_it_hydrated_keeps_its_replay_stage() -> None:
    world = replay_world()
    world.reconcile()
    world.tick()
    world.reconcile()
    world.tick()  # RUNNING, nothing committed yet
    world.edit(spec_body(SQL_V1, spark={"driver": {"memory": "2g"}}))
    assert effects(world.reconcile()) == [A.DeleteSparkApplication(R1, APP1)]
    assert world.event_reasons()[-1] == "JobRestarted"
    world.reconcile()
    assert job(world, APP1) == ("replay", 4, None)
    # and the spec's own replay executors, while replaying, restart it with those
    world.edit(spec_body(SQL_V1, spark={"driver": {"memory": "2g"},
                                        "replay": {"executor": {"instances": 3}}}))
    world.reconcile()
    world.reconcile()
    assert job(world, APP1) == ("replay", 3, None)


def test_jobs_from_before_stages_are_not_restarted_on_upgrade() -> None:
    """A serving job and a replaying candidate created by an operator without stages (no
    label, no stage in status) keep running: their job settings hash is the steady one."""
    world = served_world()
    world.edit(spec_body(SQL_V2))
    world.reconcile()
    for app in world.apps.values():
        del app.obj["metadata"]["labels"][STAGE]
    for record in world.status["revisions"]:
        record.pop("stage", None)
        record.pop("replayExecutors", None)
    world.settings = make_settings(spark=SparkSettings(replay_min_backlog=150,
                                                       replay_records_per_executor=60))
    for _ in range(3):
        assert not any(isinstance(a, A.DeleteSparkApplication) for a in world.reconcile())
        world.tick()
    run_until(world, lambda w: w.alias == I2, ticks=30)
    assert "SteadyStageStarted" not in world.event_reasons()
