"""kstatus conditions: Ready, Reconciling and Stalled, plus CaughtUp and Degraded.

Ready is the "normal-true" summary; Reconciling and Stalled are the
"abnormal-true" conditions kstatus-aware tools (kubectl wait, Flux, Argo CD)
read. All five are always present so `kubectl get -o yaml` shows the full
picture. lastTransitionTime moves only when the status value changes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from derived_views.api.status import Condition

READY = "Ready"
RECONCILING = "Reconciling"
STALLED = "Stalled"
CAUGHT_UP = "CaughtUp"
DEGRADED = "Degraded"
ORDER = (READY, RECONCILING, STALLED, CAUGHT_UP, DEGRADED)

Status = Literal["True", "False", "Unknown"]


@dataclass(frozen=True)
class Verdict:
    """The planner's judgement for one condition type."""

    status: Status
    reason: str
    message: str = ""


def truth(value: bool) -> Status:
    return "True" if value else "False"


def build_conditions(verdicts: dict[str, Verdict], previous: Sequence[Condition],
                     now: dt.datetime, generation: int) -> list[Condition]:
    """Conditions in a fixed order, keeping lastTransitionTime while the status holds."""
    before = {c.type: c for c in previous}
    out = []
    for type_ in ORDER:
        verdict = verdicts[type_]
        old = before.get(type_)
        since = old.last_transition_time if old is not None and old.status == verdict.status \
            else now
        out.append(Condition(type=type_, status=verdict.status, reason=verdict.reason,
                             message=verdict.message, last_transition_time=since,
                             observed_generation=generation))
    return out
