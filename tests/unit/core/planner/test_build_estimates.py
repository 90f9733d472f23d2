"""A build's estimate through the planner in the simulated world: a candidate created with a
backlog shows an ETA in its status on its first pass, before any commit, said to be the
estimate; the first commits measure its build rate, the measured ETA replaces the estimate,
and the next revision's estimate assumes the rate the served revision's build measured.

The world's jobs commit 50 records per partition per 5 s tick, the first batch three ticks
(15 s) after the SparkApplication is created (submitted, running, first batch)."""

from __future__ import annotations

from derived_views.core.settings import SparkSettings
from support.world.samples import I1, R1, R2, SQL_V1, SQL_V2, make_settings, spec_body
from support.world.world import World, run_until

DEFAULTS = SparkSettings(replay_records_per_second=20.0, replay_startup_seconds=12.0)


def backlog_world() -> World:
    """A new view over 1,000 + 600 records of `orders` (payments is not read)."""
    world = World(spec_body(SQL_V1), settings=make_settings(spark=DEFAULTS))
    world.ends.update({("orders", 0): 1000, ("orders", 1): 600})
    return world


def test_a_new_candidate_shows_the_estimates_eta_on_its_first_pass() -> None:
    world = backlog_world()
    world.reconcile()
    status = world.parsed_status()
    assert status.candidate is not None and status.candidate.revision == R1
    estimate = status.candidate.estimate
    assert estimate is not None
    # 1,600 records at the installation's 20/s after its 12 s: 12 + 80 = 92 s
    assert (estimate.records, estimate.seconds, estimate.records_per_second,
            estimate.startup_seconds, estimate.from_revision) == (1600, 92, 20.0, 12.0, None)
    lag = status.candidate.lag
    assert lag is not None and (lag.messages, lag.eta_seconds, lag.eta_estimated) == (
        1600, 92, True)
    record = status.record(R1)
    assert record is not None and record.estimate == estimate and record.build_rate is None


def test_the_first_commits_measure_the_rate_and_the_measured_eta_takes_over() -> None:
    world = backlog_world()
    for _ in range(4):  # created, submitted, running, first batch at 15 s
        world.reconcile()
        world.tick()
    world.reconcile()  # 20 s: 200 records committed, the second batch
    record = world.parsed_status().record(R1)
    assert record is not None and record.build_rate is not None
    assert (record.build_rate.first_records, record.build_rate.first_seconds,
            record.build_rate.records, record.build_rate.seconds,
            record.build_rate.records_per_second) == (100, 15.0, 200, 20.0, 20.0)
    lag = world.parsed_status().candidate.lag  # type: ignore[union-attr]
    # 1,400 left at the 20/s the ledger measured: 70 s, measured
    assert lag is not None and (lag.eta_seconds, lag.eta_estimated) == (70, None)


def test_between_the_first_and_the_second_commit_the_estimate_still_speaks() -> None:
    world = backlog_world()
    for _ in range(3):
        world.reconcile()
        world.tick()
    world.reconcile()  # 15 s: the first batch, 100 records; no rate yet
    lag = world.parsed_status().candidate.lag  # type: ignore[union-attr]
    # the start-up (12 s) is over: 1,500 left at 20/s
    assert lag is not None and (lag.messages, lag.eta_seconds, lag.eta_estimated) == (
        1500, 75, True)


def test_the_next_revision_assumes_the_served_revisions_measured_build() -> None:
    world = backlog_world()
    run_until(world, lambda w: w.alias == I1)
    served = world.parsed_status().record(R1)
    assert served is not None and served.estimate is None  # kept only while it builds
    rate = served.build_rate
    assert rate is not None
    # 100 records at 15 s; orders/1 done at 600 after 12 batches, orders/0 at 1,000 after
    # 20: 1,600 records at 15 + 19 x 5 = 110 s; 1,500 in 95 s is 15.8/s
    assert (rate.first_records, rate.first_seconds, rate.records, rate.seconds,
            rate.records_per_second) == (100, 15.0, 1600, 110.0, 15.8)
    world.edit(spec_body(SQL_V2))
    world.reconcile()
    candidate = world.parsed_status().candidate
    assert candidate is not None and candidate.revision == R2
    estimate = candidate.estimate
    assert estimate is not None
    # a start-up of 15 - 100 / 15.8 = 8.7 s, then 1,600 records at 15.8/s: 110.0 s
    assert (estimate.records, estimate.seconds, estimate.records_per_second,
            estimate.startup_seconds, estimate.from_revision) == (1600, 110, 15.8, 8.7, R1)
