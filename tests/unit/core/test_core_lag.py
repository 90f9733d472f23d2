"""Lag per partition and in total, worked out by hand."""

from __future__ import annotations

import datetime as dt

from derived_views.core.lag import compute_lag
from derived_views.core.observed import LedgerPosition

NOW = dt.datetime(2026, 3, 1, 12, 0, 0, tzinfo=dt.UTC)
ENDS = {("orders", 0): 1000, ("orders", 1): 500, ("payments", 0): 70}


def test_lag_is_end_minus_committed_per_partition() -> None:
    position = LedgerPosition({("orders", 0): 990, ("orders", 1): 500}, NOW - dt.timedelta(
        seconds=41))
    lag = compute_lag(ENDS, ["orders"], position, NOW)
    assert lag is not None
    assert lag.partitions == {"orders/0": 10, "orders/1": 0}
    assert lag.messages == 10
    assert lag.seconds == 41


def test_a_partition_missing_from_the_ledger_counts_from_zero() -> None:
    position = LedgerPosition({("orders", 0): 1000}, NOW)
    lag = compute_lag(ENDS, ["orders", "payments"], position, NOW)
    assert lag is not None
    assert lag.partitions == {"orders/0": 0, "orders/1": 500, "payments/0": 70}
    assert lag.messages == 570


def test_no_ledger_yet_means_everything_is_lag_and_seconds_unknown() -> None:
    lag = compute_lag(ENDS, ["payments"], None, NOW)
    assert lag is not None
    assert (lag.messages, lag.seconds, lag.partitions) == (70, None, {"payments/0": 70})


def test_caught_up_is_zero_seconds_and_never_negative() -> None:
    position = LedgerPosition({("orders", 0): 1005, ("orders", 1): 500}, NOW - dt.timedelta(
        hours=3))
    lag = compute_lag(ENDS, ["orders"], position, NOW)
    assert lag is not None
    assert (lag.messages, lag.seconds) == (0, 0)
    assert lag.partitions["orders/0"] == 0


def test_partitions_sort_numerically() -> None:
    ends = {("t", 10): 1, ("t", 2): 1, ("t", 1): 1}
    lag = compute_lag(ends, ["t"], None, NOW)
    assert lag is not None
    assert list(lag.partitions) == ["t/1", "t/2", "t/10"]


def test_an_undescribed_topic_makes_lag_unknown() -> None:
    assert compute_lag(ENDS, ["orders", "refunds"], None, NOW) is None
