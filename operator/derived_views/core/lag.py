"""Lag: how far a revision's index is behind the log.

Per partition, the topic's end offset minus the offset whose effects are
committed in the index (the ledger's exclusive end; 0 when the revision has
no batch yet, so an unread partition counts whole). Never negative: end
offsets may be fetched a moment before a batch commits.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Mapping

from derived_views.api.status import Lag
from derived_views.core.observed import LedgerPosition, TopicPartition
from derived_views.core.times import seconds_between


def partition_key(tp: TopicPartition) -> str:
    """`topic/partition`, the key of `lag.partitions`."""
    return f"{tp[0]}/{tp[1]}"


def compute_lag(end_offsets: Mapping[TopicPartition, int], topics: Collection[str],
                position: LedgerPosition | None, now: dt.datetime) -> Lag | None:
    """Lag of one revision reading `topics`, given the log's ends and its ledger head.

    None (unknown) when a topic has no partition among `end_offsets`: a topic
    that could not be described must not look caught up.

    `seconds` is 0 when nothing is behind, else the age of the newest commit
    (how long the index has not advanced while behind), None before any.
    """
    known_topics = {topic for topic, _ in end_offsets}
    if any(topic not in known_topics for topic in topics):
        return None
    committed = position.end_offsets if position is not None else {}
    partitions: dict[str, int] = {}
    ends: dict[str, int] = {}
    for tp in sorted(tp for tp in end_offsets if tp[0] in topics):
        partitions[partition_key(tp)] = max(end_offsets[tp] - committed.get(tp, 0), 0)
        ends[partition_key(tp)] = end_offsets[tp]
    messages = sum(partitions.values())
    seconds: int | None
    if messages == 0:
        seconds = 0
    elif position is not None and position.committed_at is not None:
        seconds = max(seconds_between(position.committed_at, now), 0)
    else:
        seconds = None
    return Lag(messages=messages, seconds=seconds, partitions=partitions, end_offsets=ends)
