"""Keep the status small whatever the view reads: etcd refuses objects over 1.5 MiB, and a
view whose status cannot be written is stuck.

Per-partition lag detail is kept once, in the `active` / `candidate` summaries that
`dv watch` reads, and only while it is small; a view with many partitions gets it per
topic instead, and one with very many topics gets totals only. Revision records keep
the totals. `spentBuilds` keeps the highest builds; the rest fold into a floor that
every later build starts above, so no rebuild ever reuses a spent checkpoint. A build's
estimate is kept only while it builds.
"""

from __future__ import annotations

from collections import defaultdict

from derived_views.api.status import Lag, RevisionStatus
from derived_views.core.log.lag import topic_of
from derived_views.core.planner.records import BUILDING

LAG_ENTRIES_LIMIT = 256
"""Entries of one lag map kept in status (256 x ~30 bytes, two maps: ~15 KiB at most)."""

SPENT_BUILDS_LIMIT = 32
"""Revisions whose build number `spentBuilds` remembers by name."""


def without_detail(lag: Lag | None) -> Lag | None:
    """The lag's totals only: what a revision record needs."""
    if lag is None or not (lag.partitions or lag.end_offsets):
        return lag
    return lag.model_copy(update={"partitions": {}, "end_offsets": {}})


def record_without_detail(record: RevisionStatus) -> RevisionStatus:
    """The lag's totals; the estimate only while the revision builds (its measured
    `buildRate` stays: a later build's estimate starts from it)."""
    changes: dict[str, object] = {}
    lag = without_detail(record.lag)
    if lag is not record.lag:
        changes["lag"] = lag
    if record.estimate is not None and record.phase not in BUILDING:
        changes["estimate"] = None
    return record.model_copy(update=changes) if changes else record


def _per_topic(values: dict[str, int]) -> dict[str, int]:
    totals: defaultdict[str, int] = defaultdict(int)
    for key, value in values.items():
        totals[topic_of(key)] += value
    return dict(totals)


def bounded_detail(lag: Lag | None) -> Lag | None:
    """Per partition while there are at most DETAIL_LIMIT of them, else per topic (keys are
    topic names), else totals only."""
    if lag is None or max(len(lag.partitions), len(lag.end_offsets)) <= LAG_ENTRIES_LIMIT:
        return lag
    partitions, ends = _per_topic(lag.partitions), _per_topic(lag.end_offsets)
    if max(len(partitions), len(ends)) > LAG_ENTRIES_LIMIT:
        partitions, ends = {}, {}
    return lag.model_copy(update={"partitions": partitions, "end_offsets": ends})


def bounded_spent_builds(spent: dict[str, int], floor: int
                         ) -> tuple[dict[str, int], int]:
    """At most SPENT_BUILDS_LIMIT entries, the highest builds kept; the floor rises above
    every build forgotten."""
    if len(spent) <= SPENT_BUILDS_LIMIT:
        return spent, floor
    ranked = sorted(spent.items(), key=lambda item: (-item[1], item[0]))
    kept, forgotten = ranked[:SPENT_BUILDS_LIMIT], ranked[SPENT_BUILDS_LIMIT:]
    return dict(kept), max(floor, max(build for _, build in forgotten) + 1)
