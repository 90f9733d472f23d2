"""Staleness worked out by hand: the age of the oldest record an index lacks."""

from __future__ import annotations

import datetime as dt

from derived_views.api.spec import Cutover
from derived_views.core.log.lag import compute_lag, within_gate
from derived_views.core.log.staleness import record_age, staleness, wanted_offsets
from derived_views.core.observed import LedgerPosition

NOW = dt.datetime(2026, 3, 1, 12, 0, 0, tzinfo=dt.UTC)
ENDS = {("orders", 0): 1000, ("orders", 1): 500}


def ago(seconds: float) -> dt.datetime:
    return NOW - dt.timedelta(seconds=seconds)


def test_the_oldest_missing_record_sets_the_age_whatever_the_drain_rate() -> None:
    # A fast job 10 messages behind on a topic written an hour ago: the drain estimate is
    # tiny, but readers miss records an hour old.
    earlier = LedgerPosition({("orders", 0): 0, ("orders", 1): 0}, ago(10))
    position = LedgerPosition({("orders", 0): 990, ("orders", 1): 500}, ago(1),
                              earlier=earlier)
    times = {(("orders", 0), 990): ago(3600)}
    lag = compute_lag(ENDS, ["orders"], position, NOW, times)
    assert lag is not None
    assert (lag.messages, lag.seconds) == (10, 3600)
    assert lag.eta_seconds == 1  # 1,490 messages in 9 s: 10 more take under a second
    assert not within_gate(lag, Cutover(max_lag_messages=0, max_lag_seconds=10))


def test_fresh_records_behind_pass_the_gate_in_time() -> None:
    position = LedgerPosition({("orders", 0): 990, ("orders", 1): 400}, ago(2))
    times = {(("orders", 0), 990): ago(1.5), (("orders", 1), 400): ago(4.2)}
    lag = compute_lag(ENDS, ["orders"], position, NOW, times)
    assert lag is not None
    assert lag.seconds == 5  # the older of the two, rounded up
    assert lag.eta_seconds is None  # one batch: no rate yet
    assert within_gate(lag, Cutover(max_lag_messages=0, max_lag_seconds=5))
    assert not within_gate(lag, Cutover(max_lag_messages=0, max_lag_seconds=4))


def test_a_partition_without_a_readable_time_makes_staleness_unknown() -> None:
    position = LedgerPosition({("orders", 0): 990, ("orders", 1): 400}, ago(2))
    lag = compute_lag(ENDS, ["orders"], position, NOW, {(("orders", 0), 990): ago(1)})
    assert lag is not None
    assert lag.seconds is None
    assert not within_gate(lag, Cutover(max_lag_messages=0, max_lag_seconds=60))
    assert within_gate(lag, Cutover(max_lag_messages=200, max_lag_seconds=60))


def test_nothing_pending_at_the_offset_counts_as_fresh() -> None:
    # Only a transaction marker sits between the committed offset and the end.
    assert staleness({("orders", 0): 999}, {(("orders", 0), 999): None}, NOW) == 0


def test_producer_clocks_ahead() -> None:
    assert record_age(NOW + dt.timedelta(seconds=3), NOW) == 0  # ordinary skew: just written
    assert record_age(NOW + dt.timedelta(hours=2), NOW) is None  # cannot tell: unknown
    assert staleness({("orders", 0): 5}, {(("orders", 0), 5): NOW + dt.timedelta(days=1)},
                     NOW) is None


def test_producer_clocks_behind_read_as_old() -> None:
    # A backfill stamped with last year's event times holds the gate until it is in.
    assert record_age(dt.datetime(2025, 3, 1, 12, 0, 0, tzinfo=dt.UTC), NOW) == 365 * 86400


def test_caught_up_needs_no_times() -> None:
    position = LedgerPosition({("orders", 0): 1000, ("orders", 1): 500}, ago(600))
    lag = compute_lag(ENDS, ["orders"], position, NOW, {})
    assert lag is not None
    assert (lag.messages, lag.seconds, lag.eta_seconds) == (0, 0, None)


def test_wanted_offsets_are_the_heads_behind_the_end() -> None:
    serving = LedgerPosition({("orders", 0): 1000, ("orders", 1): 420}, NOW)
    building = LedgerPosition({("orders", 0): 7}, NOW)
    wanted = wanted_offsets(ENDS, [serving, building, None])
    assert wanted == {(("orders", 1), 420), (("orders", 0), 7), (("orders", 1), 0),
                      (("orders", 0), 0)}
