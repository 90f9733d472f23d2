"""How often a view needs a pass: a settled view waits for a change instead of polling.

A pass costs API requests, a ledger query and CPU; at 1,000 views a 5 s poll
each is 200 passes a second, most of them deciding nothing.  A view is
*settled* when its stored status leaves the planner nothing to decide until
something outside it changes: its spec is served by a running job that is
caught up, no other revision is being built, followed or retained, and no
condition reports a problem.  Such a view is passed again when its topics'
end offsets move (one offsets request per cluster per poll tells), when one of
its SparkApplications changes, when its spec changes, and otherwise on a slow
safety-net timer (DV_SETTLED_POLL_SECONDS) that catches what no watch sees: a
dropped index, a rotated Secret.  Everything else keeps the lag poll.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from derived_views.api.status import DerivedViewStatus, Phase, ViewPhase
from derived_views.core.conditions import DEGRADED, READY, RECONCILING, STALLED
from derived_views.core.observed import TopicPartition

ViewKey = tuple[str, str]
"""A view by (namespace, name): what the settled watch and the pass timers key on."""

_AT_REST = frozenset({Phase.Active, Phase.Retired, Phase.Failed, Phase.Superseded})
"""Phases of revisions that need no deadline: the served one and those already let go."""


def settled(meta: Mapping[str, Any], status: DerivedViewStatus) -> bool:
    """Nothing for the planner to decide until the log, a job or the spec changes."""
    if meta.get("deletionTimestamp") or status.intent is not None:
        return False
    if status.observed_generation is None or status.observed_generation != meta.get("generation"):
        return False
    active = status.active
    if (status.phase != ViewPhase.Active or status.candidate is not None or active is None
            or active.revision != status.revision or status.lag_messages != 0):
        return False
    for record in status.revisions:
        if record.phase not in _AT_REST or record.follow_until is not None:
            return False
        if record.revision == active.revision and (record.phase != Phase.Active
                                                   or record.job_state != "RUNNING"):
            return False
    if status.record(active.revision) is None:
        return False
    ready = status.condition(READY)
    return (ready is not None and ready.status == "True"
            and ready.observed_generation in (None, meta.get("generation"))
            and not any(c.status == "True" for c in status.conditions
                        if c.type in (RECONCILING, STALLED, DEGRADED)))


def log_moved(seen: Mapping[TopicPartition, int], seen_missing: frozenset[str],
              ends: Mapping[TopicPartition, int], missing: frozenset[str]) -> bool:
    """The view's topics read differently from what its last pass saw: records arrived,
    partitions were added, a topic was deleted or re-created."""
    return dict(seen) != dict(ends) or seen_missing != missing


def next_pass_in(is_settled: bool, lag_poll_seconds: float,
                 settled_poll_seconds: float) -> float:
    """Seconds from the end of a view's pass to its next timed one: a settled view waits for
    its log, a job or its spec to wake it, with the safety net behind; any other polls lag."""
    return settled_poll_seconds if is_settled else lag_poll_seconds
