"""core.log.history over hand-built observations: where a revision's history starts, what it
lacks against a baseline, gaps the log made, hydration (per partition and per topic)."""

from __future__ import annotations

import datetime as dt

import pytest

from derived_views.api.spec import DerivedViewSpec
from derived_views.core.job.job_config import job_config
from derived_views.core.log import history
from derived_views.core.observed import LedgerPosition, RunningBatch, TopicRetention
from derived_views.core.revision import job_settings_of, revision_of

T = dt.datetime(2026, 3, 1, 12, tzinfo=dt.UTC)
O0, O1 = ("orders", 0), ("orders", 1)


def position(ends: dict[tuple[str, int], int],
             start: dict[tuple[str, int], int] | None = None) -> LedgerPosition:
    return LedgerPosition(ends, T, batch_id=3, history_start=start)


@pytest.mark.parametrize(("recorded", "pos", "log_starts", "expected"), [
    # recorded in status wins over everything
    ({"orders/0": 7}, position({O0: 9}, {O0: 1}), {O0: 8}, ({"orders/0": 7}, False)),
    # the job's word in the ledger, partitions at 0 left out
    (None, position({O0: 9, O1: 9}, {O0: 5, O1: 0}), {O0: 8}, ({"orders/0": 5}, False)),
    # committed by a job that did not record it: taken to start at 0
    (None, position({O0: 9}), {O0: 8}, ({}, False)),
    # nothing committed: the log start now, a lower bound
    (None, None, {O0: 8, O1: 0}, ({"orders/0": 8}, True)),
    # nothing known
    (None, None, None, None),
])
def test_start_of(recorded: dict[str, int] | None, pos: LedgerPosition | None,
                  log_starts: dict[tuple[str, int], int] | None,
                  expected: tuple[dict[str, int], bool] | None) -> None:
    assert history.start_of(recorded, pos, log_starts, ["orders"]) == expected


@pytest.mark.parametrize(("start", "baseline", "late"), [
    ({"orders/0": 100}, {}, {"orders/0": 100}),  # a first view: against offset 0
    ({"orders/0": 100}, {"orders/0": 100}, {}),  # equal starts
    ({"orders/0": 100}, {"orders/0": 150}, {}),  # earlier than the active: more history
    ({"orders/0": 100, "orders/1": 5}, {"orders/0": 40}, {"orders/0": 60, "orders/1": 5}),
    ({}, {"orders/0": 40}, {}),
])
def test_late_start(start: dict[str, int], baseline: dict[str, int],
                    late: dict[str, int]) -> None:
    assert history.late_start(start, baseline) == late


def test_gaps_are_where_the_log_start_passed_what_was_committed() -> None:
    pos = position({O0: 50, O1: 80})
    assert history.gaps_now(pos, {}, {O0: 70, O1: 10}, ["orders"], None) == {"orders/0": 20}
    # before any commit, against where the replay started
    assert history.gaps_now(None, {"orders/0": 5}, {O0: 9, O1: 3}, ["orders"], None) == {
        "orders/0": 4}
    # a partition where it neither committed nor started is not a gap (judged as its start)
    assert history.gaps_now(None, None, {O0: 9}, ["orders"], None) == {}
    # a running batch that covers the deleted range may have read it: not judged yet
    running = RunningBatch(4, 10, {O0: 90, O1: 80}, T, T)
    assert history.gaps_now(pos, {}, {O0: 70, O1: 10}, ["orders"], running) == {}


def test_gaps_stay_once_seen() -> None:
    assert history.merged_gaps({"orders/0": 20}, {"orders/0": 5, "orders/1": 3}) == {
        "orders/0": 20, "orders/1": 3}


def test_hydration_per_partition_and_per_topic() -> None:
    ends = {O0: 120, O1: 80}
    target = history.hydration_target(ends, ["orders"])
    assert target == {"orders/0": 120, "orders/1": 80}
    assert not history.hydrated(target, position({O0: 120, O1: 79}), ends, None, ["orders"])
    assert history.hydration_left(target, position({O0: 100, O1: 79}), ends, None,
                                  ["orders"]) == 21
    assert history.hydrated(target, position({O0: 120, O1: 80}), ends, None, ["orders"])
    # records the log deleted are not waited for
    assert history.hydrated(target, position({O0: 120, O1: 30}), ends, {O1: 80}, ["orders"])
    # an empty topic is hydrated before anything is committed; no target is never hydrated
    assert history.hydrated({"orders/0": 0}, None, {O0: 0}, None, ["orders"])
    assert not history.hydrated(None, None, ends, None, ["orders"])


def test_a_target_per_topic_is_met_at_the_bound_or_the_partitions_end() -> None:
    ends = {("t", p): 10 + p for p in range(300)}
    target = history.hydration_target(ends, ["t"])
    assert target == {"t": 309}
    almost = {tp: end for tp, end in ends.items()}
    almost[("t", 299)] = 308
    assert not history.hydrated(target, position(almost), ends, None, ["t"])
    assert history.hydrated(target, position(dict(ends)), ends, None, ["t"])
    grown = {tp: end + 1000 for tp, end in ends.items()}  # busy partitions: the bound, 309
    assert not history.hydrated(target, position(dict(ends)), grown, None, ["t"])
    assert history.hydrated(target, position({tp: 309 for tp in ends}), grown, None, ["t"])


def test_retention_is_said_as_a_platform_team_would_change_it() -> None:
    configs = {"a": TopicRetention("delete", 604_800_000, -1),
               "b": TopicRetention("compact", -1, -1, remote_storage=True)}
    assert history.retention_text(["b", "a", "c"], configs) == (
        "a: cleanup.policy=delete, retention.ms=604800000 (7 days); "
        "b: cleanup.policy=compact, retention.ms=-1 (forever), remote.storage.enable=true; "
        "c: retention not read")
    assert history.compacted_topics(["a", "b"], configs) == ["b"]
    assert TopicRetention("delete", 10, -1).deletes and not TopicRetention("compact", -1).deletes


def test_the_messages_name_partitions_counts_and_the_way_on() -> None:
    short = history.Shortfall({"orders/0": 100}, {"orders/1": 3})
    text = history.incomplete_message("r2", "r1", short, "orders: cleanup.policy=delete")
    assert "revision r2's history starts later than that of revision r1" in text
    assert "orders/0 (100 records)" in text and "orders/1 (3 records)" in text
    assert "revision r1 keeps serving" in text and "fromLogStart" in text
    first = history.incomplete_message("r1", None, history.Shortfall({"orders/0": 1}, {},
                                                                    predicted=True), "x")
    assert "at least orders/0 (1 record) were deleted" in first and "nothing is served" in first


SPEC = {"source": {"kafka": {"bootstrapServers": "kafka:9092"}, "topics": ["orders"],
                   "schema": "customer_id STRING"},
        "transform": {"sql": "SELECT customer_id FROM events"},
        "sink": {"postgres": {"secretRef": {"name": "db"}, "table": "t"},
                 "primaryKey": ["customer_id"]}}


def test_history_is_neither_content_nor_a_job_setting_but_sets_the_jobs_data_loss() -> None:
    complete = DerivedViewSpec.model_validate(SPEC)
    accepted = DerivedViewSpec.model_validate(
        {**SPEC, "source": {**SPEC["source"], "history": "fromLogStart"}})
    assert revision_of(complete) == revision_of(accepted)
    assert job_settings_of(complete) == job_settings_of(accepted)

    def options(spec: DerivedViewSpec) -> object:
        return job_config(spec=spec, namespace="n", view="v", uid="u", revision=revision_of(spec),
                          checkpoint_location="/c")["source"]["kafkaOptions"]

    assert options(complete) == {}
    assert options(accepted) == {"failOnDataLoss": "false"}
