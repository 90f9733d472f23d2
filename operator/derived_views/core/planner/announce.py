"""Announce on transition: an event only when what it reports changed since the last pass,
not one per pass. The last pass's word is read from the status it wrote (a condition, a
record's check run)."""

from __future__ import annotations

from derived_views.core import conditions as cond
from derived_views.core import reasons
from derived_views.core.job.job_state import JobState, Judgement
from derived_views.core.planner.context import Context
from derived_views.core.planner.draft import Draft


def last_written(ctx: Context, condition: str, *fields: str) -> tuple[object, ...] | None:
    """The given fields of the condition the last pass wrote (None: it wrote none)."""
    before = ctx.obs.status.condition(condition)
    return None if before is None else tuple(getattr(before, name) for name in fields)


def emit_on_change(draft: Draft, before: object, now: object, reason: str, message: str, *,
              warning: bool = False) -> None:
    """Emit the event only when `now` (what it is about) differs from `before`."""
    if before != now:
        draft.event(reason, message, warning=warning)


def announce_job_problem(ctx: Context, draft: Draft, revision: str, judgement: Judgement,
                degraded: cond.Verdict) -> None:
    """One event when a blocked or suspended job becomes the view's shown problem (or its
    cause changes)."""
    reason = reasons.DRIVER_PENDING if judgement.kind == JobState.BLOCKED else judgement.reason
    emit_on_change(draft, last_written(ctx, cond.DEGRADED, "status", "reason", "message"),
              (degraded.status, degraded.reason, degraded.message), reason,
              f"The job of revision {revision} cannot run: {judgement.message}.",
              warning=True)


def integrity_problem(ctx: Context, draft: Draft, degraded: cond.Verdict) -> None:
    """One warning event when the view becomes Degraded for a lost index, partition growth
    or a history shorter than readers have (or the cause changes)."""
    if degraded.reason not in (reasons.INDEX_LOST, reasons.PARTITIONS_GREW,
                               reasons.HISTORY_INCOMPLETE):
        return
    # a history shortfall is told once: its counts firm up from a prediction to the job's word
    fields = ("reason",) if degraded.reason == reasons.HISTORY_INCOMPLETE else ("reason", "message")
    emit_on_change(draft, last_written(ctx, cond.DEGRADED, *fields),
              tuple(getattr(degraded, name) for name in fields), degraded.reason,
              degraded.message, warning=True)
