"""Upkeep a pass plans beside its effects: the cutover checks' runs on the operator's check
runner, and the sink ledger's pruning. Neither is in the intent (core.actions.UPKEEP)."""

from __future__ import annotations

from derived_views.core.actions import ForgetChecks, PruneLedger, SubmitChecks, TakeChecks
from derived_views.core.planner.context import Context
from derived_views.core.planner.draft import Draft


def check_runs(ctx: Context, draft: Draft) -> None:
    """Take the finished run that speaks for the candidate (Context.checks_taken); else
    submit the due checks unless a run of the view is in flight (or the sink could not be
    observed this pass); else forget whatever the runner holds for the view."""
    held = ctx.obs.checks
    if ctx.checks_taken is not None:
        draft.upkeep.append(TakeChecks(ctx.checks_taken.request.revision, ctx.checks_taken.run))
    elif ctx.checks_due is not None:
        if not held.in_flight and ctx.sink is not None:
            draft.upkeep.append(SubmitChecks(ctx.checks_due, ctx.now))
    elif held.finished is not None or held.in_flight:
        draft.upkeep.append(ForgetChecks())


def plan_ledger_prune(ctx: Context, draft: Draft) -> None:
    """Every pass that observed the sink prunes its ledger (the session knows what it read)."""
    if ctx.sink is not None:
        draft.upkeep.append(PruneLedger())
