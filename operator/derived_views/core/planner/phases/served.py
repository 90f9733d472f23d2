"""The served revision and the rest: keep the active job and the alias right, retire and
tear down replaced revisions, prune old records; stop jobs the view must not run."""

from __future__ import annotations

from derived_views.api.status import Phase
from derived_views.core import reasons
from derived_views.core.actions import SwitchAlias
from derived_views.core.job.job_state import judge_job
from derived_views.core.planner import effects, readings
from derived_views.core.planner.context import Context
from derived_views.core.planner.draft import Draft
from derived_views.core.planner.records import BUILDING, FINISHED, clip_message, is_torn_down


def maintain_active(ctx: Context, draft: Draft) -> None:
    """Keep the served index following the log, and the alias on it."""
    revision = draft.active
    if revision is None:
        return
    readings.refresh(ctx, draft, revision)
    record = draft.records[revision]
    if ctx.sink is not None and not draft.switches and not ctx.paused:
        target = ctx.sink.alias_target
        if (target != record.index and record.index in ctx.sink.indexes
                and record.index not in ctx.foreign and readings.lost_cause(ctx, revision) is None):
            draft.switches.append(SwitchAlias(ctx.schema, ctx.alias, record.index, target))
            draft.event(reasons.ALIAS_REPAIRED, f"Pointed {ctx.qualified_alias} back at index "
                                         f"{record.index} (it selected from "
                                         f"{target or 'nothing'}).", warning=True)
    app = ctx.apps.get(revision)
    if app is not None and app.deleting:
        return
    failed = record.reason in (reasons.JOB_FAILED, reasons.JOB_COMPLETED)
    if failed and ctx.paused:
        return
    if failed and ctx.retry_requested(record):
        effects.delete_app(ctx, draft, revision)
        draft.set(revision, reason=reasons.PROMOTED, message=None, retry_token=ctx.retry_token,
                  generation=ctx.view.generation, job_state=None, execution_attempts=None)
        draft.event(reasons.RETRY_STARTED, f"Restarted the job of active revision {revision} from "
                                    "its checkpoint.")
        if app is None:
            effects.create_app(ctx, draft, revision)
        return
    if app is None:
        if not failed:
            effects.create_app(ctx, draft, revision)
        return
    if app.stopped and not failed:
        ended = judge_job(app)
        reason, detail = ended.reason, ended.message
        draft.set(revision, reason=reason, message=clip_message(detail),
                  retry_token=ctx.retry_token, generation=ctx.view.generation)
        draft.event(reason, f"The job of active revision {revision} stopped ({app.state}): "
                            f"{detail}; the index no longer follows the log.", warning=True)


def retire_and_tear_down(ctx: Context, draft: Draft) -> None:
    for revision, record in list(draft.records.items()):
        if revision == draft.active or (revision == ctx.desired
                                        and record.phase in BUILDING):
            continue
        if record.phase == Phase.Retiring and readings.following(ctx, draft, revision):
            track_follower(ctx, draft, revision)
            continue
        if record.phase == Phase.Retiring:
            if record.follow_until is not None:
                draft.set(revision, follow_until=None, caught_up_since=None, lag=None,
                          job_state=None, execution_attempts=None)
            effects.delete_app(ctx, draft, revision)
            due = record.retire_after is None or record.retire_after <= ctx.now
            if not due or ctx.sink is None or revision in ctx.apps:
                continue
            if ctx.index_exists(revision) and not effects.queue_drop(ctx, draft, revision):
                continue  # the alias still selects from it: not yet
            draft.set(revision, phase=Phase.Retired, reason=reasons.RETIRED,
                      message="index dropped after the retention period", content=None)
            draft.event(reasons.RETIRED, f"Dropped index {record.index} of revision {revision} "
                                   "after its retention period.")
        elif is_torn_down(record):
            effects.delete_app(ctx, draft, revision)
            if revision not in ctx.apps:
                effects.queue_drop(ctx, draft, revision)
    for revision in sorted(ctx.apps):
        if revision not in draft.records and revision != ctx.desired:
            # an orphan of this view (e.g. a pruned record)
            effects.delete_app(ctx, draft, revision)


def track_follower(ctx: Context, draft: Draft, revision: str) -> None:
    """A following revision's lag and the start of its run within the gate, so that a
    rollback finds it already stable."""
    record = draft.records[revision]
    app = ctx.apps.get(revision)
    lag = readings.lag_of(ctx, draft, revision)
    gate = readings.gate_holds(ctx, draft, revision, lag, app is not None and app.running)
    draft.set(revision, lag=lag, job_state=(app.state or None) if app is not None else None,
              caught_up_since=(record.caught_up_since or ctx.now) if gate else None)


def prune_records(ctx: Context, draft: Draft) -> None:
    """Keep the newest `history_limit` finished records; remember the builds of the rest."""
    finished = [r for r in draft.records.values()
                if r.phase in FINISHED and r.revision not in (ctx.desired, draft.active)
                and is_torn_down(r)]
    finished.sort(key=lambda r: (r.since, r.revision), reverse=True)
    for record in finished[ctx.settings.history_limit:]:
        gone = (record.revision not in ctx.apps and ctx.sink is not None
                and ctx.index(record.revision) not in ctx.sink.indexes)
        if gone:
            previous = draft.spent_builds.get(record.revision, -1)
            draft.spent_builds[record.revision] = max(previous, record.build)
            del draft.records[record.revision]


def stop_all_jobs(ctx: Context, draft: Draft) -> None:
    """Another view owns the alias of this sink table: the jobs would write into its tables."""
    for revision in sorted(ctx.apps):
        effects.delete_app(ctx, draft, revision)


def stop_jobs_on_foreign_indexes(ctx: Context, draft: Draft) -> None:
    """The desired or active index is another view's: its job refuses it, so do not keep
    restarting it."""
    for revision in sorted(ctx.apps):
        if ctx.index(revision) in ctx.foreign:
            effects.delete_app(ctx, draft, revision)
