"""Deleting the view: stop its jobs, then drop or keep the sink's tables (deletionPolicy),
release held Secrets and the finalizer, or wait while others' objects depend on the tables."""

from __future__ import annotations

from derived_views.api.constants import FINALIZER
from derived_views.core import conditions as cond
from derived_views.core import deletion, naming, reasons
from derived_views.core.actions import DropAlias, ReleaseSecret, RemoveFinalizer
from derived_views.core.planner import announce, effects
from derived_views.core.planner.announce import last_written
from derived_views.core.planner.context import Context
from derived_views.core.planner.draft import Draft
from derived_views.core.planner.records import is_torn_down
from derived_views.core.times import seconds_between


def delete(ctx: Context, draft: Draft) -> None:
    """Stop the jobs; then drop or keep the sink's tables as deletionPolicy says, release the
    held Secrets and remove the finalizer (or say why the deletion waits)."""
    for revision in sorted(ctx.apps):
        effects.delete_app(ctx, draft, revision)
    done = False
    assert ctx.view.deletion_timestamp is not None
    waited = seconds_between(ctx.view.deletion_timestamp, ctx.now)
    grace_over = waited >= ctx.settings.sinks.deletion_grace_seconds
    if ctx.spec.deletion_policy == "Retain":
        done = True
        message = (f"Stopped the view's jobs; kept {ctx.qualified_alias} and its "
                   "indexes (deletionPolicy Retain).")
    elif ctx.claimed_by is not None:
        done = not ctx.apps
        message = (f"Stopped the view's jobs; left {ctx.qualified_alias} and its "
                   f"indexes to {ctx.claimed_by.describe()}, which owns them.")
    elif ctx.sink is not None and ctx.sink.drop_blockers:
        done, message = _deletion_blocked(ctx, draft, ctx.sink.drop_blockers, grace_over)
    elif ctx.sink is not None:
        if not ctx.apps:
            if ctx.sink.alias_target is not None:
                draft.drop_aliases.append(DropAlias(ctx.schema, ctx.alias))
            for index in sorted(ctx.sink.indexes - set(ctx.foreign)):
                owner = naming.index_revision(ctx.alias, index)
                if owner is not None:
                    draft.drops.append(effects.drop_of(ctx, index, owner))
            done = True
        message = (f"Stopped the view's jobs and dropped {ctx.qualified_alias} and "
                   f"{len(ctx.sink.indexes - set(ctx.foreign))} index(es) "
                   "(deletionPolicy Delete)"
                   + (f"; left {', '.join(sorted(ctx.foreign))} to the view(s) that own "
                      "them" if ctx.foreign else "") + ".")
    else:
        reason, detail = ctx.obs.sink_problem or (reasons.SINK_UNREACHABLE, "sink unreachable")
        # A Secret that is gone or unusable does not come back by waiting; a database that
        # does not answer may (a restart): it gets the grace period.
        done = reason != reasons.SINK_UNREACHABLE or grace_over
        message = "Stopped the view's jobs."
        if done:
            kept = [r.index for r in draft.records.values() if not is_torn_down(r)]
            draft.event(reasons.LEFT_BEHIND,
                        f"Released the view without dropping its alias and indexes "
                        f"(deletionPolicy Delete): {detail}"
                        + (f" for {waited}s" if reason == reasons.SINK_UNREACHABLE else "") + "; "
                        + deletion.left_behind(ctx.spec.sink.kind, ctx.schema, ctx.alias, kept,
                                               ctx.settings.sinks.ledger_table) + ".", warning=True)
    if done:
        # also what the spec would hold: a status that lost its record must not leave a
        # Secret held for good (the shell keeps a hold another view still records)
        for held in sorted(set(draft.held_secrets) | set(ctx.secrets_for_cleanup())):
            draft.secret_holds.append(ReleaseSecret(held))
        draft.event(reasons.DELETED, message)
        draft.finalizers_removed.append(RemoveFinalizer(FINALIZER))


def _deletion_blocked(ctx: Context, draft: Draft, blockers: tuple[str, ...],
                     grace_over: bool) -> tuple[bool, str]:
    """Others' views (functions, ...) read the alias or an index: DROP ... CASCADE would
    drop them too, silently and for good, so nothing is dropped. The deletion waits the
    grace period for someone to drop or re-point them, then releases the view and leaves
    the tables, saying which."""
    names = deletion.dependents_text(blockers)
    verb = "depends" if len(set(blockers)) == 1 else "depend"
    if ctx.apps:
        return False, ""
    if grace_over:
        draft.event(reasons.LEFT_BEHIND,
                    f"Released the view without dropping its alias and indexes "
                    f"(deletionPolicy Delete): {names} {verb} on them; "
                    + deletion.left_behind(ctx.spec.sink.kind, ctx.schema, ctx.alias,
                                           ctx.sink.indexes
                                           if ctx.sink else (), ctx.settings.sinks.ledger_table)
                    + ".", warning=True)
        return True, "Stopped the view's jobs."
    draft.deletion_problem = cond.Verdict(
        "True", reasons.DELETION_BLOCKED,
        f"{names} {verb} on {ctx.qualified_alias} or its indexes: drop or re-point "
        f"them (nothing is dropped with CASCADE); after "
        f"{ctx.settings.sinks.deletion_grace_seconds}s from the deletion the view is released "
        "and its alias and indexes are left in place")
    announce.emit_on_change(draft, last_written(ctx, cond.STALLED, "reason"),
                       (reasons.DELETION_BLOCKED,), reasons.DELETION_BLOCKED,
                       f"Not dropping {ctx.qualified_alias} and its indexes: "
                       f"{draft.deletion_problem.message}.", warning=True)
    return False, ""
