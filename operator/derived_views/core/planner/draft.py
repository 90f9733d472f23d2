"""What one planning pass decides: revision records, effects, events. The one mutable thing.

Phases write it; the verdicts and the assembler read it at the end of the pass.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from derived_views.api.status import CutoverRecord, Lag, Phase, RevisionStatus
from derived_views.core import conditions as cond
from derived_views.core import reasons
from derived_views.core.actions import (
    AddFinalizer,
    CreateSparkApplication,
    DeleteSparkApplication,
    DropAlias,
    DropIndex,
    EmitEvent,
    HoldSecret,
    ReleaseSecret,
    RemoveFinalizer,
    SwitchAlias,
    Upkeep,
)
from derived_views.core.job.job_state import Judgement
from derived_views.core.observed import SwitchBlocker
from derived_views.core.planner.context import Context
from derived_views.core.planner.records import clip_message


@dataclass(frozen=True)
class PromotionHold:
    """Why the candidate, caught up, is not promoted on this pass: what the first rule of
    core.planner.rules.promotion that speaks says, as the Reconciling condition shows it."""

    reason: str
    """Reconciling's reason (core.reasons)."""
    said: str = ""
    """What Reconciling's message adds after the candidate's lag ("" : nothing)."""
    blocker: SwitchBlocker | None = None
    """The sink refuses the switch (core.cutover.switch_guard): Degraded names it too."""
    event: tuple[str, str] | None = None
    """(reason, message) of a Warning event the hold announces, once."""


@dataclass
class Draft:
    """The pass's decisions so far; `set` and `event` are the ways phases write records and
    events."""

    now: dt.datetime
    """The pass's time: it stamps `since` when a record enters a phase."""
    quiet: bool
    """Paused: no events."""
    records: dict[str, RevisionStatus]
    spent_builds: dict[str, int]
    spent_builds_floor: int
    active: str | None
    held_secrets: list[str]
    # effects, in the order core.planner.assemble carries them out
    finalizers_added: list[AddFinalizer] = field(default_factory=list)
    switches: list[SwitchAlias] = field(default_factory=list)
    deletes: list[DeleteSparkApplication] = field(default_factory=list)
    creates: list[CreateSparkApplication] = field(default_factory=list)
    drop_aliases: list[DropAlias] = field(default_factory=list)
    drops: list[DropIndex] = field(default_factory=list)
    secret_holds: list[HoldSecret | ReleaseSecret] = field(default_factory=list)
    finalizers_removed: list[RemoveFinalizer] = field(default_factory=list)
    upkeep: list[Upkeep] = field(default_factory=list)
    """After the status, outside the intent (core.actions.UPKEEP)."""
    events: list[EmitEvent] = field(default_factory=list)
    cutover: tuple[str, str | None] | None = None
    """(to, from) of the switch this plan makes."""
    last_cutover: CutoverRecord | None = None
    lags: dict[str, Lag | None] = field(default_factory=dict)
    job_problems: dict[str, Judgement] = field(default_factory=dict)
    """Jobs that cannot run until someone acts (driver blocked, suspended), by revision."""
    held_jobs: set[str] = field(default_factory=set)
    """Revisions whose job must not be created this pass (their stale index is dropped first)."""
    promotion_hold: PromotionHold | None = None
    deletion_problem: cond.Verdict | None = None
    """Why the deletion waits (others' objects depend on the sink's tables)."""

    @classmethod
    def start(cls, ctx: Context) -> Draft:
        """The records as the status holds them; never two Active: a torn status is repaired,
        not trusted."""
        status = ctx.obs.status
        draft = cls(now=ctx.now, quiet=ctx.paused,
                    records={r.revision: r for r in status.revisions},
                    spent_builds=dict(status.spent_builds),
                    spent_builds_floor=status.spent_builds_floor or 0,
                    active=ctx.recorded_active, held_secrets=list(status.held_secrets))
        for extra in status.revisions:
            if extra.phase == Phase.Active and extra.revision != ctx.recorded_active:
                draft.set(extra.revision, phase=Phase.Retiring,
                          retire_after=ctx.retire_after(), reason=reasons.REPLACED)
        return draft

    def set(self, revision: str, **changes: Any) -> RevisionStatus:
        """Update a record; entering a new phase stamps `since`."""
        current = self.records[revision]
        if "phase" in changes and changes["phase"] != current.phase:
            changes.setdefault("since", self.now)
        updated = current.model_copy(update=changes)
        self.records[revision] = updated
        return updated

    def event(self, reason: str, message: str, warning: bool = False) -> None:
        if not self.quiet:
            self.events.append(EmitEvent(reason, clip_message(message), "Warning" if warning else "Normal"))
