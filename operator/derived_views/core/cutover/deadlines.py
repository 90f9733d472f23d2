"""When a candidate is given up: on stalled progress by default, on age only if asked.

A replay of a big topic can take hours and must not be torn down for being
slow; what is worth tearing down is a candidate that is behind and has
stopped committing (a hung job, a driver that never starts), like a
Deployment's progressDeadlineSeconds. The optional `deadlineSeconds` caps the
age for teams that want it.
"""

from __future__ import annotations

import datetime as dt

from derived_views.api.spec import Cutover
from derived_views.api.status import Lag
from derived_views.core import reasons
from derived_views.core.observed import LedgerPosition
from derived_views.core.times import seconds_between

TORN_DOWN_REASONS = frozenset({reasons.DEADLINE_EXCEEDED, reasons.PROGRESS_DEADLINE_EXCEEDED})


def deadline_verdict(cutover: Cutover, started_at: dt.datetime, position: LedgerPosition | None,
                     lag: Lag | None, now: dt.datetime) -> tuple[str, str] | None:
    """(reason, message) when the candidate started at `started_at` must be torn down."""
    age = seconds_between(started_at, now)
    if cutover.deadline_seconds is not None and age >= cutover.deadline_seconds:
        return reasons.DEADLINE_EXCEEDED, (f"not promoted within {cutover.deadline_seconds}s of "
                                   "starting; torn down")
    if lag is None or lag.messages == 0:
        return None  # nothing to drain (or cannot tell): an idle log is not a stall
    committed_at = position.committed_at if position is not None else None
    if committed_at is not None and committed_at > started_at:
        idle, since = seconds_between(committed_at, now), "its last commit"
    else:
        idle, since = age, "it started, without a commit"
    if idle < cutover.progress_deadline_seconds:
        return None
    return reasons.PROGRESS_DEADLINE_EXCEEDED, (
        f"no progress for {idle}s (since {since}) while {lag.messages} messages behind; "
        f"torn down after progressDeadlineSeconds={cutover.progress_deadline_seconds}")
