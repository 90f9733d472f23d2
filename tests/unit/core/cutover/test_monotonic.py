"""The monotonic cutover rule worked out by hand."""

from __future__ import annotations

import datetime as dt

from derived_views.core.cutover.monotonic import (
    Guard,
    batch_seconds,
    behind,
    comparable,
    describe_gap,
    wait_for,
    with_in_flight,
)
from derived_views.core.observed import LedgerPosition

NOW = dt.datetime(2026, 3, 1, 12, 0, 0, tzinfo=dt.UTC)


def test_a_candidate_ahead_or_level_everywhere_is_not_behind() -> None:
    assert behind({("o", 0): 10, ("o", 1): 7}, {("o", 0): 10, ("o", 1): 5}) == {}


def test_one_partition_behind_holds_the_switch_whatever_the_others() -> None:
    assert behind({("o", 0): 900, ("o", 1): 7}, {("o", 0): 10, ("o", 1): 12}) == {("o", 1): 5}


def test_an_uncommitted_partition_counts_from_zero() -> None:
    assert behind({}, {("o", 0): 3}) == {("o", 0): 3}


def test_the_guard_compares_only_its_partitions() -> None:
    guard = Guard(active="aaa", candidate="ccc", partitions=frozenset({("orders", 0)}))
    heads = {"aaa": LedgerPosition({("orders", 0): 50, ("legacy", 0): 900}, NOW),
             "ccc": LedgerPosition({("orders", 0): 50}, NOW)}
    assert guard.gap(heads) == {}
    heads["aaa"] = LedgerPosition({("orders", 0): 51}, NOW)
    assert guard.gap(heads) == {("orders", 0): 1}
    assert "stayed behind the serving revision aaa for 10s" in guard.refusal(guard.gap(heads))


def test_no_serving_batch_is_nothing_to_be_behind() -> None:
    guard = Guard(active="aaa", candidate="ccc", partitions=frozenset({("orders", 0)}))
    assert guard.gap({}) == {}


def test_partitions_recreated_under_the_serving_index_are_not_compared() -> None:
    ends = {("orders", 0): 3, ("orders", 1): 900, ("legacy", 0): 10}
    serving = LedgerPosition({("orders", 0): 120, ("orders", 1): 800}, NOW)
    assert comparable(ends, ["orders"], serving) == {("orders", 1)}
    assert comparable(ends, ["orders"], None) == {("orders", 0), ("orders", 1)}


def _head(batch_id: int, seconds: float, earlier: LedgerPosition | None = None
          ) -> LedgerPosition:
    return LedgerPosition({("t", 0): batch_id}, committed_at=NOW + dt.timedelta(seconds=seconds),
                          batch_id=batch_id, earlier=earlier)


def test_the_wait_spans_a_few_of_the_candidates_batches_within_bounds() -> None:
    # Before the candidate has two batches, its trigger interval stands for a batch.
    assert (wait_for(0.5), wait_for(1.0), wait_for(4.0), wait_for(60.0)) == (5.0, 5.0, 10.0, 60.0)
    # Batch 10 committed 18 s after batch 4: 3 s a batch, though the trigger asks for 1 s.
    assert wait_for(1.0, _head(10, 18.0, earlier=_head(4, 0.0))) == 7.5
    # A loaded cluster's 19 s batches: a wait of a trigger interval's few seconds would defer
    # the switch for good.
    assert wait_for(1.0, _head(12, 38.0, earlier=_head(10, 0.0))) == 47.5
    assert wait_for(1.0, _head(11, 100.0, earlier=_head(10, 0.0))) == 60.0


def test_a_batch_time_needs_two_batches_with_their_times() -> None:
    assert batch_seconds(None) is None
    assert batch_seconds(_head(3, 9.0)) is None
    assert batch_seconds(_head(3, 9.0, earlier=_head(3, 9.0))) is None
    assert batch_seconds(_head(3, 9.0, earlier=LedgerPosition({("t", 0): 1}, batch_id=1))) is None
    assert batch_seconds(_head(3, 9.0, earlier=_head(1, 1.0))) == 4.0


def test_describe_names_the_largest_gaps_first() -> None:
    gap = {("o", 0): 1, ("o", 1): 300, ("o", 2): 20, ("o", 3): 4}
    assert describe_gap(gap) == "o/1 by 300, o/2 by 20, o/3 by 4 and 1 more"


def test_a_batch_in_flight_raises_the_serving_level_where_it_reaches_further() -> None:
    at = dt.datetime(2026, 11, 27, tzinfo=dt.UTC)
    committed = LedgerPosition({("t", 0): 10, ("t", 1): 7}, committed_at=at, batch_id=4)
    reached = with_in_flight(committed, {("t", 0): 14, ("t", 1): 5, ("t", 2): 3})
    assert reached is not None
    assert reached.end_offsets == {("t", 0): 14, ("t", 1): 7, ("t", 2): 3}
    assert (reached.committed_at, reached.batch_id) == (at, 4)
    assert with_in_flight(committed, {}) is committed
    assert with_in_flight(None, {}) is None
    first = with_in_flight(None, {("t", 0): 2})
    assert first is not None and first.end_offsets == {("t", 0): 2}
    guard = Guard("a", "c", frozenset({("t", 0), ("t", 1)}))
    assert guard.gap({"a": reached, "c": committed}) == {("t", 0): 4}
