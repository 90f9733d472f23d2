"""Lag: how far a revision's index is behind the log, in messages and in time.

Per partition, the topic's end offset minus the offset whose effects are
committed in the index (the ledger's exclusive end; 0 when the revision has
no batch yet, so an unread partition counts whole), or minus the log start
when that is further: records retention deleted are not behind, they are gone
(core.log.history says what an index lacks for it).

The end offsets must be read AFTER the ledger (the shell does so): read the
other way round, records that arrive between the two readings are committed
but not yet counted at the end, and a busy topic could read as caught up.
With that order a committed offset above the end can only mean the topic
was deleted and recreated (or truncated): `reset_partitions` finds those,
and such a revision is never caught up.

Lag in time is what the gate needs on a topic that keeps receiving records,
where the lag in messages is rarely 0 on two readings in a row: the staleness
of the index (core.log.staleness), the age of the oldest record it lacks. A job
that stops committing grows stale as fast as the clock, whatever its rate was.
The time to drain the rest at the measured commit rate is an ETA for people.

A batch reads the log long before it commits (a first replay's batch can take minutes):
its job reports how far it has read (core.observed.RunningBatch), which the lag shows as
`batchRead`; the ETA counts only what is still unread (at the commit rate, or at the batch's
read rate before one is measured; before either, the planner puts in the build's estimate,
core.log.build_rates). It never moves the gate: what is read is not in the index yet.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Collection, Mapping

from derived_views.api.spec import Cutover
from derived_views.api.status import Lag
from derived_views.core.log.staleness import RecordTimes, staleness
from derived_views.core.observed import LedgerPosition, RunningBatch, TopicPartition
from derived_views.core.times import seconds_between


def partition_key(tp: TopicPartition) -> str:
    """`topic/partition`, the key of `lag.partitions`."""
    return f"{tp[0]}/{tp[1]}"


def topic_of(key: str) -> str:
    """The topic of a `partition_key`; a key that is a topic's name already (a status that
    keeps totals per topic) is that name."""
    topic, slash, _ = key.rpartition("/")
    return topic if slash else key


def commit_span(position: LedgerPosition | None) -> float | None:
    """Seconds from the earlier batch the ledger keeps for the rate to the newest; None
    without an earlier batch or their commit times."""
    if position is None or position.earlier is None:
        return None
    if position.committed_at is None or position.earlier.committed_at is None:
        return None
    return (position.committed_at - position.earlier.committed_at).total_seconds()


def commit_rate(position: LedgerPosition | None) -> float | None:
    """Messages per second the revision committed between an earlier batch and its newest.

    None when there is no earlier batch to measure against (or no time passed).
    """
    span = commit_span(position)
    if position is None or position.earlier is None or span is None or span <= 0:
        return None
    earlier = position.earlier
    moved = sum(max(offset - earlier.end_offsets.get(tp, 0), 0)
                for tp, offset in position.end_offsets.items())
    return moved / span


REPORT_FRESH_SECONDS = 30
"""A progress report older than this is from a job that stopped reporting: not shown."""


def batch_read(end_offsets: Mapping[TopicPartition, int], topics: Collection[str],
               position: LedgerPosition | None, running: RunningBatch | None,
               now: dt.datetime) -> int | None:
    """Records the running batch has read above the committed offsets, at most its range
    (None: no batch beyond the ledger's head runs, or its report is stale)."""
    if running is None or seconds_between(running.reported_at, now) > REPORT_FRESH_SECONDS:
        return None
    if position is not None and position.batch_id is not None \
            and running.batch_id <= position.batch_id:
        return None  # the report of a batch that has committed since
    committed = position.end_offsets if position is not None else {}
    size = sum(max(min(running.end_offsets.get(tp, 0), end) - committed.get(tp, 0), 0)
               for tp, end in end_offsets.items() if tp[0] in topics)
    return max(min(running.records_read, size), 0)  # a report is the job's word: kept in range


def read_rate(read: int, running: RunningBatch) -> float | None:
    """Records per second the running batch has read (`read` of them) since it started."""
    span = (running.reported_at - running.started_at).total_seconds()
    return read / span if span > 0 and read else None


def reset_partitions(end_offsets: Mapping[TopicPartition, int], topics: Collection[str],
                     position: LedgerPosition | None) -> list[str]:
    """Partitions whose end offset is below what the index already committed: the log behind
    the index was deleted, recreated or truncated."""
    if position is None:
        return []
    return [partition_key(tp) for tp in sorted(end_offsets)
            if tp[0] in topics and position.end_offsets.get(tp, 0) > end_offsets[tp]]


def compute_lag(end_offsets: Mapping[TopicPartition, int], topics: Collection[str],
                position: LedgerPosition | None, now: dt.datetime,
                times: RecordTimes | None = None, running: RunningBatch | None = None,
                log_starts: Mapping[TopicPartition, int] | None = None) -> Lag | None:
    """Lag of one revision reading `topics`, given the log's ends and its ledger head.

    None (unknown) when a topic has no partition among `end_offsets`: a topic
    that could not be described must not look caught up. A reset partition
    (see `reset_partitions`) counts 0 here; callers check resets separately.

    `seconds` is the staleness read from `times` (core.log.staleness): 0 when nothing is
    behind, None when a partition behind has no readable time. `etaSeconds` drains the
    messages the running batch has not read yet at the measured commit rate, or before there
    is one at the batch's read rate; `sinceCommitSeconds` is the time since the newest
    commit; `batchRead` is what the running batch has read.
    """
    known_topics = {topic for topic, _ in end_offsets}
    if any(topic not in known_topics for topic in topics):
        return None
    committed = position.end_offsets if position is not None else {}
    starts = log_starts or {}
    partitions: dict[str, int] = {}
    ends: dict[str, int] = {}
    behind: dict[TopicPartition, int] = {}
    for tp in sorted(tp for tp in end_offsets if tp[0] in topics):
        next_offset = max(committed.get(tp, 0), starts.get(tp, 0))
        partitions[partition_key(tp)] = max(end_offsets[tp] - next_offset, 0)
        ends[partition_key(tp)] = end_offsets[tp]
        if partitions[partition_key(tp)]:
            behind[tp] = next_offset
    messages = sum(partitions.values())
    if messages == 0:
        return Lag(messages=0, seconds=0, partitions=partitions, end_offsets=ends)
    since_commit: int | None = None
    if position is not None and position.committed_at is not None:
        since_commit = max(seconds_between(position.committed_at, now), 0)
    rate = commit_rate(position)
    read = batch_read(end_offsets, topics, position, running, now)
    # What the running batch has read is on its way: the ETA counts what is left, so it
    # counts down while a long batch reads instead of standing still until its commit.
    unread = messages - (read or 0)
    eta = math.ceil(unread / rate) if rate else None
    if eta is None and read and running is not None and (speed := read_rate(read, running)):
        eta = math.ceil(unread / speed)
    return Lag(messages=messages, seconds=staleness(behind, times or {}, now),
               eta_seconds=eta, since_commit_seconds=since_commit, batch_read=read,
               partitions=partitions, end_offsets=ends)


def within_gate(lag: Lag | None, cutover: Cutover) -> bool:
    """The cutover gate on one reading: close enough to the log in messages or in time."""
    if lag is None:
        return False
    if lag.messages <= cutover.max_lag_messages:
        return True
    return (cutover.max_lag_seconds > 0 and lag.seconds is not None
            and lag.seconds <= cutover.max_lag_seconds)
