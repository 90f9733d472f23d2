"""Cutover: promote the candidate (the gate, its checks, approval, the sink's blockers),
switch the alias, and finish a switch that landed while its status update did not."""

from __future__ import annotations

import datetime as dt

from derived_views.api.status import CutoverRecord, Phase, RevisionStatus
from derived_views.core import reasons
from derived_views.core.actions import SwitchAlias
from derived_views.core.cutover import checks, monotonic, switch_guard
from derived_views.core.planner import effects, readings
from derived_views.core.planner.context import Context
from derived_views.core.planner.draft import Draft, PromotionHold
from derived_views.core.times import seconds_between


def resume_cutover(ctx: Context, draft: Draft) -> None:
    """Finish a cutover whose alias switch landed but whose status update did not."""
    if ctx.sink is None or ctx.sink.alias_target is None:
        return
    intent = ctx.obs.status.intent
    for revision, record in list(draft.records.items()):
        if revision == draft.active or ctx.sink.alias_target != record.index:
            continue
        intended = intent is not None and intent.cutover_to == revision
        if intended or record.phase == Phase.CaughtUp:
            draft.last_cutover = CutoverRecord(
                from_revision=draft.active, to_revision=revision, switched_at=ctx.now)
            finish_cutover(ctx, draft, revision)
            return


def finish_cutover(ctx: Context, draft: Draft, revision: str) -> None:
    old = draft.active
    draft.set(revision, phase=Phase.Active, reason=reasons.PROMOTED, message=None,
              caught_up_since=None, retire_after=None)
    draft.active = revision
    if old is not None and old != revision:
        follow_until = readings.follow_until(ctx, old)
        draft.set(old, phase=Phase.Retiring, retire_after=ctx.retire_after(),
                  follow_until=follow_until, reason=reasons.REPLACED,
                  message=f"replaced by revision {revision}" + (
                      "; its job keeps following the log for a rollback until "
                      f"{follow_until.isoformat()}" if follow_until else ""),
                  caught_up_since=None, lag=None, job_state=None, execution_attempts=None)
        if follow_until is None:
            effects.delete_app(ctx, draft, old)
        draft.event(reasons.CUTOVER_COMPLETED,
                    f"Switched readers of {ctx.where} from revision {old} "
                    f"to {revision}.")
    else:
        draft.event(reasons.CUTOVER_COMPLETED,
                    f"Started serving revision {revision} as {ctx.where}.")


def promote(ctx: Context, draft: Draft, revision: str) -> None:
    """Switch the alias to the building candidate once its gate has held for stableFor, its
    checks pass and it is approved; otherwise record on the draft why it is held back."""
    record = draft.records[revision]
    lag = draft.lags.get(revision)
    if record.phase != Phase.CaughtUp or lag is None or record.caught_up_since is None:
        return
    if ctx.spec.source.history == "complete" and readings.shortfall_of(ctx, draft, revision):
        draft.promotion_hold = PromotionHold("history")
        return  # not on the annotation either: readers would lose records they have
    stable_for = stable_for_seconds(ctx, draft)
    stable = seconds_between(record.caught_up_since, ctx.now) >= stable_for
    if stable and not checks_pass(ctx, record):
        draft.promotion_hold = PromotionHold("checks")
        return  # failing or not yet run: not promoted, not even on the annotation
    approved = (draft.active is None or ctx.spec.cutover.mode == "auto"
                or ctx.promote_to == revision)
    if stable and not approved:
        draft.promotion_hold = PromotionHold("approval")
    if stable and approved and not ctx.paused and ctx.sink is not None:
        blocked = switch_guard.blocker(ctx.sink, ctx.index(revision))
        if blocked is not None:
            draft.promotion_hold = PromotionHold("blocker", blocked)
            told = switch_guard.announcement(blocked, revision, ctx.obs.status)
            if told:
                draft.event(blocked.reason, told, warning=True)
            return
        if ctx.index(revision) in ctx.foreign:
            return
        deferred = ctx.obs.switch_deferred
        if deferred is not None and deferred[0] == revision:  # shown for a pass, then retried
            draft.promotion_hold = PromotionHold("behind", detail=deferred[1])
            return
        guard = None
        if draft.active is not None and ctx.obs.end_offsets is not None:
            guard = monotonic.Guard(draft.active, revision, monotonic.comparable(
                ctx.obs.end_offsets, readings.topics_of(ctx, draft, revision),
                ctx.position_of(draft.active)),
                monotonic.wait_for(ctx.settings.spark.trigger_seconds, ctx.position_of(revision)))
        draft.switches.append(SwitchAlias(ctx.schema, ctx.alias, ctx.index(revision),
                                          ctx.sink.alias_target, guard))
        draft.cutover = (revision, draft.active)
        draft.last_cutover = CutoverRecord(
            from_revision=draft.active, to_revision=revision, switched_at=ctx.now,
            gate_held_at=record.caught_up_since + dt.timedelta(seconds=stable_for),
            staleness_seconds=lag.seconds, lag_messages=lag.messages)
        finish_cutover(ctx, draft, revision)


def stable_for_seconds(ctx: Context, draft: Draft) -> int:
    """How long the gate must hold: `stableForSeconds` before readers move from a serving
    revision to another, none for a view's first revision. The gate reads staleness, so a
    first revision that passes it serves a fresh index, and until it serves readers have no
    index at all: waiting longer protects nobody."""
    return 0 if draft.active is None else ctx.spec.cutover.stable_for_seconds


def checks_pass(ctx: Context, record: RevisionStatus) -> bool:
    """No checks, or a passing run of the spec's checks made while the gate held."""
    if checks.checks_of(ctx.spec) is None:
        return True
    run = checks.current_run(ctx.spec, record.checks, record.caught_up_since)
    return ctx.check_refusal is None and run is not None and run.passed
