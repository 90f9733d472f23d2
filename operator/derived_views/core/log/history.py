"""History: where a revision's index begins in the log, and whether it holds what readers had.

The product replays topics "from offset 0", but a log does not promise to keep offset 0:
retention deletes old segments, an administrator's delete-records moves a partition's log
start, compaction keeps the latest record per key. A revision's *history start* is, per
partition, the first offset its replay read (the job records Spark's resolved `earliest`
with every ledger row; the status keeps it). A revision whose history starts later than the
active's, or that lost records the log deleted before its replay read them (*gaps*), holds
less than readers have today: under `source.history: complete` (the default) it is never
promoted; `fromLogStart` accepts it, and the status says how much is missing.

A first revision under `complete` compares with offset 0 of every partition; a later one
with where the active's history starts (so a view that once accepted less is not held to
more than it serves). Before a replay has committed anything its start is not known, but it
cannot be earlier than the log start now: a log start past the baseline already says the
revision will lack records.

*Hydrated* asks the same of the log's end: a revision's index holds every record that
existed when it was created (the end offsets then, its hydration target). No gate opens
before, so a first view is never shown empty because its backlog is younger than the gate.

Pure: partitions are keyed `topic/partition` as in the status (core.log.lag.partition_key).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from derived_views.core.observed import LedgerPosition, RunningBatch, TopicPartition, TopicRetention

Offsets = Mapping[str, int]
"""Per `topic/partition`."""


def key(tp: TopicPartition) -> str:
    return f"{tp[0]}/{tp[1]}"


def keyed(offsets: Mapping[TopicPartition, int], topics: Collection[str]) -> dict[str, int]:
    """`offsets` of `topics`, keyed as the status keys partitions, in a stable order."""
    return {key(tp): offsets[tp] for tp in sorted(offsets) if tp[0] in topics}


def nonzero(offsets: Offsets) -> dict[str, int]:
    """Only the partitions that do not start at 0: what a history start keeps (small)."""
    return {p: o for p, o in offsets.items() if o > 0}


def effective_committed(committed: int, log_start: int | None) -> int:
    """What a revision has to read next on a partition: its committed offset, or the log start
    when that is further (records below it no longer exist to be read)."""
    return max(committed, log_start or 0)


@dataclass(frozen=True)
class Shortfall:
    """What a revision's index lacks compared with what readers are entitled to."""

    late_start: dict[str, int]
    """Partition -> records (offsets) between the baseline and where its history starts."""
    gaps: dict[str, int]
    """Partition -> records the log deleted before its replay read them."""
    predicted: bool = False
    """Nothing committed yet: `late_start` is from the log start now (at least this much)."""

    def __bool__(self) -> bool:
        return bool(self.late_start or self.gaps)

    def missing(self) -> dict[str, int]:
        out = dict(self.late_start)
        for partition, count in self.gaps.items():
            out[partition] = out.get(partition, 0) + count
        return dict(sorted(out.items()))

    def total(self) -> int:
        return sum(self.missing().values())


def start_of(recorded: Offsets | None, position: LedgerPosition | None,
             log_starts: Mapping[TopicPartition, int] | None,
             topics: Collection[str]) -> tuple[dict[str, int], bool] | None:
    """A revision's history start and whether it is predicted: as recorded (status, else the
    newest ledger row); before its first commit, the log start now (a lower bound: the
    replay cannot start before it); None when neither is known. A revision that committed
    under a job that did not record its start is taken to start at offset 0 (`{}`)."""
    if recorded is not None:
        return dict(recorded), False
    if position is not None:
        if position.history_start is not None:
            return nonzero(keyed(position.history_start, topics)), False
        return {}, False
    if log_starts is None:
        return None
    return nonzero(keyed(log_starts, topics)), True


def late_start(start: Offsets, baseline: Offsets) -> dict[str, int]:
    """Partition -> how many offsets later than the baseline `start` begins (0: not listed).
    A partition the baseline does not name is held to offset 0."""
    return {p: offset - baseline.get(p, 0) for p, offset in sorted(start.items())
            if offset > baseline.get(p, 0)}


def gaps_now(position: LedgerPosition | None, start: Offsets | None,
             log_starts: Mapping[TopicPartition, int] | None, topics: Collection[str],
             running: RunningBatch | None) -> dict[str, int]:
    """Partition -> records the log deleted before the revision's replay read them: its log
    start is past what the revision committed (or, before a commit, past where it started).

    A partition that a running batch covers beyond the committed offset is not judged: that
    batch may have read the records already (if it had not, Spark stops the job under
    failOnDataLoss, the default, and a later observation of the stopped job tells)."""
    if log_starts is None or start is None:
        return {}
    committed = keyed(position.end_offsets, topics) if position is not None else {}
    in_flight = keyed(running.end_offsets, topics) if running is not None else {}
    out: dict[str, int] = {}
    for partition, log_start in keyed(log_starts, topics).items():
        read_to = committed.get(partition, start.get(partition))
        if read_to is None:
            continue  # neither committed nor started there: where it starts is judged instead
        if log_start > read_to and in_flight.get(partition, 0) <= read_to:
            out[partition] = log_start - read_to
    return out


def merged_gaps(recorded: Offsets | None, seen: Offsets) -> dict[str, int]:
    """Gaps stay once seen (the records are gone for good): the larger count per partition."""
    out = dict(recorded or {})
    for partition, count in seen.items():
        out[partition] = max(out.get(partition, 0), count)
    return dict(sorted(out.items()))


def shortfall(start: tuple[dict[str, int], bool] | None, baseline: Offsets,
              gaps: Offsets | None) -> Shortfall:
    if start is None:
        return Shortfall({}, dict(gaps or {}))
    offsets, predicted = start
    return Shortfall(late_start(offsets, baseline), dict(gaps or {}), predicted)


TARGET_DETAIL_LIMIT = 256
"""Partitions a hydration target keeps one by one; beyond, one bound per topic (the status
must stay small at 100 topics x 64 partitions, as core.planner.status_size keeps lag detail)."""


def hydration_target(end_offsets: Mapping[TopicPartition, int],
                     topics: Collection[str]) -> dict[str, int]:
    """The end offsets now, as a new build's hydration target: per `topic/partition`, or per
    topic (keyed by the topic's name) with its largest end offset when there are more than
    TARGET_DETAIL_LIMIT partitions. A per-topic bound is met on a partition that has reached
    it or the partition's end, whichever is lower: never before the partition's own target
    (which is at most both), so it may only wait longer."""
    target = keyed(end_offsets, topics)
    if len(target) <= TARGET_DETAIL_LIMIT:
        return target
    bounds: dict[str, int] = {}
    for (topic, _), end in sorted(end_offsets.items()):
        if topic in topics:
            bounds[topic] = max(bounds.get(topic, 0), end)
    return bounds


def _to_read(target: Offsets, end_offsets: Mapping[TopicPartition, int],
             topics: Collection[str]) -> dict[str, int]:
    """The target per partition: as recorded, or a topic's bound capped by each of its
    partitions' end now (see hydration_target)."""
    out = {p: end for p, end in target.items() if "/" in p}
    for tp, end in end_offsets.items():
        if tp[0] in topics and tp[0] in target:
            out[key(tp)] = min(target[tp[0]], end)
    return out


def hydration_left(target: Offsets | None, position: LedgerPosition | None,
                   end_offsets: Mapping[TopicPartition, int] | None,
                   log_starts: Mapping[TopicPartition, int] | None,
                   topics: Collection[str]) -> int | None:
    """Records of the hydration target not in the index yet: 0 once hydrated (a record the
    log deleted before the replay read it is shown as a gap, not waited for). None without a
    target or the log's ends."""
    if target is None or end_offsets is None:
        return None
    committed = keyed(position.end_offsets, topics) if position is not None else {}
    starts = keyed(log_starts, topics) if log_starts is not None else {}
    return sum(max(end - effective_committed(committed.get(p, 0), starts.get(p)), 0)
               for p, end in _to_read(target, end_offsets, topics).items())


def hydrated(target: Offsets | None, position: LedgerPosition | None,
             end_offsets: Mapping[TopicPartition, int] | None,
             log_starts: Mapping[TopicPartition, int] | None, topics: Collection[str]) -> bool:
    return hydration_left(target, position, end_offsets, log_starts, topics) == 0


def retention_text(topics: Collection[str], configs: Mapping[str, TopicRetention]) -> str:
    """The topics' retention as a message names it: what a platform team would change."""
    parts = []
    for topic in sorted(topics):
        config = configs.get(topic)
        if config is None:
            parts.append(f"{topic}: retention not read")
            continue
        said = [f"cleanup.policy={config.cleanup_policy}"]
        if config.retention_ms is not None:
            said.append(f"retention.ms={config.retention_ms}"
                        + (f" ({duration_text(config.retention_ms)})"
                           if config.retention_ms >= 0 else " (forever)"))
        if config.retention_bytes is not None and config.retention_bytes >= 0:
            said.append(f"retention.bytes={config.retention_bytes}")
        if config.remote_storage:
            said.append("remote.storage.enable=true")
        parts.append(f"{topic}: {', '.join(said)}")
    return "; ".join(parts)


def duration_text(millis: int) -> str:
    seconds = millis // 1000
    for unit, size in (("days", 86400), ("hours", 3600), ("minutes", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


def compacted_topics(topics: Collection[str], configs: Mapping[str, TopicRetention]) -> list[str]:
    return sorted(t for t in topics if (c := configs.get(t)) is not None and c.compacted)


def counts_text(missing: Mapping[str, int]) -> str:
    """`orders/0 (1000 records), orders/2 (998 records)`; at most eight partitions named."""
    named = [f"{p} ({n} record{'s' if n != 1 else ''})" for p, n in list(missing.items())[:8]]
    more = len(missing) - len(named)
    return ", ".join(named) + (f" and {more} more partitions" if more > 0 else "")


FIX = ("set spec.source.history: fromLogStart to accept it (no replay), or restore the "
       "records to the topic and change the view's content to rebuild")


def incomplete_message(revision: str, active: str | None, short: Shortfall,
                       retention: str) -> str:
    """Why a revision is not served under `source.history: complete`: which partitions lack
    how many records, the topics' retention, and the two ways on."""
    said = []
    if short.late_start:
        at_least = "at least " if short.predicted else ""
        if active is None:
            said.append(f"the log no longer holds offset 0: {at_least}"
                        f"{counts_text(short.late_start)} were deleted before revision "
                        f"{revision}'s replay could read them")
        else:
            said.append(f"revision {revision}'s history starts later than that of revision "
                        f"{active}, which serves: its index would lack {at_least}"
                        f"{counts_text(short.late_start)}")
    if short.gaps:
        said.append(f"the log deleted {counts_text(short.gaps)} before revision {revision}'s "
                    "replay read them")
    serving = (f"revision {active} keeps serving" if active is not None
               else "nothing is served")
    return (f"{'; '.join(said)} (retention: {retention}); {serving}, because "
            f"spec.source.history is complete; {FIX}")


def accepted_text(start: Offsets | None, gaps: Offsets | None) -> str:
    """`fromLogStart`: what the index holds, said per partition (empty when it is whole)."""
    parts = [f"{p} from offset {o} ({o} offsets deleted before)"
             for p, o in list(sorted((start or {}).items()))[:8] if o > 0]
    parts += [f"{p} lacks {n} records deleted while it replayed"
              for p, n in list(sorted((gaps or {}).items()))[:8]]
    return "; ".join(parts)
