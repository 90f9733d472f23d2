"""Topic end offsets (high watermarks), one batched request per Kafka cluster.

Every view of a cluster is served by the same fetch: the operator asks for the
union of all views' topics once per poll interval instead of once per view.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaException, TopicPartition

TopicEnds = dict[tuple[str, int], int]


class OffsetsUnavailable(Exception):
    """The cluster could not be asked (unreachable, unknown topic)."""


def fetch_end_offsets(bootstrap: str, topics: Iterable[str], *, timeout: float = 10.0,
                      config: Mapping[str, str] | None = None) -> TopicEnds:
    """High watermark of every partition of `topics`, in one metadata + one offsets call."""
    wanted = sorted(set(topics))
    if not wanted:
        return {}
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "derived-views-offsets",
                         "enable.auto.commit": False, "log_level": 0, **(config or {})})
    try:
        md = consumer.list_topics(timeout=timeout)
        partitions: list[TopicPartition] = []
        missing = []
        for topic in wanted:
            meta = md.topics.get(topic)
            if meta is None or meta.error is not None:
                missing.append(topic)
                continue
            partitions += [TopicPartition(topic, p, -1) for p in sorted(meta.partitions)]
        if missing:
            raise OffsetsUnavailable(f"topics not found on {bootstrap}: {', '.join(missing)}")
        # OFFSET_END (-1) resolves to the high watermark for every partition in one request.
        resolved = consumer.offsets_for_times(partitions, timeout=timeout)
        ends: TopicEnds = {}
        for tp in resolved:
            if tp.error is not None:
                raise OffsetsUnavailable(f"{tp.topic}/{tp.partition}: {tp.error}")
            if tp.offset < 0:  # offsets_for_times gives -1 past the last message: ask directly
                _low, high = consumer.get_watermark_offsets(tp, timeout=timeout)
                ends[(tp.topic, tp.partition)] = int(high)
            else:
                ends[(tp.topic, tp.partition)] = int(tp.offset)
        return ends
    except KafkaException as exc:
        raise OffsetsUnavailable(f"{bootstrap}: {exc}") from None
    finally:
        consumer.close()


@dataclass
class EndOffsetsCache:
    """Per-cluster end offsets, refreshed at most once per `interval` seconds.

    `register` declares which topics each cluster serves; `get` returns the
    latest fetch for a cluster, fetching all of its registered topics in one
    batch when the previous fetch is older than the interval.
    """

    interval: float
    fetch: Callable[[str, Iterable[str]], TopicEnds] = fetch_end_offsets
    clock: Callable[[], float] = time.monotonic
    _topics: dict[str, set[str]] = field(default_factory=dict)
    _cache: dict[str, tuple[float, TopicEnds]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def register(self, bootstrap: str, topics: Iterable[str]) -> None:
        with self._lock:
            known = self._topics.setdefault(bootstrap, set())
            new = set(topics) - known
            if new:
                known |= new
                self._cache.pop(bootstrap, None)  # a new topic needs a fresh batch

    def get(self, bootstrap: str) -> TopicEnds:
        with self._lock:
            cached = self._cache.get(bootstrap)
            if cached is not None and self.clock() - cached[0] < self.interval:
                return cached[1]
            topics = set(self._topics.get(bootstrap, set()))
        ends = self.fetch(bootstrap, topics)
        with self._lock:
            self._cache[bootstrap] = (self.clock(), ends)
        return ends
