"""The settled-view watch: one offsets request per cluster per poll, a wake per moved view.

A fake fetch and clock stand in for the broker (as in test_end_offsets_cache).
"""

from __future__ import annotations

from derived_views.adapters.kafka.offsets import EndOffsetsCache
from derived_views.core.cadence import ViewKey
from derived_views.reconcile.settled_watch import Seen, SettledWatch
from support.stand_ins.offsets import ALICE, PLAIN, Clock, FakeCluster


def _watch(fake: FakeCluster, clock: Clock) -> tuple[SettledWatch, list[ViewKey]]:
    woken: list[ViewKey] = []
    cache = EndOffsetsCache(interval=5, fetch=fake.fetch, clock=clock)
    return SettledWatch(cache, woken.append, interval=5), woken


def test_one_request_per_cluster_and_only_moved_views_are_woken() -> None:
    fake, clock = FakeCluster({"a": [3, 4], "b": [7], "c": [1]}), Clock()
    watch, woken = _watch(fake, clock)
    watch.settled(("ns", "on-a"), Seen(PLAIN, frozenset({"a"}), {("a", 0): 3, ("a", 1): 4},
                                       frozenset()))
    watch.settled(("ns", "on-b"), Seen(PLAIN, frozenset({"b"}), {("b", 0): 7}, frozenset()))
    watch.settled(("ns", "as-alice"), Seen(ALICE, frozenset({"c"}), {("c", 0): 1}, frozenset()))

    assert watch.poll() == [] and woken == []
    assert len(fake.calls) == 2 and {c for c, _ in fake.calls} == {PLAIN, ALICE}

    fake.topics["b"] = [9]  # two records arrive on b
    clock.t += 5
    assert watch.poll() == [("ns", "on-b")]
    assert woken == [("ns", "on-b")]
    assert not watch.is_settled(("ns", "on-b")) and watch.is_settled(("ns", "on-a"))
    assert len(fake.calls) == 4  # still one request per cluster per poll

    clock.t += 5
    assert watch.poll() == []  # not woken again until its pass says it settled again


def test_a_deleted_topic_and_an_unreachable_cluster_wake_their_views() -> None:
    fake, clock = FakeCluster({"a": [3], "c": [1]}), Clock()
    watch, woken = _watch(fake, clock)
    watch.settled(("ns", "on-a"), Seen(PLAIN, frozenset({"a"}), {("a", 0): 3}, frozenset()))
    watch.settled(("ns", "as-alice"), Seen(ALICE, frozenset({"c"}), {("c", 0): 1}, frozenset()))
    del fake.topics["a"]
    assert watch.poll() == [("ns", "on-a")]

    fake.down = "broker gone"
    clock.t += 5
    assert watch.poll() == [("ns", "as-alice")]
    assert woken == [("ns", "on-a"), ("ns", "as-alice")]


def test_a_view_that_left_or_settled_afresh_meanwhile_is_not_dropped() -> None:
    fake, clock = FakeCluster({"a": [3]}), Clock()
    watch, woken = _watch(fake, clock)
    old = Seen(PLAIN, frozenset({"a"}), {("a", 0): 2}, frozenset())
    watch.settled(("ns", "v"), old)
    watch.unsettled(("ns", "v"))
    assert watch.poll() == [] and woken == []
    watch.settled(("ns", "v"), Seen(PLAIN, frozenset({"a"}), {("a", 0): 3}, frozenset()))
    assert watch.poll() == [] and watch.is_settled(("ns", "v"))
