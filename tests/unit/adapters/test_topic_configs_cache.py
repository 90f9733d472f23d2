"""The topic-configs cache's decisions, with a fake describe and a fake clock (no broker).

One read per connection and interval for every registered topic; a new topic read at once;
unknown topics absent; a failed read backs off, keeps the last good reading and is reported
to the one caller that tried; a read under way never holds up another pass.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

import pytest

from derived_views.adapters.kafka.topic_configs import (
    ConfigsAnswer,
    TopicConfigsCache,
    TopicConfigsUnavailable,
    retention_of,
)
from derived_views.core.log.kafka_connection import KafkaCluster
from derived_views.core.observed import TopicRetention
from support.stand_ins.offsets import ALICE, BOB, PLAIN, Clock

WEEK = TopicRetention(retention_ms=604_800_000, retention_bytes=-1)
COMPACT = TopicRetention(cleanup_policy="compact", retention_ms=-1, retention_bytes=-1)


class FakeConfigs:
    """Topics with their retention; records every batch it was asked for."""

    def __init__(self, topics: dict[str, TopicRetention]) -> None:
        self.topics = topics
        self.calls: list[tuple[KafkaCluster, frozenset[str]]] = []
        self.down: Exception | None = None

    def fetch(self, cluster: KafkaCluster, topics: Iterable[str]) -> dict[str, TopicRetention]:
        asked = frozenset(topics)
        self.calls.append((cluster, asked))
        if self.down is not None:
            raise self.down
        return {t: self.topics[t] for t in asked if t in self.topics}


def make(fake: FakeConfigs, clock: Clock, *, backoff_min: float = 10, backoff_max: float = 300,
         expire_after: float | None = None) -> TopicConfigsCache:
    return TopicConfigsCache(interval=300, fetch=fake.fetch, clock=clock, backoff_min=backoff_min,
                             backoff_max=backoff_max, expire_after=expire_after)


def test_views_of_one_cluster_share_one_read_per_interval() -> None:
    fake, clock = FakeConfigs({"a": WEEK, "b": COMPACT}), Clock()
    cache = make(fake, clock)
    assert cache.get(PLAIN, ["a"]).configs == {"a": WEEK}
    assert cache.get(PLAIN, ["b"]).configs == {"b": COMPACT}  # a new topic: read at once
    assert fake.calls == [(PLAIN, frozenset({"a"})), (PLAIN, frozenset({"a", "b"}))]
    clock.t += 299
    assert cache.get(PLAIN, ["a", "b"]).configs == {"a": WEEK, "b": COMPACT}
    assert len(fake.calls) == 2
    clock.t += 1
    fake.topics["a"] = COMPACT
    assert cache.get(PLAIN, ["a"]).configs == {"a": COMPACT}
    assert fake.calls[-1] == (PLAIN, frozenset({"a", "b"}))


def test_each_connection_is_its_own_read_and_unknown_topics_are_absent() -> None:
    fake, clock = FakeConfigs({"a": WEEK}), Clock()
    cache = make(fake, clock)
    for cluster in (PLAIN, ALICE, BOB):
        answer = cache.get(cluster, ["a", "typo"])
        assert (answer.configs, answer.failure) == ({"a": WEEK}, None)
    assert [c for c, _ in fake.calls] == [PLAIN, ALICE, BOB]
    assert cache.get(PLAIN, ["typo"]).configs == {}
    assert len(fake.calls) == 3  # asked for already: absent, not read again


def test_a_failed_read_backs_off_keeps_the_last_reading_and_is_told_once() -> None:
    fake, clock = FakeConfigs({"a": WEEK}), Clock()
    cache = make(fake, clock, backoff_min=10, backoff_max=40)
    assert cache.get(PLAIN, ["a"]).configs == {"a": WEEK}
    clock.t += 300
    fake.down = TopicConfigsUnavailable("k:9092 (PLAINTEXT): Local: Timed out")
    tried_at, told = [], []
    for step in range(200):  # a pass every second for 200 s
        clock.t += 1
        calls = len(fake.calls)
        answer = cache.get(PLAIN, ["a"])
        assert answer.configs == {"a": WEEK}  # never fails, never forgets what it read
        if len(fake.calls) > calls:
            tried_at.append(step)
        if answer.failure is not None:
            told.append(answer.failure)
    assert tried_at == [0, 10, 30, 70, 110, 150, 190]  # 10, 20, 40, 40, ... s apart
    assert len(told) == len(tried_at)
    assert told[0] == "k:9092 (PLAINTEXT): Local: Timed out (next try in 10s)"
    fake.down = None
    clock.t += 40
    answer = cache.get(PLAIN, ["a"])
    assert answer.failure is None and len(fake.calls) == 1 + len(tried_at) + 1
    fake.down = TopicConfigsUnavailable("down again")
    clock.t += 300
    assert cache.get(PLAIN, ["a"]).failure == "down again (next try in 10s)"  # reset


def test_a_cluster_never_read_answers_nothing_while_it_fails_and_any_error_is_a_failure() -> None:
    fake, clock = FakeConfigs({"a": WEEK}), Clock()
    cache = make(fake, clock)
    fake.down = ValueError("an unexpected answer")
    answer = cache.get(PLAIN, ["a"])
    assert answer.configs == {}
    assert answer.failure == "ValueError('an unexpected answer') (next try in 10s)"
    assert cache.get(PLAIN, ["a"]) == ConfigsAnswer({})  # backing off: quiet


def test_a_pass_never_waits_for_a_read_under_way() -> None:
    fake, clock = FakeConfigs({"a": WEEK, "b": COMPACT}), Clock()
    entered, release = threading.Event(), threading.Event()

    def blocking(cluster: KafkaCluster, topics: Iterable[str]) -> dict[str, TopicRetention]:
        entered.set()
        assert release.wait(30)
        return fake.fetch(cluster, topics)

    cache = TopicConfigsCache(interval=300, fetch=blocking, clock=clock)
    results = []
    reader = threading.Thread(target=lambda: results.append(cache.get(PLAIN, ["a"])))
    reader.start()
    try:
        assert entered.wait(30)
        assert cache.get(PLAIN, ["b"]).configs == {}  # answered at once, without "b" yet
    finally:
        release.set()
        reader.join(30)
    assert results[0].configs == {"a": WEEK}
    assert cache.get(PLAIN, ["b"]).configs == {"b": COMPACT}  # the next pass reads it
    assert fake.calls == [(PLAIN, frozenset({"a"})), (PLAIN, frozenset({"a", "b"}))]


def test_topics_and_connections_no_view_asks_for_are_forgotten() -> None:
    fake, clock = FakeConfigs({"a": WEEK, "b": COMPACT}), Clock()
    cache = make(fake, clock, expire_after=600)
    cache.get(PLAIN, ["a", "b"])
    cache.get(ALICE, ["a"])
    for _ in range(3):
        clock.t += 300
        cache.get(PLAIN, ["a"])  # only "a" is still wanted
    assert fake.calls[-1] == (PLAIN, frozenset({"a"}))
    assert cache.clusters() == [PLAIN]


@pytest.mark.parametrize(("values", "expected"), [
    ({"cleanup.policy": "delete", "retention.ms": "604800000", "retention.bytes": "-1",
      "remote.storage.enable": "false"}, WEEK),
    ({"cleanup.policy": "compact", "retention.ms": "-1", "retention.bytes": "-1"}, COMPACT),
    ({"cleanup.policy": "compact, delete", "retention.ms": "86400000",
      "remote.storage.enable": "true"},
     TopicRetention(cleanup_policy="compact,delete", retention_ms=86_400_000,
                    remote_storage=True)),
    ({"retention.ms": None, "retention.bytes": "many"}, TopicRetention()),
])
def test_described_values_become_retention(values: dict[str, str | None],
                                          expected: TopicRetention) -> None:
    assert retention_of(values) == expected
