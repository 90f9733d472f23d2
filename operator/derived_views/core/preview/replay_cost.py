"""What a replay of a view costs: the records each source partition holds, whether the log
still holds their beginning, and how long it is expected to take.

From the log when the shell read it (each partition's log start and end offset now: a log
start past 0 lost its beginning; a new revision that would start later than the active's
history start holds less than readers have, as core.log.history judges it); else from the
status alone: the end offsets the last lag measurement saw, where the active revision's
replay began (its history start: a partition that started past offset 0 had lost its
beginning then). Each topic's retention is the status's (`status.sourceLogs`).
The time follows the rule the operator's own estimate follows (core.log.build_rates):
the active revision's measured build rate, else the newest measured build's, else the
installation's default, as a range.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from derived_views.api.spec import DerivedViewSpec
from derived_views.api.status import DerivedViewStatus, RevisionStatus
from derived_views.core.log import history
from derived_views.core.log.build_rates import AssumedRate, assumed_rate, replay_range
from derived_views.core.log.kafka_connection import SourceOffsets
from derived_views.core.log.lag import topic_of
from derived_views.core.observed import TopicRetention
from derived_views.core.planner.context import recorded_active


@dataclass(frozen=True)
class PartitionRead:
    """One source partition (or, where the status keeps only totals, one topic) a replay reads."""

    partition: str
    """`topic/partition`, or a topic's name."""
    first_offset: int
    """Where a replay begins: the log start now (read from the log), else where the active
    revision's replay began (0: at the log's beginning)."""
    end_offset: int
    holds_beginning: bool | None
    """False: the log had deleted records (before the active's replay began, from the
    status); True: it holds offset 0 (read from the log), or its retention never deletes;
    None: it deletes by age or size, so it may have since."""

    @property
    def records(self) -> int:
        """At most this many records (compaction and deletion only make it fewer)."""
        return max(self.end_offset - self.first_offset, 0)


@dataclass(frozen=True)
class ReplayCost:
    partitions: tuple[PartitionRead, ...]
    unmeasured_topics: tuple[str, ...]
    """The spec's topics the status has no end offsets for (a new view's: all)."""
    rate: AssumedRate
    """The view's own measured build rate (`from_revision`), else the installation's default."""
    retention: str
    """The topics' retention as the status last read it ("" when not read)."""
    compacted: tuple[str, ...]
    """Compacted topics: a replay reads the latest record per key, fewer than the offsets."""
    complete_history: bool
    """spec.source.history is `complete`: a revision lacking history the active has is held."""
    from_log: bool = False
    """The partitions were read from the log now (else from the status)."""
    held: str = ""
    """Read from the log, under `complete`: why the new revision would hold less history than
    it must (offset 0 for a first revision, the active's history start for another) and is
    never promoted, in the operator's words; "" when it holds it all."""

    @property
    def records(self) -> int | None:
        """At most this many records in all; None while a topic is not measured."""
        if self.unmeasured_topics or not self.partitions:
            return None
        return sum(p.records for p in self.partitions)

    def seconds(self) -> tuple[int, int] | None:
        """The replay's time, fast to slow (core.log.build_rates.replay_range); None while
        the records are unknown."""
        records = self.records
        return None if records is None else replay_range(records, self.rate)

    @property
    def lost_beginning(self) -> tuple[str, ...]:
        return tuple(p.partition for p in self.partitions if p.holds_beginning is False)

    @property
    def may_lose_beginning(self) -> tuple[str, ...]:
        return tuple(p.partition for p in self.partitions if p.holds_beginning is None)


def _end_offsets(status: DerivedViewStatus, active: RevisionStatus | None) -> dict[str, int]:
    """The newest end offsets the status keeps: the active's or the candidate's lag, else the
    active's hydration target (older: a lower bound)."""
    for lag in (status.active.lag if status.active else None,
                status.candidate.lag if status.candidate else None):
        if lag is not None and lag.end_offsets:
            return dict(lag.end_offsets)
    return dict(active.hydration_target or {}) if active is not None else {}


def _first_offset(key: str, start: Mapping[str, int]) -> int:
    if "/" in key:
        return start.get(key, 0)
    return sum(o for p, o in start.items() if topic_of(p) == key)


def replay_cost(spec: DerivedViewSpec, status: DerivedViewStatus | None,
                default: AssumedRate, *, revision: str = "",
                log: SourceOffsets | None = None) -> ReplayCost:
    """What replaying `spec`'s topics (as revision `revision`) costs: from `log` when it was
    read (its ends), else as far as `status` (None: a new view) tells; `default`: the
    installation's replay rate (core.log.build_rates.default_rate)."""
    topics = list(dict.fromkeys(spec.source.topics))
    complete = spec.source.history == "complete"
    name = recorded_active(status, None) if status is not None else None
    active = status.record(name) if status is not None and name is not None else None
    start = (active.history_start if active is not None else None) or {}
    logs = {kept.topic: TopicRetention(kept.cleanup_policy, kept.retention_ms,
                                       kept.retention_bytes, kept.remote_storage)
            for kept in (status.source_logs if status is not None else [])}
    retention = history.retention_text(topics, logs) if logs else ""
    rate = assumed_rate(status.revisions, name, default) if status is not None else default
    compacted = tuple(history.compacted_topics(topics, logs))
    if log is not None and log.ends is not None:
        reads, held = _from_log(log, topics, start, revision, name,
                                retention or history.retention_text(topics, logs), complete)
        measured = {topic_of(p.partition) for p in reads}
        return ReplayCost(tuple(reads), tuple(t for t in topics if t not in measured), rate,
                          retention, compacted, complete, from_log=True, held=held)
    if status is None:
        return ReplayCost((), tuple(topics), default, "", (), complete)
    reads = []
    for key, end in sorted(_end_offsets(status, active).items()):
        topic = topic_of(key)
        if topic not in topics:
            continue
        first = _first_offset(key, start)
        config = logs.get(topic)
        holds = False if first > 0 else (None if config is None or config.deletes else True)
        reads.append(PartitionRead(key, first, end, holds))
    measured = {topic_of(p.partition) for p in reads}
    return ReplayCost(tuple(reads), tuple(t for t in topics if t not in measured), rate,
                      retention, compacted, complete)


def _from_log(log: SourceOffsets, topics: list[str], active_start: Mapping[str, int],
              revision: str, active: str | None, retention: str, complete: bool
              ) -> tuple[list[PartitionRead], str]:
    """Each partition from its log start now to its end; and, under `complete`, why the
    revision would be held: it would start later than offset 0 (a first revision) or than
    the active's history start, as core.log.history says it."""
    ends = history.keyed(log.ends or {}, topics)
    starts = history.keyed(log.starts or {}, topics)
    reads = [PartitionRead(key, starts.get(key, 0), end, starts.get(key, 0) == 0)
             for key, end in ends.items()]
    late = history.late_start(history.nonzero(starts), active_start)
    if not complete or not late:
        return reads, ""
    short = history.Shortfall(late, {}, predicted=True)
    return reads, history.incomplete_message(revision, active, short, retention)
