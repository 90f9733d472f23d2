"""Progress of a replay for `dv watch`: what is done, how fast, how long still; no I/O.

Rate and ETA come from two observations of the same view (the CLI keeps the
oldest one of a short window). The rate is replay throughput (records written
into the index per second); the ETA divides the remaining lag by how fast the
lag shrinks, because the topic keeps growing while it is replayed. Before the polls see the
lag shrink, the operator's ETA is shown: before the build's first rates are measured, its
estimate (said so).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from enum import Enum

from derived_views.api.status import DerivedViewStatus, Lag, Phase
from derived_views.cli.rows import duration


@dataclass(frozen=True)
class PartitionProgress:
    """One topic/partition: `done` of `total` records are in the index."""

    key: str
    done: int
    total: int

    @property
    def lag(self) -> int:
        return self.total - self.done


def partitions(lag: Lag) -> list[PartitionProgress]:
    """Per `topic/partition`, sorted by topic then partition number.

    done = endOffset - lag (never negative: a lag measured against a newer end
    offset than the one recorded cannot make progress go below zero).
    """
    out = []
    for key in set(lag.end_offsets) | set(lag.partitions):
        total = lag.end_offsets.get(key, 0)
        remaining = lag.partitions.get(key, 0)
        total = max(total, remaining)
        out.append(PartitionProgress(key=key, done=total - remaining, total=total))
    return sorted(out, key=lambda p: _sort_key(p.key))


def _sort_key(key: str) -> tuple[str, int, str]:
    topic, _, partition = key.rpartition("/")
    return (topic, int(partition), "") if partition.isdigit() else (key, -1, key)


@dataclass(frozen=True)
class Poll:
    """What `dv watch` saw at one poll: done and lag per partition."""

    time: dt.datetime
    progress: tuple[PartitionProgress, ...]


@dataclass(frozen=True)
class Estimate:
    """Throughput in records/s and seconds until the lag reaches 0 (None: unknown)."""

    rate: float | None
    eta_seconds: float | None


def estimate(earlier: Poll | None, later: Poll, key: str | None = None
             ) -> Estimate:
    """Rate and ETA of one partition (`key`) or of all partitions together (`key=None`).

    Unknown without an earlier observation or elapsed time; the ETA is 0 when
    nothing is left and unknown while the lag is not shrinking.
    """
    done_now, lag_now = _totals(later, key)
    rate = shrink = None
    elapsed = (later.time - earlier.time).total_seconds() if earlier is not None else 0.0
    if earlier is not None and elapsed > 0:
        done_before, lag_before = _totals(earlier, key)
        rate = max(0.0, (done_now - done_before) / elapsed)
        shrink = (lag_before - lag_now) / elapsed
    if lag_now == 0:
        eta: float | None = 0.0
    elif shrink is not None and shrink > 0:
        eta = lag_now / shrink
    else:
        eta = None
    return Estimate(rate=rate, eta_seconds=eta)


def _totals(observation: Poll, key: str | None) -> tuple[int, int]:
    chosen = [p for p in observation.progress if key is None or p.key == key]
    return sum(p.done for p in chosen), sum(p.lag for p in chosen)


def eta_text(polled: float | None, lag: Lag | None) -> str:
    """The ETA `dv watch` shows: from its own polls, else the operator's (measured, or before a
    rate is measured the build's estimate, said so: `~1m40s (estimate)`)."""
    if polled is not None or lag is None or lag.eta_seconds is None:
        return duration(polled)
    if lag.eta_estimated:
        return f"~{duration(lag.eta_seconds)} (estimate)"
    return duration(lag.eta_seconds)


def batch_line(lag: Lag) -> str | None:
    """What the running batch has read of the lag, not yet committed (None: no batch reports);
    before the first commit the read is all the progress there is."""
    if lag.batch_read is None or lag.messages <= 0:
        return None
    eta = "" if lag.eta_seconds is None else f", eta {eta_text(None, lag)}"
    return (f"running batch has read {lag.batch_read:,} of the {lag.messages:,} records not yet "
            f"committed ({percent(lag.batch_read, lag.messages):.1f}%){eta}")


def watched_lag(status: DerivedViewStatus) -> tuple[str, Lag] | None:
    """The revision whose replay `dv watch` shows: the candidate, else the spec's
    revision while it is the first backfill (no active yet); None when neither has a lag."""
    if status.candidate is not None:
        lag = status.candidate.lag
        if lag is None:
            record = status.record(status.candidate.revision)
            lag = record.lag if record else None
        return (status.candidate.revision, lag) if lag is not None else None
    if status.revision is not None and status.active is None:
        record = status.record(status.revision)
        if record is not None and record.lag is not None:
            return record.revision, record.lag
    return None


class Outcome(Enum):
    """How a watch ends, with its exit code."""

    WAITING = None
    DONE = 0
    TIMED_OUT = 4  # not 2: click exits 2 on a usage error
    FAILED = 3


@dataclass(frozen=True)
class WatchVerdict:
    outcome: Outcome
    reason: str = ""


def watch_verdict(status: DerivedViewStatus, generation: int | None) -> WatchVerdict:
    """Done when Ready is True with no candidate left for the current spec; failed when
    Stalled or Degraded is True (or the spec's revision failed)."""
    for type_ in ("Stalled", "Degraded"):
        condition = status.condition(type_)
        if condition is not None and condition.status == "True":
            detail = f": {condition.message}" if condition.message else ""
            return WatchVerdict(Outcome.FAILED, f"{type_} ({condition.reason}){detail}")
    if status.revision is not None:
        record = status.record(status.revision)
        if record is not None and record.phase is Phase.Failed:
            detail = f": {record.message}" if record.message else ""
            return WatchVerdict(Outcome.FAILED, f"revision {record.revision} Failed "
                                           f"({record.reason or 'JobFailed'}){detail}")
    current = generation is None or status.observed_generation is None \
        or status.observed_generation >= generation
    ready = status.condition("Ready")
    if current and ready is not None and ready.status == "True" and status.candidate is None:
        return WatchVerdict(Outcome.DONE, "Ready, no candidate left")
    return WatchVerdict(Outcome.WAITING)


def percent(done: int, total: int) -> float:
    """Share done in percent; an empty partition counts as complete."""
    return 100.0 if total == 0 else 100.0 * done / total
