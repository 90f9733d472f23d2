"""Staleness: the age of the oldest record not yet in an index, the gate's measure in time.

Per partition, the record at the index's committed offset is the oldest one readers do not
see yet; its Kafka timestamp says since when the index has been missing it. A view whose
staleness is S shows every record older than S (in log order), which is the promise a
reader can hold the gate to; the time to drain the rest (core.log.lag's ETA) is not: a topic
written long ago drains "in 10 s" while most of it is missing (Materialize calls the same
measure wallclock lag).

The shell reads the timestamps (adapters.kafka.record_times) of the offsets
`wanted_offsets` names and hands them in as `RecordTimes`:
- a datetime: the timestamp of the first record at or after that offset;
- None: no record at or after it (only transaction markers, or the log was truncated):
  nothing is pending there;
- absent: not read (the read failed or timed out): unknown.

Producer-set timestamps (CreateTime) can lie either way, and the safe reading differs:
- in the past (a backfill carrying historical event times): the record looks old, so the
  gate waits until the index holds it (or the message gate holds). Slower, never wrong;
  a topic with `message.timestamp.type=LogAppendTime` gates on arrival time instead.
- in the future beyond `FUTURE_ALLOWANCE_SECONDS` (a clock far ahead): its age cannot be
  told, so staleness is unknown and only the message gate can open. Within the allowance
  (ordinary clock skew) it counts as age 0.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Mapping

from derived_views.core.observed import LedgerPosition, TopicPartition

RecordTimes = Mapping[tuple[TopicPartition, int], dt.datetime | None]
"""Timestamp of the first record at or after (partition, offset); see the module doc."""

FUTURE_ALLOWANCE_SECONDS = 5
"""A record stamped at most this far ahead of the operator's clock counts as just written
(producers' and the operator's clocks differ by this much on a healthy cluster)."""


def wanted_offsets(end_offsets: Mapping[TopicPartition, int],
                   positions: Iterable[LedgerPosition | None],
                   log_starts: Mapping[TopicPartition, int] | None = None
                   ) -> frozenset[tuple[TopicPartition, int]]:
    """The (partition, offset) pairs whose record times the lag of these ledger positions needs:
    each position's committed offset (0 without a batch), or the log start when that is
    further (core.log.lag), on every partition still behind."""
    wanted: set[tuple[TopicPartition, int]] = set()
    starts = log_starts or {}
    for position in positions:
        committed = position.end_offsets if position is not None else {}
        for tp, end in end_offsets.items():
            offset = max(committed.get(tp, 0), starts.get(tp, 0))
            if offset < end:
                wanted.add((tp, offset))
    return frozenset(wanted)


def record_age(stamp: dt.datetime | None, now: dt.datetime) -> int | None:
    """Whole seconds (rounded up) since `stamp`; 0 for nothing pending or a stamp within the
    allowance ahead; None for a stamp further ahead (its age cannot be told)."""
    if stamp is None:
        return 0
    age = (now - stamp).total_seconds()
    if age < -FUTURE_ALLOWANCE_SECONDS:
        return None
    return max(math.ceil(age), 0)


def staleness(behind: Mapping[TopicPartition, int], times: RecordTimes,
              now: dt.datetime) -> int | None:
    """The largest record age over the partitions in `behind` (partition -> committed offset);
    0 when none is behind; None when any of them cannot be told."""
    ages = [record_age(times[(tp, offset)], now) if (tp, offset) in times else None
            for tp, offset in behind.items()]
    if any(age is None for age in ages):
        return None
    return max((age for age in ages if age is not None), default=0)
