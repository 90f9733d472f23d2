"""A Kafka cluster's end offsets and a clock, stood in for the end-offsets cache's tests (no
broker): what a fetch returns, and every batch it was asked for."""

from __future__ import annotations

from collections.abc import Iterable

from derived_views.adapters.kafka.offsets import Fetched, OffsetsUnavailable
from derived_views.core.log.kafka_connection import KafkaCluster

PLAIN = KafkaCluster.of("k:9092")
ALICE = KafkaCluster.of("k:9092", {"sasl.username": "alice", "sasl.password": "a"})
BOB = KafkaCluster.of("k:9092", {"sasl.username": "bob", "sasl.password": "b"})


class FakeCluster:
    """Topics with partition ends; records every batch it was asked for."""

    def __init__(self, topics: dict[str, list[int]]) -> None:
        self.topics = topics
        self.calls: list[tuple[KafkaCluster, frozenset[str]]] = []
        self.down: str | None = None

    def fetch(self, cluster: KafkaCluster, topics: Iterable[str]) -> Fetched:
        asked = frozenset(topics)
        self.calls.append((cluster, asked))
        if self.down:
            raise OffsetsUnavailable(self.down)
        ends = {(t, p): e for t in asked if t in self.topics for p, e in enumerate(self.topics[t])}
        return Fetched(ends, frozenset(t for t in asked if t not in self.topics))


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t
