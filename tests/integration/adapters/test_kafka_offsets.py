"""End offsets from a real broker, batched per cluster."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from derived_views.adapters.kafka_offsets import (
    EndOffsetsCache,
    OffsetsUnavailable,
    fetch_end_offsets,
)


def _topic(bootstrap: str, partitions: int, per_partition: list[int]) -> str:
    name = f"off-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])[name].result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for p, n in enumerate(per_partition):
        for i in range(n):
            producer.produce(name, value=str(i).encode(), partition=p)
    assert producer.flush(30) == 0
    return name


def test_end_offsets_of_several_topics_in_one_call(stack: Any) -> None:
    a = _topic(stack.kafka_bootstrap, 3, [5, 0, 2])
    b = _topic(stack.kafka_bootstrap, 1, [7])
    ends = fetch_end_offsets(stack.kafka_bootstrap, [a, b])
    assert ends == {(a, 0): 5, (a, 1): 0, (a, 2): 2, (b, 0): 7}


def test_unknown_topic_is_a_clear_error(stack: Any) -> None:
    with pytest.raises(OffsetsUnavailable, match="no-such-topic"):
        fetch_end_offsets(stack.kafka_bootstrap, ["no-such-topic-xyz"])


def test_cache_fetches_each_cluster_once_per_interval(stack: Any) -> None:
    a = _topic(stack.kafka_bootstrap, 1, [3])
    b = _topic(stack.kafka_bootstrap, 1, [4])
    calls: list[set[str]] = []
    now = [0.0]

    def counting_fetch(bootstrap: str, topics: Any) -> Any:
        calls.append(set(topics))
        return fetch_end_offsets(bootstrap, topics)

    cache = EndOffsetsCache(interval=10, fetch=counting_fetch, clock=lambda: now[0])
    cache.register(stack.kafka_bootstrap, [a])
    cache.register(stack.kafka_bootstrap, [b])
    first = cache.get(stack.kafka_bootstrap)
    second = cache.get(stack.kafka_bootstrap)  # same interval: served from the batch
    assert first == second == {(a, 0): 3, (b, 0): 4}
    assert calls == [{a, b}]
    now[0] = 11
    cache.get(stack.kafka_bootstrap)
    assert len(calls) == 2
