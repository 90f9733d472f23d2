"""A job's stage (core.job.stages): which stage a build starts in, how many executors its
replay gets, what a revision's job is rendered with, and the job settings hash that makes
the planner restart it. Expected values are worked out by hand."""

from __future__ import annotations

import copy
import datetime as dt

import pytest

from derived_views.api.spec import DerivedViewSpec
from derived_views.api.status import JobStage, Phase, RevisionStatus
from derived_views.core.job import stages
from derived_views.core.revision import job_settings_of
from derived_views.core.settings import SparkSettings
from support.rendering import BODY, render
from support.world.samples import T0, make_spec

SIZING = SparkSettings(replay_min_backlog=10_000_000, replay_records_per_executor=5_000_000,
                       replay_max_executors=8)

STEADY_HASH = "34c123f017"
"""The job settings hash of make_spec() with one executor (the default before jobs ran their
tasks in the driver, and what a view stored then keeps) as the operator computed it before
stages existed: a steady job keeps it."""


@pytest.mark.parametrize(("backlog", "steady", "expected"), [
    (10_000_000, 1, 2),       # exactly two executors' worth
    (10_000_001, 1, 3),       # a record more: a third (rounded up)
    (12_500_000, 1, 3),
    (40_000_000, 1, 8),       # exactly the maximum
    (400_000_000, 1, 8),      # capped at the maximum
    (12_000_000, 4, 4),       # never fewer than the steady stage runs
    (400_000_000, 10, 10),    # a steady size above the maximum stays
])
def test_replay_executors_follow_the_backlog(backlog: int, steady: int, expected: int) -> None:
    assert stages.replay_executors_for(backlog, steady, SIZING) == expected


@pytest.mark.parametrize(("backlog", "hydrated", "expected"), [
    (50_000, False, (JobStage.Steady, None)),         # a small view: steady, no restart
    (9_999_999, False, (JobStage.Steady, None)),      # just under the threshold
    (10_000_000, False, (JobStage.Replay, 2)),        # at it: a replay stage
    (30_000_000, False, (JobStage.Replay, 6)),
    (30_000_000, True, (JobStage.Steady, None)),      # hydrated once: steady for good
    (None, False, (None, None)),                      # the log's ends not read: undecided
    (None, True, (JobStage.Steady, None)),
])
def test_the_stage_a_build_starts_in(backlog: int | None, hydrated: bool,
                                     expected: tuple[JobStage | None, int | None]) -> None:
    assert stages.stage_at_start(backlog, hydrated, 1, SIZING) == expected


def _record(**fields: object) -> RevisionStatus:
    base: dict[str, object] = dict(revision="r", index="i", phase=Phase.Backfilling, since=T0,
                                   spark_application="a", checkpoint_location="c",
                                   started_at=T0)
    return RevisionStatus.model_validate({**base, **fields})


def _spec(executor: int = 1, replay: int | None = None) -> DerivedViewSpec:
    spark: dict[str, object] = {"executor": {"instances": executor}}
    if replay is not None:
        spark["replay"] = {"executor": {"instances": replay}}
    return make_spec(spark=spark)


def test_size_of_a_revisions_job() -> None:
    replaying = _record(stage="replay", replay_executors=3)
    assert stages.size_of(_spec(), replaying) == stages.JobSize(JobStage.Replay, 3)
    # the spec's replay executors run instead of those the backlog asked for
    assert stages.size_of(_spec(replay=6), replaying) == stages.JobSize(JobStage.Replay, 6)
    # steady raised above what the backlog asked for: the replay is not smaller
    assert stages.size_of(_spec(executor=5), replaying) == stages.JobSize(JobStage.Replay, 5)
    # steady, or from before stages: the spec's executors and the steady settings
    for record in (_record(stage="steady"), _record()):
        size = stages.size_of(_spec(replay=6), record)
        assert size == stages.STEADY and size.executors is None
        assert size.spark_conf == {"spark.python.use.daemon": "false",
                                   "spark.buffer.pageSize": "1m",
                                   "spark.sql.codegen.factoryMode": "NO_CODEGEN",
                                   "spark.ui.retainedJobs": "50",
                                   "spark.ui.retainedStages": "50",
                                   "spark.ui.retainedTasks": "500",
                                   "spark.sql.ui.retainedExecutions": "50"}
    assert stages.JobSize(JobStage.Replay, 3).spark_conf == {}


def test_a_replay_is_done_once_its_index_is_hydrated() -> None:
    at = T0 + dt.timedelta(minutes=9)
    assert stages.replay_done(_record(stage="replay", hydrated_at=at))
    assert not stages.replay_done(_record(stage="replay"))
    assert not stages.replay_done(_record(stage="steady", hydrated_at=at))
    assert not stages.replay_done(_record(hydrated_at=at))


def test_a_steady_job_keeps_the_hash_it_had_before_stages() -> None:
    """An operator upgrade restarts no job: the steady hash is the old one, with or without
    spec.spark.replay; only a replay-stage job hashes its executors."""
    assert job_settings_of(_spec()) == STEADY_HASH
    assert job_settings_of(_spec(replay=6)) == STEADY_HASH
    replay = {job_settings_of(_spec(), 1.0, n) for n in (1, 3, 4)}
    assert len(replay) == 3 and STEADY_HASH not in replay


def test_the_rendered_replay_and_steady_jobs() -> None:
    steady = render()
    assert steady["metadata"]["labels"]["derivedviews.io/job-stage"] == "steady"
    assert steady["spec"]["executor"]["instances"] == 2  # BODY's spec.spark.executor
    assert steady["spec"]["sparkConf"]["spark.python.use.daemon"] == "false"
    replay = render(size=stages.JobSize(JobStage.Replay, 7))
    assert replay["metadata"]["labels"]["derivedviews.io/job-stage"] == "replay"
    assert replay["spec"]["executor"]["instances"] == 7
    assert replay["spec"]["executor"]["cores"] == steady["spec"]["executor"]["cores"]
    assert "spark.python.use.daemon" not in replay["spec"]["sparkConf"]
    assert "spark.ui.retainedJobs" not in replay["spec"]["sparkConf"]
    annotation = "derivedviews.io/job-settings"
    assert replay["metadata"]["annotations"][annotation] != \
        steady["metadata"]["annotations"][annotation]
    # the steady stage's heap settings follow the template's, for the executors too; a
    # replay keeps the template's alone
    trim = "-XX:TrimNativeHeapInterval=10000"
    template = f"-XX:+UseSerialGC -Xms32m -XX:MinHeapFreeRatio=10 -XX:MaxHeapFreeRatio=30 {trim}"
    steady_heap = ("-XX:+UseSerialGC -Xms32m -Xmn16m -XX:MinHeapFreeRatio=20 "
                   "-XX:MaxHeapFreeRatio=40 -XX:TieredStopAtLevel=1 "
                   "-XX:ReservedCodeCacheSize=128m")
    assert steady["spec"]["driver"]["javaOptions"] == f"{template} {steady_heap}"
    assert steady["spec"]["executor"]["javaOptions"] == f"{trim} {steady_heap}"
    assert replay["spec"]["driver"]["javaOptions"] == template
    assert replay["spec"]["executor"]["javaOptions"] == trim
    # the author's own setting wins over the steady stage's
    body = copy.deepcopy(BODY)
    body["spark"]["sparkConf"] = {"spark.python.use.daemon": "true"}
    assert render(body)["spec"]["sparkConf"]["spark.python.use.daemon"] == "true"
