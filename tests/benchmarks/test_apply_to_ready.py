"""benchmarks/apply_to_ready.py: the marks read from what the system records, and the parts
between them."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from types import ModuleType

import pytest

T0 = dt.datetime(2026, 11, 27, 9, 52, 31, 735415, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def atr(bench_script: Callable[[str], ModuleType]) -> ModuleType:
    return bench_script("apply_to_ready")


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def test_recorded_times_parse_to_aware_datetimes(atr: ModuleType) -> None:
    assert atr.parse_time("2026-11-27T09:52:34Z") == dt.datetime(2026, 11, 27, 9, 52, 34,
                                                                 tzinfo=dt.UTC)
    assert atr.parse_time("2026-11-27T09:53:09.250000+00:00") == at(37.514585)
    assert atr.parse_time(T0) == T0
    assert atr.parse_time(None) is None
    assert atr.parse_time("") is None


def test_the_driver_log_s_stamped_lines_are_local_times(atr: ModuleType) -> None:
    log = ("WARNING: Using incubator modules: jdk.incubator.vector\n"
           "26/11/27 08:39:34 WARN Utils: Your hostname resolves to a loopback address\n"
           "dvjob: query started\n"
           "26/11/27 08:39:45 INFO MicroBatchExecution: Starting [id = c0d2]. Use s3a://x\n")
    local = dt.datetime(2026, 11, 27, 8, 39, 34).astimezone()
    assert atr.log_time(log) == local
    assert atr.log_time(log, atr.QUERY_STARTED) == local + dt.timedelta(seconds=11)
    assert atr.log_time(log, "never there") is None
    assert atr.log_time("") is None


def test_a_batch_s_timing_line_is_found_by_its_batch(atr: ModuleType) -> None:
    log = ('dvjob progress {"batch": 0}\n'
           'dvjob timing {"batch": 1, "stage_seconds": 1.5, "transaction_seconds": 0.5}\n'
           'dvjob timing {"batch": 0, "stage_seconds": 7.333, "transaction_seconds": 0.024}\n')
    assert atr.batch_timing(log, 0) == {"stage_seconds": 7.333, "transaction_seconds": 0.024}
    assert atr.batch_timing(log, 2) == {}


def test_the_covering_commit_is_the_first_reaching_every_partition_s_end(
        atr: ModuleType) -> None:
    ledger = [(0, {"t": {"0": 100, "1": 50}}, at(20)), (1, {"t": {"0": 100, "1": 90}}, at(22)),
              (2, {"t": {"0": 100, "1": 100}}, at(24)), (3, {"t": {"0": 100, "1": 100}}, at(26))]
    assert atr.covering_commit(ledger, "t", {0: 100, 1: 100}) == at(24)
    assert atr.covering_commit(ledger, "t", {0: 100, 1: 100, 2: 5}) is None  # a partition unread
    assert atr.covering_commit(ledger, "other", {0: 1}) is None


def test_parts_run_from_each_mark_to_the_next_and_a_missing_mark_leaves_two_gaps(
        atr: ModuleType) -> None:
    marks = {"applied": T0, "app_created": at(2.264585), "driver_started": at(3.264585),
             "driver_first_log": at(4.264585), "query_started": at(13.264585),
             "first_commit": at(25.15), "caught_up_commit": at(25.15),
             "gate_first_held": at(27.26), "gate_held": at(37.26), "ready": at(37.26)}
    parts = atr.parts(marks)
    assert parts == {"app_created": 2.26, "driver_started": 1.0, "driver_first_log": 1.0,
                     "query_started": 9.0, "first_commit": 11.89, "caught_up_commit": 0.0,
                     "gate_first_held": 2.11, "gate_held": 10.0, "ready": 0.0, "total": 37.26}
    assert sum(v for k, v in parts.items() if k != "total") == pytest.approx(parts["total"])
    gaps = atr.parts({**marks, "driver_first_log": None})
    assert gaps["driver_first_log"] is None and gaps["query_started"] is None
    assert gaps["total"] == 37.26
    assert atr.parts({**marks, "ready": None})["total"] is None


def test_medians_take_each_part_over_the_runs_that_have_it(atr: ModuleType) -> None:
    runs = [{"parts": {"app_created": 2.0, "total": 30.0},
             "first_batch": {"stage_seconds": 7.0, "transaction_seconds": 0.02}},
            {"parts": {"app_created": 3.0, "total": 40.0}, "first_batch": {}},
            {"parts": {"app_created": None, "total": 35.0},
             "first_batch": {"stage_seconds": 8.0, "transaction_seconds": 0.04}}]
    medians = atr.medians(runs)
    assert medians["app_created"] == 2.5
    assert medians["total"] == 35.0
    assert medians["ready"] is None
    assert medians["first_batch_stage_seconds"] == 7.5
    assert medians["first_batch_transaction_seconds"] == 0.03


def test_the_operator_keeps_the_tests_environment_at_the_product_s_pace(
        atr: ModuleType) -> None:
    info = {"kubeconfig": "kubeconfig", "kafka_bootstrap": "127.0.0.1:19092",
            "s3": {"bucket": "b", "endpoint": "http://s3:1", "region": "r"}}
    env = atr.operator_environment(info, "bench/x", None)
    assert env["KUBECONFIG"] == "kubeconfig"
    assert env["DV_CHECKPOINT_BASE"] == "s3a://b/bench/x"
    assert not {"DV_LAG_POLL_SECONDS", "DV_LAG_HISTORY_SECONDS", "DV_TRIGGER_SECONDS"} & set(env)
    assert atr.operator_environment(info, "bench/x", 1.0)["DV_LAG_POLL_SECONDS"] == "1.0"


def test_the_estimate_is_set_against_the_replay_it_estimated(atr: ModuleType) -> None:
    applied = dt.datetime(2026, 12, 5, 12, 0, tzinfo=dt.UTC)
    found = atr.estimate_against_replay(
        {"records": 50_000, "seconds": 31, "recordsPerSecond": 40_000.0, "startupSeconds": 30.0},
        applied, applied + dt.timedelta(seconds=20))
    assert found == {"records": 50_000, "expected_seconds": 31.0,
                     "records_per_second": 40_000.0, "from_revision": None,
                     "measured_seconds": 20.0, "ratio": 1.55}
    assert atr.estimate_against_replay(None, applied, applied) is None
    assert atr.estimate_against_replay({"seconds": 3}, applied, None) is None
