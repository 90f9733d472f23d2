"""Cutover: promote the candidate (the gate, its checks, approval, the sink's blockers),
switch the alias, and finish a switch that landed while its status update did not."""

from __future__ import annotations

import datetime as dt

from derived_views.api.status import CutoverRecord, Phase
from derived_views.core import reasons
from derived_views.core.actions import SwitchAlias
from derived_views.core.cutover import monotonic
from derived_views.core.planner import effects, readings
from derived_views.core.planner.context import Context
from derived_views.core.planner.draft import Draft
from derived_views.core.planner.rules import promotion
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
                    f"Switched readers of {ctx.qualified_alias} from revision {old} "
                    f"to {revision}.")
    else:
        draft.event(reasons.CUTOVER_COMPLETED,
                    f"Started serving revision {revision} as {ctx.qualified_alias}.")


def try_promote(ctx: Context, draft: Draft, revision: str) -> None:
    """Switch the alias to the building candidate once its gate holds (for stableFor) and no
    hold rule speaks (core.planner.rules.promotion); otherwise record the hold on the draft."""
    record = draft.records[revision]
    lag = draft.lags.get(revision)
    if record.phase != Phase.CaughtUp or lag is None or record.caught_up_since is None:
        return
    stable_for = stable_for_seconds(ctx, draft)
    stable = seconds_between(record.caught_up_since, ctx.now) >= stable_for
    hold = promotion.first_hold(promotion.Candidate(ctx, draft, revision, record, stable))
    if hold is not None:
        draft.promotion_hold = hold
        if hold.event is not None:
            draft.event(*hold.event, warning=True)
        return
    if not stable or ctx.paused or ctx.sink is None or ctx.index(revision) in ctx.foreign:
        return
    guard = None
    if draft.active is not None and ctx.obs.end_offsets is not None:
        guard = monotonic.Guard(draft.active, revision, monotonic.comparable(
            ctx.obs.end_offsets, readings.topics_of(ctx, draft, revision),
            ctx.position_of(draft.active)),
            monotonic.wait_for(ctx.settings.spark.trigger_of(ctx.spec.cutover),
                               ctx.position_of(revision)))
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
