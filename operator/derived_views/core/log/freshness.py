"""Which passes need end offsets fetched after their own ledger read.

Read before the ledger, end offsets can be older than a commit: the lag then
reads lower than it is (a busy topic could look caught up) and a committed
offset can exceed the end (a topic would look reset).  Only a pass that may
decide a gate acts on a low lag, so only it pays for a fetch of its own; every
other pass (an idle view serving its index) takes the cluster's latest reading,
which one fetch per cluster per poll keeps, and fetches again when a committed
offset is above it.
"""

from __future__ import annotations

from collections.abc import Mapping

from derived_views.api.spec import DerivedViewSpec
from derived_views.api.status import DerivedViewStatus
from derived_views.core.observed import SinkObserved, TopicPartition
from derived_views.core.revision import revision_of


def decides_gate(spec: DerivedViewSpec, status: DerivedViewStatus) -> bool:
    """A candidate is being built or is wanted, or a retiring revision's job is followed
    (a rollback switches back to it when its gate holds)."""
    active = status.active.revision if status.active is not None else None
    return (status.candidate is not None or revision_of(spec) != active
            or any(r.follow_until is not None for r in status.revisions))


def committed_beyond(sink: SinkObserved | None,
                     ends: Mapping[TopicPartition, int] | None) -> bool:
    """Some revision's ledger has committed past a partition's end in `ends` (which then
    predates that commit, or the topic was reset: a fresh fetch tells which)."""
    if sink is None or ends is None:
        return False
    return any(offset > ends[tp] for position in sink.ledger.values()
               for tp, offset in position.end_offsets.items() if tp in ends)
