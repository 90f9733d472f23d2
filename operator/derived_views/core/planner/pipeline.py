"""One planning pass: build the context, pick the case, run its phases in order, assemble.

The case decides which phases run, in the order listed in PHASES; each phase is a
function of (context, draft) that reads the context and writes the draft. The assembler
then builds the status and the actions from both (core.planner.assemble).
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Callable

from derived_views.api.constants import FINALIZER
from derived_views.api.spec import DerivedViewSpec
from derived_views.core.actions import Action
from derived_views.core.observed import Observed
from derived_views.core.planner import context
from derived_views.core.planner.assemble import assemble
from derived_views.core.planner.context import Context
from derived_views.core.planner.draft import Draft
from derived_views.core.planner.phases import candidate as phases_candidate
from derived_views.core.planner.phases import cutover as phases_cutover
from derived_views.core.planner.phases import deleting as phases_deleting
from derived_views.core.planner.phases import served as phases_served
from derived_views.core.planner.phases import start as phases_start
from derived_views.core.planner.phases import upkeep as phases_upkeep

PlanPhase = Callable[[Context, Draft], None]


class Case(enum.Enum):
    RELEASED = "released"
    """Deleted, and no finalizer of ours holds the object: nothing to do."""
    DELETING = "deleting"
    CLAIMED = "claimed"
    """Another view owns the alias of this sink table: touch nothing of the sink's."""
    FOREIGN_INDEX = "foreign-index"
    """The desired or active index is another view's: the view stalls."""
    PAUSED = "paused"
    """Observe and keep records; no effects, no events."""
    NORMAL = "normal"


def case_of(ctx: Context) -> Case:
    """The first that holds, in this order (deleting overrides a pause)."""
    if ctx.view.deletion_timestamp is not None:
        return Case.DELETING if FINALIZER in ctx.view.finalizers else Case.RELEASED
    if ctx.claimed_by is not None:
        return Case.CLAIMED
    if ctx.owned_refusal is not None:
        return Case.FOREIGN_INDEX
    return Case.PAUSED if ctx.paused else Case.NORMAL


_UPKEEP: tuple[PlanPhase, ...] = (phases_upkeep.check_runs, phases_upkeep.plan_ledger_prune)

_KEEP_GOING: tuple[PlanPhase, ...] = (
    phases_candidate.progress_desired,
    phases_served.maintain_active,
    phases_served.retire_and_tear_down,
    phases_served.prune_records,
    *_UPKEEP,
)

PHASES: dict[Case, tuple[PlanPhase, ...]] = {
    Case.RELEASED: (),
    Case.DELETING: (phases_deleting.delete, phases_upkeep.check_runs),
    Case.CLAIMED: (phases_served.stop_all_jobs, *_UPKEEP),
    Case.FOREIGN_INDEX: (phases_served.stop_jobs_on_foreign_indexes, *_UPKEEP),
    Case.PAUSED: (phases_cutover.resume_cutover, *_KEEP_GOING),
    Case.NORMAL: (
        phases_cutover.resume_cutover,
        phases_start.ensure_finalizer,
        phases_start.hold_sink_secret,
        phases_start.supersede_others,
        phases_start.start_desired,
        phases_candidate.rebuild_lost_candidate,
        phases_candidate.settle_stage,
        phases_candidate.apply_job_settings,
        *_KEEP_GOING,
    ),
}


def run(spec: DerivedViewSpec, observed: Observed, now: dt.datetime) -> list[Action]:
    """The actions of one pass (`now` in UTC)."""
    ctx = context.build(spec, observed, now)
    case = case_of(ctx)
    if case is Case.RELEASED:
        return []  # nothing of ours holds the object
    draft = Draft.start(ctx)
    for phase in PHASES[case]:
        phase(ctx, draft)
    return assemble(ctx, draft, deleting=case is Case.DELETING)
