"""Refuse a cutover the sink says would fail or break something, and say why once.

The sink adapter judges, for every index the alias could switch to, whether
the switch can keep what people attached to the alias (dependent views,
owner, grants) and whether the alias owner could read it
(`SinkObserved.switch_blockers`). A candidate that passed the lag gate but is
blocked is not switched: the active revision keeps serving, Degraded and
Reconciling carry the blocker's reason and message, one Warning event is
emitted per distinct blocker, and the switch happens on the first pass after
the blocker is gone.
"""

from __future__ import annotations

from collections.abc import Mapping

from derived_views.api.status import DerivedViewStatus
from derived_views.core import conditions as cond
from derived_views.core.observed import SinkObserved, SwitchBlocker


def blocker(sink: SinkObserved | None, index: str) -> SwitchBlocker | None:
    """Why the alias must not switch to `index` now; None when nothing stands in the way."""
    return None if sink is None else sink.switch_blockers.get(index)


def _message(blocked: SwitchBlocker, revision: str) -> str:
    return f"revision {revision} passed the lag gate but is not switched to: {blocked.message}"


def overlay(verdicts: Mapping[str, cond.Verdict], blocked: SwitchBlocker | None,
            revision: str) -> dict[str, cond.Verdict]:
    """Degraded and Reconciling name the blocker; a problem already shown keeps Degraded."""
    out = dict(verdicts)
    if blocked is None:
        return out
    shown = cond.Verdict("True", blocked.reason, _message(blocked, revision))
    out[cond.RECONCILING] = shown
    if out[cond.DEGRADED].status != "True":
        out[cond.DEGRADED] = shown
    return out


def announcement(blocked: SwitchBlocker, revision: str,
                 previous: DerivedViewStatus) -> str | None:
    """The Warning event's message the first time this blocker holds back this revision
    (judged from the Reconciling condition the last pass wrote); None once announced."""
    before = previous.condition(cond.RECONCILING)
    if before is not None and (before.reason, before.message) == (
            blocked.reason, _message(blocked, revision)):
        return None
    return f"Held back the cutover to revision {revision}: {blocked.message}"
