"""What a replay holds while it runs: the jobs' resources for a few spec shapes (figures worked
out by hand from Spark's sizing rule), how long two jobs run side by side, the sink peak."""

from __future__ import annotations

import dataclasses

import pytest

from derived_views.api.status import DerivedViewStatus
from derived_views.core.job.sparkapplication import load_template
from derived_views.core.preview.change import LiveView
from derived_views.core.preview.footprint import (
    JobResources,
    PodShape,
    side_by_side,
    spark_mib,
)
from derived_views.core.preview.previews import Preview, preview_of
from derived_views.core.settings import CheckSettings, PollSettings, SparkSettings
from support.world.hand_observed import CONTENT_V1, I1, R1, R2, record
from support.world.samples import NAMESPACE, SQL_V2, T0, VIEW, make_settings, make_spec, spec_body

SETTINGS = make_settings()
LIVE = LiveView(make_spec(), DerivedViewStatus.model_validate(
    {"revision": R1, "active": {"revision": R1, "index": I1, "since": "2026-03-01T11:00:00Z"},
     "revisions": [record(R1, "Active", content=CONTENT_V1),
                   record("0ld0000001", "Retiring", content=CONTENT_V1)]}))


def of(body: dict[str, object], live: LiveView | None = LIVE, settings: object = SETTINGS
       ) -> Preview:
    assert isinstance(settings, type(SETTINGS))
    return preview_of(body, NAMESPACE, VIEW, live, settings, T0)


def job_of(body: dict[str, object], settings: object = SETTINGS) -> JobResources:
    preview = of(body, settings=settings)
    assert preview.footprint is not None and preview.footprint.spark.job is not None
    return preview.footprint.spark.job


@pytest.mark.parametrize(("size", "mib"), [
    ("512m", 512), ("2g", 2048), ("2G", 2048), ("1gb", 1024), ("1536k", 1), ("1t", 1_048_576),
    ("4096", 4096),
])
def test_spark_sizes_read_in_mib_as_spark_reads_them(size: str, mib: int) -> None:
    assert spark_mib(size) == mib


def test_a_size_spark_would_not_read_is_refused() -> None:
    with pytest.raises(ValueError, match="not a size"):
        spark_mib("2x")


def test_the_defaults_ask_a_python_jobs_overhead_of_four_tenths() -> None:
    # 1 GiB heaps; a Python job's overhead 0.4 x 1024 = 409.6 -> 409 MiB (over the 384 floor);
    # by default no executor pods: the tasks run in the driver
    job = job_of(spec_body(SQL_V2))
    assert job == JobResources(PodShape(1, 1, 1024, 409), PodShape(0, 1, 1024, 409))
    assert (job.pods, job.cores, job.memory_mib) == (1, 1, 1433)
    one = job_of(spec_body(SQL_V2, spark={"executor": {"instances": 1}}))
    assert one.executor == PodShape(1, 1, 1024, 409)
    assert (one.pods, one.cores, one.memory_mib) == (2, 2, 2866)


def test_a_small_driver_gets_the_floor_and_big_executors_their_factor() -> None:
    job = job_of(spec_body(SQL_V2, spark={"driver": {"cores": 2, "memory": "512m"},
                                          "executor": {"instances": 4, "cores": 2,
                                                       "memory": "4g"}}))
    # driver: 0.4 x 512 = 204 < 384; executors: 0.4 x 4096 = 1638.4 -> 1638
    assert job.driver == PodShape(1, 2, 512, 384)
    assert job.executor == PodShape(4, 2, 4096, 1638)
    assert (job.cores, job.memory_mib) == (10, 896 + 4 * 5734)


def test_spark_conf_overheads_win_over_the_factor() -> None:
    job = job_of(spec_body(SQL_V2, spark={
        "driver": {"memory": "8g"}, "executor": {"instances": 1},
        "sparkConf": {"spark.executor.memoryOverhead": "1g",
                      "spark.driver.memoryOverheadFactor": "0.1"}}))
    assert job.driver == PodShape(1, 1, 8192, 819)  # 0.1 x 8192 = 819.2
    assert job.executor == PodShape(1, 1, 1024, 1024)


def test_a_templates_factor_and_off_heap_memory_count() -> None:
    template = load_template().replace(
        "spec:\n", 'spec:\n  memoryOverheadFactor: "0.25"\n', 1).replace(
        "  sparkConf:\n", '  sparkConf:\n    spark.memory.offHeap.enabled: "true"\n'
        '    spark.memory.offHeap.size: 512m\n', 1)
    settings = make_settings(spark=SparkSettings(template=template))
    job = job_of(spec_body(SQL_V2, spark={"executor": {"instances": 1}}), settings)
    assert job.driver == PodShape(1, 1, 1024, 384)  # 0.25 x 1024 = 256 < 384
    assert job.executor == PodShape(1, 1, 1024, 384 + 512)  # and the off-heap memory


def test_both_jobs_of_a_replay_beside_the_active_and_what_runs_now() -> None:
    preview = of(spec_body(SQL_V2, spark={"executor": {"instances": 3}}))
    assert preview.footprint is not None
    spark = preview.footprint.spark
    assert spark.side_by_side
    assert spark.running == JobResources(PodShape(1, 1, 1024, 409), PodShape(0, 1, 1024, 409))
    assert spark.job is not None and spark.job.executor.instances == 3


def test_a_settings_change_that_restarts_jobs_shows_their_resources_only() -> None:
    preview = of(spec_body(spark={"driver": {"memory": "2g"}}))
    assert preview.change is not None and preview.change.restarts_jobs
    assert preview.footprint is not None
    assert preview.footprint.spark.job is not None
    assert preview.footprint.spark.job.driver == PodShape(1, 1, 2048, 819)
    assert not preview.footprint.spark.side_by_side
    assert (preview.footprint.side_by_side, preview.footprint.sink) == (None, None)
    assert of(spec_body(cutover={"maxLagMessages": 50})).footprint is None  # no restart


def test_a_new_view_runs_no_two_jobs_and_its_index_size_is_unknown() -> None:
    preview = of(spec_body(), live=None)
    assert preview.footprint is not None
    assert preview.footprint.side_by_side is None
    assert not preview.footprint.spark.side_by_side
    sink = preview.footprint.sink
    assert sink is not None and sink.active_index is None and sink.peak_bytes is None


CUTOVER = {"maxLagMessages": 0, "stableForSeconds": 30, "keepPreviousRunningSeconds": 120,
           "retainPreviousSeconds": 600}


@pytest.mark.parametrize(("cutover", "after"), [
    # stable 30 + follow 120; slow end: + 3 passes of 5 s
    (CUTOVER, (150, 165)),
    # checks judged within the 300 s budget, longer than the 30 s stable wait
    ({**CUTOVER, "checks": {"rowCount": {"maxDifference": 0}}}, (150, 435)),
    # the old job stops at the cutover: one pass fewer
    ({**CUTOVER, "keepPreviousRunningSeconds": 0}, (30, 40)),
    # the follow window ends with the retain window
    ({**CUTOVER, "retainPreviousSeconds": 100}, (130, 145)),
    # a person promotes: no upper bound
    ({**CUTOVER, "mode": "manual"}, (150, None)),
])
def test_two_jobs_run_side_by_side_for_the_replay_and_what_follows_it(
        cutover: dict[str, object], after: tuple[int, int | None]) -> None:
    settings = make_settings(polling=PollSettings(lag_seconds=5.0),
                             checks=CheckSettings(budget_seconds=300.0))
    overlap = side_by_side(make_spec(cutover=cutover), settings, (100, 400))
    assert overlap.after_replay == after
    high = None if after[1] is None else 400 + after[1]
    assert overlap.seconds == (100 + after[0], high)


def test_an_unknown_replay_leaves_the_overlap_unknown_but_says_what_follows() -> None:
    overlap = side_by_side(make_spec(cutover=CUTOVER), SETTINGS, None)
    assert overlap.seconds is None
    assert overlap.after_replay == (150, 165)
    assert "stableForSeconds 30 s" in overlap.assumptions
    assert "keepPreviousRunningSeconds" in overlap.assumptions


def test_the_sink_peak_is_the_active_index_twice_once_read() -> None:
    preview = of(spec_body(SQL_V2))
    assert preview.footprint is not None and preview.footprint.sink is not None
    sink = preview.footprint.sink
    assert (sink.active_index, sink.candidate_index) == (I1, f"orders_by_customer__{R2}")
    assert sink.retained == ("orders_by_customer__0ld0000001",)
    assert (sink.peak_bytes, sink.not_read) == (None, "")
    read = sink.with_size(7_340_032)
    assert (read.active_bytes, read.peak_bytes) == (7_340_032, 14_680_064)
    unread = sink.with_size(None, "secret shop/views-db not found")
    assert (unread.peak_bytes, unread.not_read) == (None, "secret shop/views-db not found")


def test_a_refused_views_sink_is_not_to_be_read() -> None:
    preview = of(spec_body(SQL_V2, spark={"checkpointBase": "/tmp/local"}),
                 settings=dataclasses.replace(SETTINGS, in_cluster=True))
    assert preview.refused
    assert preview.footprint is not None and preview.footprint.sink is not None
    assert "refused" in preview.footprint.sink.not_read


def test_a_replay_past_the_backlog_threshold_is_sized_for_it_then_restarts_steady() -> None:
    """12,000 records against a threshold of 5,000 and 2,500 per executor: 5 executors for
    the replay (capped at 4), the spec's 1 once steady; beside the active (steady): 4 + 1
    executors, 2 drivers."""
    status = DerivedViewStatus.model_validate(
        {"revision": R1, "active": {"revision": R1, "index": I1, "since": "2026-03-01T11:00:00Z",
                                    "lag": {"messages": 0, "endOffsets": {"orders/0": 7_000,
                                                                         "orders/1": 5_000}}},
         "revisions": [record(R1, "Active", content=CONTENT_V1)]})
    spark = dataclasses.replace(SETTINGS.spark, replay_min_backlog=5_000,
                                replay_records_per_executor=2_500, replay_max_executors=4)
    sized = dataclasses.replace(SETTINGS, spark=spark)
    preview = of(spec_body(SQL_V2), live=LiveView(make_spec(), status), settings=sized)
    assert preview.cost is not None and preview.cost.records == 12_000
    assert preview.footprint is not None
    footprint = preview.footprint.spark
    pod, in_driver = PodShape(1, 1, 1024, 409), PodShape(0, 1, 1024, 409)
    assert footprint.job == JobResources(pod, PodShape(4, 1, 1024, 409))
    assert footprint.steady == JobResources(pod, in_driver)
    # the replay's driver and 4 executors beside the active's driver (its tasks in it)
    assert footprint.both == (1 + 4 + 1, (1433 * 5) + 1433)
    below = dataclasses.replace(sized, spark=dataclasses.replace(spark, replay_min_backlog=12_001))
    small = of(spec_body(SQL_V2), live=LiveView(make_spec(), status), settings=below)
    assert small.footprint is not None and small.footprint.spark.steady is None
    assert small.footprint.spark.job == JobResources(pod, in_driver)
