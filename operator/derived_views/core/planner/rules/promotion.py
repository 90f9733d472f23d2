"""Whether a caught-up candidate is promoted now: an ordered chain of hold rules, the first
that speaks holds it back (and says why in Reconciling); none speaking, it is switched in
(core.planner.phases.cutover). A new promotion rule is one function here and its place in
HOLDS; its reason in core.reasons; its setting in api.spec.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass

from derived_views.api.constants import PROMOTE_ANNOTATION
from derived_views.api.status import JobStage, RevisionStatus
from derived_views.core import reasons
from derived_views.core.cutover import checks, switch_guard
from derived_views.core.planner import readings
from derived_views.core.planner.context import Context
from derived_views.core.planner.draft import Draft, PromotionHold
from derived_views.core.planner.records import checks_column


@dataclass(frozen=True)
class Candidate:
    """What the hold rules read: the pass, and the candidate whose gate holds."""

    ctx: Context
    draft: Draft
    revision: str
    record: RevisionStatus
    stable: bool
    """The gate has held for stableForSeconds (always, for a view's first revision)."""

    @property
    def switchable(self) -> bool:
        """Stable, and the sink and the view allow an action now."""
        return self.stable and not self.ctx.paused and self.ctx.sink is not None


HoldRule = Callable[[Candidate], PromotionHold | None]


def replaying(c: Candidate) -> PromotionHold | None:
    """Its job runs in its replay stage (core.job.stages): it restarts in its steady stage
    first, and with not_kept_fresh the restart's gap delays the switch, never the served
    index's freshness. Not on the annotation either."""
    app = c.ctx.apps.get(c.revision)
    if c.record.stage is not JobStage.Replay and (app is None or app.stage != JobStage.Replay):
        return None
    return PromotionHold(reasons.REPLAY_STAGE, "not promoted before its job restarts in its "
                                               "steady stage, from its checkpoint")


TIMESTAMP_RESOLUTION = dt.timedelta(seconds=1)
"""A creationTimestamp is whole seconds, cut down: a driver created at 12:00:05.8 says
12:00:05, so only a commit from 12:00:06 on is surely its own."""


def not_kept_fresh(c: Candidate) -> PromotionHold | None:
    """Its job is not running, or records wait and its current driver has committed no batch
    yet (restarted in its steady stage, for changed job settings, after a lost driver): the
    index would age from the switch until that driver's first batch, past the gate it held
    on an earlier driver's commits. Not on the annotation either. With nothing left to read,
    the index is fresh as it is."""
    app = c.ctx.apps.get(c.revision)
    if app is None or app.deleting or not app.running:
        return PromotionHold(reasons.JOB_STARTING, "not promoted until its job runs again")
    lag, started = c.draft.lags.get(c.revision), app.started_at
    position = c.ctx.position_of(c.revision)
    if (lag is not None and lag.messages == 0) or started is None or (
            position is not None and position.committed_at is not None
            and position.committed_at >= started + TIMESTAMP_RESOLUTION):
        return None
    return PromotionHold(reasons.JOB_STARTING, "not promoted until its job's new driver "
                                               "commits a batch")


def history_incomplete(c: Candidate) -> PromotionHold | None:
    """Its index lacks history readers have (core.log.history): never promoted under
    `source.history: complete`, not on the annotation either."""
    if c.ctx.spec.source.history != "complete" or not readings.shortfall_of(
            c.ctx, c.draft, c.revision):
        return None
    return PromotionHold(reasons.HISTORY_INCOMPLETE,
                         "not promoted: its index lacks history readers have (see Degraded)")


def below_min_rows(c: Candidate) -> PromotionHold | None:
    """A view's first revision whose index holds fewer rows than cutover.minRows (the sink's
    cheap count, read with every observation) is not served."""
    wanted, sink = c.ctx.spec.cutover.min_rows, c.ctx.sink
    if wanted is None or c.draft.active is not None or sink is None:
        return None
    rows = sink.index_rows.get(c.ctx.index(c.revision))
    if rows is not None and rows >= wanted:
        return None
    held = "no counted rows yet" if rows is None else f"{rows} rows"
    return PromotionHold(reasons.BELOW_MIN_ROWS, f"not served: its index holds {held}, fewer "
                                                 f"than cutover.minRows {wanted}")


def checks_not_passed(c: Candidate) -> PromotionHold | None:
    """Its cutover checks fail or have not run since the gate held: not promoted, not even
    on the annotation."""
    if not c.stable or checks_pass(c.ctx, c.record):
        return None
    return PromotionHold(reasons.CHECKING,
                         f"cutover checks: {checks_column(c.ctx.spec, c.record)}")


def not_approved(c: Candidate) -> PromotionHold | None:
    """Manual cutover: the promote annotation does not name it (a first revision needs none)."""
    ctx = c.ctx
    if (not c.stable or c.draft.active is None or ctx.spec.cutover.mode == "auto"
            or ctx.promote_to == c.revision):
        return None
    return PromotionHold(reasons.AWAITING_PROMOTION,
                         f"annotate {PROMOTE_ANNOTATION}={c.revision} to switch readers")


def sink_refuses(c: Candidate) -> PromotionHold | None:
    """The sink would refuse the switch or break a dependent of the alias; told once."""
    if not c.switchable:
        return None
    assert c.ctx.sink is not None
    blocked = switch_guard.blocker(c.ctx.sink, c.ctx.index(c.revision))
    if blocked is None:
        return None
    told = switch_guard.announcement(blocked, c.revision, c.ctx.obs.status)
    return PromotionHold(blocked.reason, blocker=blocked,
                         event=(blocked.reason, told) if told else None)


def behind_active(c: Candidate) -> PromotionHold | None:
    """The sink deferred the last switch to it: it stayed behind the serving index, and
    readers must never go back in time (core.cutover.monotonic); shown for a pass, then
    retried."""
    deferred = c.ctx.obs.switch_deferred
    if not c.switchable or deferred is None or deferred[0] != c.revision:
        return None
    return PromotionHold(reasons.BEHIND_ACTIVE, "not switched, so that readers never go back "
                                                f"in time: {deferred[1]}")


HOLDS: tuple[HoldRule, ...] = (
    replaying, not_kept_fresh, history_incomplete, below_min_rows, checks_not_passed,
    not_approved, sink_refuses, behind_active)
"""In order: what no annotation overrides first, then approval, then the sink's word."""


def first_hold(c: Candidate) -> PromotionHold | None:
    for rule in HOLDS:
        hold = rule(c)
        if hold is not None:
            return hold
    return None


def checks_pass(ctx: Context, record: RevisionStatus) -> bool:
    """No checks, or a passing run of the spec's checks made while the gate held."""
    if checks.checks_of(ctx.spec) is None:
        return True
    run = checks.current_run(ctx.spec, record.checks, record.caught_up_since)
    return ctx.check_refusal is None and run is not None and run.passed
