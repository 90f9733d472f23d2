"""Monotonic cutover: readers never see a view go back in time when the alias moves.

The alias moves to a candidate only when, on every partition both revisions read, the
candidate's index has committed at least as far as the active's: everything a reader could
see through the alias before the switch is then in what it sees after.

Both jobs follow a busy log, each committing once per trigger interval, so which one is
ahead changes from one second to the next: a rule checked on an observation would hold a
switch back by chance and let one through by chance. The rule is checked where the switch
happens instead (`Guard`): the sink holds the serving job's commits (PostgreSQL: the
switching transaction locks the serving index against writes; readers go on), waits up to
`wait_seconds` for the candidate's next batches to reach the held ledger, and then moves
the alias, or changes nothing and says why (the next pass observes that and shows it).
Before it holds anything it waits, as long, for the candidate to reach the serving ledger
as it stood when that wait began: a fixed level, which a candidate that keeps up reaches
within two of its batches, and the hold that follows lasts at most two more. (Waiting for
the candidate to be level with a serving job that keeps committing succeeds only by chance
once batches take longer than a trigger interval, as they do on a loaded cluster.)

Partitions only one of the two reads (a revision that changed its topics), and partitions
recreated under the serving index, have no order between the two indexes and do not hold
the switch back.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from derived_views.core.log.lag import commit_span
from derived_views.core.observed import LedgerPosition, TopicPartition


def behind(candidate: Mapping[TopicPartition, int], active: Mapping[TopicPartition, int]
           ) -> dict[TopicPartition, int]:
    """Partitions the active's ledger has committed further on than the candidate's, with by
    how many offsets; a partition the candidate has not committed yet counts from 0."""
    return {tp: offset - candidate.get(tp, 0) for tp, offset in sorted(active.items())
            if offset > candidate.get(tp, 0)}


def behind_positions(candidate: LedgerPosition | None, active: LedgerPosition | None,
                     partitions: Collection[TopicPartition]) -> dict[TopicPartition, int]:
    """`behind` on two ledger heads, over `partitions` (either head may be absent: no batch
    yet)."""
    if active is None:
        return {}
    mine = candidate.end_offsets if candidate is not None else {}
    return behind(mine, {tp: o for tp, o in active.end_offsets.items() if tp in partitions})


def with_in_flight(committed: LedgerPosition | None,
                   in_flight: Mapping[TopicPartition, int]) -> LedgerPosition | None:
    """How far readers may have seen a serving index whose writes are blocked: its committed
    batch, raised on each partition to the batch it was writing when the block came (a sink
    without transactions, OpenSearch, makes rows searchable before their ledger entry)."""
    if not in_flight:
        return committed
    base = committed.end_offsets if committed is not None else {}
    reach = {tp: max(base.get(tp, 0), in_flight.get(tp, 0)) for tp in {*base, *in_flight}}
    if committed is None:
        return LedgerPosition(end_offsets=reach)
    return dataclasses.replace(committed, end_offsets=reach)


def comparable(end_offsets: Mapping[TopicPartition, int], topics: Collection[str],
               active: LedgerPosition | None) -> frozenset[TopicPartition]:
    """The partitions of the candidate's `topics` whose offsets mean the same records in both
    indexes: all but those the serving index has committed beyond the log's end (the topic
    was recreated under it, core.log.lag.reset_partitions; its old offsets order nothing now)."""
    committed = active.end_offsets if active is not None else {}
    return frozenset(tp for tp, end in end_offsets.items()
                     if tp[0] in topics and committed.get(tp, 0) <= end)


def describe_gap(gap: Mapping[TopicPartition, int], limit: int = 3) -> str:
    """`orders/0 by 1200, orders/2 by 35` (the largest gaps first, at most `limit`)."""
    worst = sorted(gap.items(), key=lambda item: (-item[1], item[0]))
    text = ", ".join(f"{t}/{p} by {n}" for (t, p), n in worst[:limit])
    return text + (f" and {len(gap) - limit} more" if len(gap) > limit else "")


@dataclass(frozen=True)
class Guard:
    """What the sink checks where the switch happens: `candidate` is not behind `active` on
    `partitions` (`comparable`)."""

    active: str
    candidate: str
    partitions: frozenset[TopicPartition]
    wait_seconds: float = 10.0
    """How long each of the sink's two waits lasts (`wait_for`): for the candidate to reach
    the serving ledger as it stood when the wait began, then the held ledger."""

    def gap(self, heads: Mapping[str, LedgerPosition]) -> dict[TopicPartition, int]:
        """`behind_positions` on the ledger heads the sink read (by revision)."""
        return behind_positions(heads.get(self.candidate), heads.get(self.active),
                                self.partitions)

    def refusal(self, gap: Mapping[TopicPartition, int], *, held: bool = True) -> str:
        how = ("with the serving job's commits held" if held
               else "while both jobs committed")
        return (f"revision {self.candidate} stayed behind the serving revision {self.active} "
                f"for {self.wait_seconds:g}s {how}, on {describe_gap(gap)}")


MIN_WAIT_SECONDS = 5.0
MAX_WAIT_SECONDS = 60.0
WAIT_BATCHES = 2.5
"""A candidate reaches a level fixed while it runs within two of its batches: the one
running may have started before the level was read, the next one reads past it."""


def batch_seconds(position: LedgerPosition | None) -> float | None:
    """The revision's mean time between commits, from its ledger's head and the earlier batch
    it keeps for the commit rate; None before two batches."""
    span = commit_span(position)
    if span is None or position is None or position.earlier is None:
        return None
    newest, earlier = position.batch_id, position.earlier.batch_id
    if newest is None or earlier is None or newest <= earlier:
        return None
    return max(span, 0.0) / (newest - earlier)


def wait_for(trigger_seconds: float, candidate: LedgerPosition | None = None) -> float:
    """The sink's wait for a candidate to reach a serving level (each of the switch's two
    waits): a few of the candidate's batches, as long as its ledger says they take (a loaded
    cluster's batches take far longer than the trigger interval, and a wait shorter than two
    of them defers the switch for good), between 5 and 60 seconds."""
    batches = max(trigger_seconds, batch_seconds(candidate) or 0.0)
    return min(MAX_WAIT_SECONDS, max(MIN_WAIT_SECONDS, WAIT_BATCHES * batches))
