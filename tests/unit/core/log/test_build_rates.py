"""A build's estimate and measured rate (core.log.build_rates), every number worked out by
hand: the rate assumed from a revision history (the active's measured build, the newest
measured one, the installation's default), the rate measured across commits, the range, and
the ETA the estimate gives before a rate is measured."""

from __future__ import annotations

from typing import Any

from derived_views.api.status import BuildRate, Lag, RevisionStatus
from derived_views.core.log.build_rates import (
    AssumedRate,
    assumed_rate,
    estimate_of,
    measured_rate,
    replay_range,
    replay_seconds,
    with_estimate,
)
from support.world.hand_observed import record

DEFAULT = AssumedRate(40_000.0, 30.0)


def revision(name: str, phase: str, started: str, build: dict[str, Any] | None = None
             ) -> RevisionStatus:
    extra: dict[str, Any] = {"startedAt": f"2026-03-01T{started}:00Z"}
    if build is not None:
        extra["buildRate"] = build
    return RevisionStatus.model_validate(record(name, phase, **extra))


# 500 records 20 s in, then 1,000/s: a start-up of 20 - 500/1000 = 19.5 s
ACTIVE_BUILD = {"firstRecords": 500, "firstSeconds": 20, "records": 60_500, "seconds": 80,
                "recordsPerSecond": 1000}
# 2,000 records 12 s in, then 4,000/s: a start-up of 12 - 0.5 = 11.5 s
NEWER_BUILD = {"firstRecords": 2000, "firstSeconds": 12, "records": 42_000, "seconds": 22,
               "recordsPerSecond": 4000}
OLDER_BUILD = {"firstRecords": 0, "firstSeconds": 9, "records": 900, "seconds": 18,
               "recordsPerSecond": 100}


def test_the_active_revisions_measured_build_comes_first() -> None:
    history = [revision("a1", "Active", "10:00", ACTIVE_BUILD),
               revision("r2", "Retired", "11:00", NEWER_BUILD)]
    assert assumed_rate(history, "a1", DEFAULT) == AssumedRate(1000.0, 19.5, "a1")


def test_without_it_the_newest_measured_build() -> None:
    history = [revision("a1", "Active", "10:00"),
               revision("r0", "Retired", "09:00", OLDER_BUILD),
               revision("r2", "Superseded", "11:00", NEWER_BUILD),
               revision("r3", "Retired", "11:30", {**NEWER_BUILD, "recordsPerSecond": None})]
    assert assumed_rate(history, "a1", DEFAULT) == AssumedRate(4000.0, 11.5, "r2")


def test_with_none_measured_the_installations_default() -> None:
    history = [revision("a1", "Active", "10:00"),
               revision("r3", "Retired", "11:30", {**NEWER_BUILD, "recordsPerSecond": None})]
    assert assumed_rate(history, "a1", DEFAULT) == DEFAULT
    assert assumed_rate([], None, DEFAULT) == DEFAULT


def test_a_start_up_never_reads_below_zero() -> None:
    resumed = {"firstRecords": 50_000, "firstSeconds": 10, "records": 60_000, "seconds": 20,
               "recordsPerSecond": 1000}  # a resumed attempt: its first commit held more
    history = [revision("a1", "Active", "10:00", resumed)]
    assert assumed_rate(history, "a1", DEFAULT) == AssumedRate(1000.0, 0.0, "a1")


def test_the_estimate_is_the_start_up_then_the_records_at_the_rate() -> None:
    rate = AssumedRate(1000.0, 19.5, "a1")
    assert replay_seconds(100_000, rate) == 120  # 19.5 + 100 = 119.5
    estimate = estimate_of(100_000, rate)
    assert (estimate.records, estimate.seconds, estimate.records_per_second,
            estimate.startup_seconds, estimate.from_revision) == (100_000, 120, 1000.0, 19.5,
                                                                   "a1")


def test_a_measured_rate_spreads_half_again_either_way() -> None:
    # 100,000 records after 19.5 s: at 1,500/s 66.7 s more, at 666.7/s 150 s more
    assert replay_range(100_000, AssumedRate(1000.0, 19.5, "a1")) == (87, 170)


def test_the_default_spreads_three_times_either_way() -> None:
    # 1,100,000 records after 30 s: at 120,000/s 9.2 s more, at 13,333/s 82.5 s more
    assert replay_range(1_100_000, DEFAULT) == (40, 113)
    assert replay_seconds(1_100_000, DEFAULT) == 58  # 30 + 27.5


def test_the_rate_is_measured_from_the_first_commit_seen_to_the_newest() -> None:
    first = measured_rate(None, 500, 20.0)
    assert first == BuildRate(first_records=500, first_seconds=20.0, records=500, seconds=20.0)
    second = measured_rate(first, 10_500, 30.0)
    assert second.records_per_second == 1000.0  # 10,000 more in 10 s
    third = measured_rate(second, 40_500, 45.0)
    assert (third.records, third.seconds, third.records_per_second) == (40_500, 45.0, 1600.0)
    assert (third.first_records, third.first_seconds) == (500, 20.0)  # 40,000 in 25 s


def test_a_commit_no_newer_or_no_larger_changes_nothing() -> None:
    seen = BuildRate(first_records=500, first_seconds=20.0, records=10_500, seconds=30.0,
                     records_per_second=1000.0)
    assert measured_rate(seen, 10_500, 35.0) is seen
    assert measured_rate(seen, 12_000, 30.0) is seen


def test_the_estimates_eta_counts_down_the_start_up_then_what_is_unread() -> None:
    estimate = estimate_of(100_000, AssumedRate(1000.0, 19.5, "a1"))
    lag = Lag(messages=100_000)
    assert with_estimate(lag, estimate, 0.0) == Lag(messages=100_000, eta_seconds=120,
                                                    eta_estimated=True)
    assert with_estimate(lag, estimate, 10.0).eta_seconds == 110  # type: ignore[union-attr]
    # past the start-up, a batch that has read 40,000: 60,000 left at 1,000/s
    read = Lag(messages=100_000, batch_read=40_000)
    assert with_estimate(read, estimate, 25.0).eta_seconds == 60  # type: ignore[union-attr]


def test_a_measured_eta_or_nothing_behind_is_left_alone() -> None:
    estimate = estimate_of(100_000, AssumedRate(1000.0, 19.5, "a1"))
    measured = Lag(messages=5000, eta_seconds=7)
    assert with_estimate(measured, estimate, 0.0) is measured
    caught_up = Lag(messages=0, seconds=0)
    assert with_estimate(caught_up, estimate, 0.0) is caught_up
    assert with_estimate(None, estimate, 0.0) is None
    assert with_estimate(Lag(messages=10), None, 0.0) == Lag(messages=10)
