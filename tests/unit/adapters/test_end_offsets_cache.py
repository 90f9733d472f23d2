"""The end-offsets cache's decisions, with a fake fetch and a fake clock (no broker).

One batch per connection and interval; missing topics isolated; failures back
off instead of blocking every pass; forgotten topics dropped; `not_before`
honoured without losing batching.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

import pytest

from derived_views.adapters.kafka.offsets import EndOffsetsCache, Fetched, OffsetsUnavailable
from derived_views.core.log.kafka_connection import KafkaCluster
from support.stand_ins.offsets import ALICE, BOB, PLAIN, Clock, FakeCluster


def make(fake: FakeCluster, clock: Clock, interval: float = 5) -> EndOffsetsCache:
    return EndOffsetsCache(interval=interval, fetch=fake.fetch, clock=clock)


def test_views_of_one_cluster_share_one_batch_per_interval() -> None:
    fake, clock = FakeCluster({"a": [3, 4], "b": [7]}), Clock()
    cache = make(fake, clock)
    cache.register(PLAIN, ["a"])
    cache.register(PLAIN, ["b"])
    first = cache.get(PLAIN)
    clock.t += 4.9
    assert cache.get(PLAIN) is first
    assert fake.calls == [(PLAIN, frozenset({"a", "b"}))]
    assert first.of({"a"}) == ({("a", 0): 3, ("a", 1): 4}, frozenset())
    clock.t += 0.1
    cache.get(PLAIN)
    assert len(fake.calls) == 2


def test_a_newly_registered_topic_is_fetched_at_once_with_the_others() -> None:
    fake, clock = FakeCluster({"a": [1], "b": [2]}), Clock()
    cache = make(fake, clock)
    cache.register(PLAIN, ["a"])
    cache.get(PLAIN)
    cache.register(PLAIN, ["b"])
    assert cache.get(PLAIN).of({"b"}) == ({("b", 0): 2}, frozenset())
    assert fake.calls[-1] == (PLAIN, frozenset({"a", "b"}))


def test_each_connection_is_its_own_batch() -> None:
    fake, clock = FakeCluster({"a": [1]}), Clock()
    cache = make(fake, clock)
    for cluster in (PLAIN, ALICE, BOB, KafkaCluster.of("k:9092", dict(ALICE.settings))):
        cache.register(cluster, ["a"])
        cache.get(cluster)
    assert [c for c, _ in fake.calls] == [PLAIN, ALICE, BOB]


def test_a_missing_topic_is_reported_and_the_others_still_resolve() -> None:
    fake, clock = FakeCluster({"a": [5], "c": [6]}), Clock()
    cache = make(fake, clock)
    cache.register(PLAIN, ["a", "typo"])
    cache.register(PLAIN, ["c"])
    reading = cache.get(PLAIN)
    assert reading.of({"a", "typo"}) == ({("a", 0): 5}, frozenset({"typo"}))
    assert reading.of({"c"}) == ({("c", 0): 6}, frozenset())
    assert len(fake.calls) == 1


def _attempts(cache: EndOffsetsCache, fake: FakeCluster, clock: Clock, seconds: float,
              match: str) -> list[float]:
    """Call get every 0.5 s for `seconds`; when (relative to the start) it really fetched."""
    start, attempts = clock.t, []
    for step in range(int(seconds * 2)):
        clock.t = start + step * 0.5
        cache.register(PLAIN, ["a"])
        calls = len(fake.calls)
        with pytest.raises(OffsetsUnavailable, match=match) as info:
            cache.get(PLAIN)
        if len(fake.calls) > calls:
            attempts.append(clock.t - start)
        else:  # between attempts: the last error, at once
            assert "next try in" in str(info.value)
    return attempts


def test_failures_back_off_exponentially_up_to_the_cap_and_answer_at_once() -> None:
    fake, clock = FakeCluster({"a": [1]}), Clock()
    cache = EndOffsetsCache(interval=5, fetch=fake.fetch, clock=clock, backoff_min=1,
                            backoff_max=8)
    fake.down = "k:9092 (SASL_PLAINTEXT as u): Authentication failed"
    assert _attempts(cache, fake, clock, 40, "Authentication failed") == [0, 1, 3, 7, 15, 23, 31, 39]
    clock.t += 8
    fake.down = None
    assert cache.get(PLAIN).of({"a"})[0] == {("a", 0): 1}
    clock.t += 5
    fake.down = "down again"
    # A success resets the backoff to its minimum.
    assert _attempts(cache, fake, clock, 4, "down again") == [0, 1, 3]


def test_one_failing_connection_does_not_hold_up_another() -> None:
    fake, clock = FakeCluster({"a": [1]}), Clock()
    cache = make(fake, clock)
    cache.register(ALICE, ["a"])
    cache.register(BOB, ["a"])

    def fetch(cluster: KafkaCluster, topics: Iterable[str]) -> Fetched:
        if cluster == ALICE:
            raise OffsetsUnavailable("alice refused")
        return fake.fetch(cluster, topics)

    cache.fetch = fetch
    with pytest.raises(OffsetsUnavailable):
        cache.get(ALICE)
    assert cache.get(BOB).of({"a"})[0] == {("a", 0): 1}


def test_topics_no_view_registers_any_more_are_forgotten() -> None:
    fake, clock = FakeCluster({"a": [1], "b": [2]}), Clock()
    cache = make(fake, clock)  # registrations expire after 3 intervals = 15 s
    cache.register(PLAIN, ["a", "b"])
    cache.register(ALICE, ["a"])
    for _ in range(4):
        clock.t += 5
        cache.register(PLAIN, ["a"])  # only "a" is still wanted
        cache.get(PLAIN)
    assert fake.calls[-1] == (PLAIN, frozenset({"a"}))
    assert cache.clusters() == [PLAIN]  # nobody reads through ALICE's connection any more


def test_a_cluster_nobody_reads_any_more_is_handed_to_forget_once() -> None:
    fake, clock = FakeCluster({"a": [1]}), Clock()
    forgotten: list[KafkaCluster] = []
    cache = EndOffsetsCache(interval=5, fetch=fake.fetch, clock=clock, forget=forgotten.append)
    cache.register(PLAIN, ["a"])
    cache.register(ALICE, ["a"])
    clock.t += 14  # within 3 intervals: both still read
    cache.register(PLAIN, ["a"])
    cache.get(PLAIN)
    assert forgotten == []
    clock.t += 2  # ALICE's registration is 16 s old, PLAIN's 2 s
    cache.get(PLAIN)
    clock.t += 1
    cache.clusters()
    assert forgotten == [ALICE]


def test_not_before_forces_a_fetch_that_started_after_it() -> None:
    fake, clock = FakeCluster({"a": [1]}), Clock()
    cache = make(fake, clock)
    cache.register(PLAIN, ["a"])
    first = cache.get(PLAIN)
    assert cache.get(PLAIN, not_before=first.fetched_at) is first
    clock.t += 1
    ledger_read_at = cache.now()
    fake.topics["a"] = [9]
    second = cache.get(PLAIN, not_before=ledger_read_at)
    assert second.fetched_at >= ledger_read_at and second.of({"a"})[0] == {("a", 0): 9}
    assert len(fake.calls) == 2
    assert cache.get(PLAIN) is second  # later callers without a bound reuse it


def test_fetched_at_is_when_the_fetch_started() -> None:
    fake, clock = FakeCluster({"a": [1]}), Clock()

    def slow_fetch(cluster: KafkaCluster, topics: Iterable[str]) -> Fetched:
        clock.t += 3  # the fetch takes 3 s
        return fake.fetch(cluster, topics)

    cache = EndOffsetsCache(interval=5, fetch=slow_fetch, clock=clock)
    cache.register(PLAIN, ["a"])
    assert cache.get(PLAIN).fetched_at == 100.0


def test_callers_waiting_on_a_fetch_in_flight_reuse_it_when_it_started_after_their_bound() -> None:
    fake, clock = FakeCluster({"a": [1]}), Clock()
    entered, release = threading.Event(), threading.Event()

    def blocking_fetch(cluster: KafkaCluster, topics: Iterable[str]) -> Fetched:
        entered.set()
        assert release.wait(30)
        return fake.fetch(cluster, topics)

    cache = EndOffsetsCache(interval=5, fetch=blocking_fetch, clock=clock)
    cache.register(PLAIN, ["a"])
    results: list[float] = []
    first = threading.Thread(target=lambda: results.append(
        cache.get(PLAIN, not_before=100.0).fetched_at))
    first.start()
    assert entered.wait(30)
    entered.clear()
    second = threading.Thread(target=lambda: results.append(
        cache.get(PLAIN, not_before=100.0).fetched_at))
    second.start()
    release.set()
    first.join(30)
    second.join(30)
    assert results == [100.0, 100.0]
    assert len(fake.calls) == 1
    clock.t += 1
    assert cache.get(PLAIN, not_before=100.5).fetched_at == 101.0  # bound after it: fetch again
    assert len(fake.calls) == 2


def test_a_cluster_nobody_registered_answers_empty_without_fetching() -> None:
    fake, clock = FakeCluster({}), Clock()
    reading = make(fake, clock).get(PLAIN)
    assert reading.ends == {} and reading.missing == frozenset() and fake.calls == []


def test_views_passing_a_minute_apart_share_one_fetch_per_interval() -> None:
    """At a thousand views each view's pass comes about once a minute: its registration
    must last that long, or each pass finds its topic missing from the reading and fetches."""
    views = 120
    fake, clock = FakeCluster({f"t{i}": [i] for i in range(views)}), Clock()
    cache = EndOffsetsCache(interval=5, fetch=fake.fetch, clock=clock, expire_after=600)
    for i in range(views):  # the first round: each view's first pass
        clock.t += 0.5
        cache.register(PLAIN, [f"t{i}"])
        cache.get(PLAIN)
    first_round = len(fake.calls)
    for _ in range(5):  # five more minutes, one pass every 0.5 s, each view's every 60 s
        for i in range(views):
            clock.t += 0.5
            cache.register(PLAIN, [f"t{i}"])
            assert cache.get(PLAIN).of({f"t{i}"})[0] == {(f"t{i}", 0): i}
    assert len(fake.calls) - first_round == 5 * 60 // 5  # one fetch per 5 s interval
    assert fake.calls[-1] == (PLAIN, frozenset(fake.topics))


def test_log_starts_travel_with_the_ends_of_the_same_fetch() -> None:
    clock = Clock()

    def fetch(cluster: KafkaCluster, topics: Iterable[str]) -> Fetched:
        return Fetched({("a", 0): 9, ("a", 1): 4, ("b", 0): 7}, frozenset({"gone"}),
                       starts={("a", 0): 3, ("a", 1): 0, ("b", 0): 7})

    cache = EndOffsetsCache(interval=5, fetch=fetch, clock=clock)
    cache.register(PLAIN, ["a", "b", "gone"])
    reading = cache.get(PLAIN)
    assert reading.of({"a", "gone"}) == ({("a", 0): 9, ("a", 1): 4}, frozenset({"gone"}))
    assert reading.starts_of({"a", "gone"}) == {("a", 0): 3, ("a", 1): 0}
    assert reading.starts_of({"b"}) == {("b", 0): 7}  # all deleted: the start is the end


def test_a_fetch_that_reads_no_starts_says_so_instead_of_none_deleted() -> None:
    fake, clock = FakeCluster({"a": [5]}), Clock()
    cache = make(fake, clock)
    cache.register(PLAIN, ["a"])
    assert cache.get(PLAIN).starts_of({"a"}) is None
    assert make(fake, clock).get(PLAIN).starts_of({"a"}) == {}  # nothing asked: nothing lacks
