"""A source topic that gained partitions under a revision that orders by `_kafka_offset`.

Kafka orders records within a partition only. With the default partitioner a
key's partition is hash(key) mod the partition count, so after partitions are
added a key's new records land on another partition, with offsets unrelated to
those of its old records: `max_by(x, _kafka_offset)` may then keep the old
value, silently. The planner cannot rewrite the SQL, so it reports the view as
Degraded with the fix. Pure: the caller passes the observation.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping

from derived_views.core.observed import TopicPartition

_OFFSET = re.compile(r"\b_kafka_offset\b", re.IGNORECASE)


def orders_by_offset(sql: str | None) -> bool:
    """The SQL reads `_kafka_offset` (a Python transform cannot be read: False)."""
    return sql is not None and _OFFSET.search(sql) is not None


def partition_counts(end_offsets: Mapping[TopicPartition, int],
                     topics: Collection[str]) -> dict[str, int]:
    """Partitions per topic of `topics` as the log's end offsets list them."""
    counts = dict.fromkeys(sorted(topics), 0)
    for topic, _ in end_offsets:
        if topic in counts:
            counts[topic] += 1
    return {topic: n for topic, n in counts.items() if n}


def grown_topics(recorded: Mapping[str, int] | None,
                 end_offsets: Mapping[TopicPartition, int] | None) -> dict[str, tuple[int, int]]:
    """Topic -> (partitions recorded at the build's start, partitions now), for those that grew."""
    if not recorded or end_offsets is None:
        return {}
    now = partition_counts(end_offsets, recorded)
    return {topic: (before, now[topic]) for topic, before in sorted(recorded.items())
            if now.get(topic, 0) > before}


def growth_cause(revision: str, sql: str | None, recorded: Mapping[str, int] | None,
                 end_offsets: Mapping[TopicPartition, int] | None) -> str | None:
    """Why the revision's index may be silently wrong after partition growth; None if not."""
    grown = grown_topics(recorded, end_offsets)
    if not grown or not orders_by_offset(sql):
        return None
    what = ", ".join(f"{topic} {before}->{after}" for topic, (before, after) in grown.items())
    return (f"revision {revision} orders records by _kafka_offset, but partitions were added "
            f"({what}): a key's new records may now live on another partition whose offsets "
            "do not compare with the old ones, so an older value can win. Order by a version "
            "the producer sets (e.g. max_by(amount, updated_at)) and apply the change: the new "
            "revision replays from offset 0")
