"""The building candidate: its job, failure, deadline, checks, and a rebuild when its index
lost what its ledger claims; restarts for changed job settings."""

from __future__ import annotations

from derived_views.api.status import Phase
from derived_views.core import reasons
from derived_views.core.cutover import checks
from derived_views.core.cutover.deadlines import deadline_verdict
from derived_views.core.job.job_state import judge_job
from derived_views.core.planner import announce, effects, readings
from derived_views.core.planner.context import Context
from derived_views.core.planner.draft import Draft
from derived_views.core.planner.phases import cutover as phases_cutover
from derived_views.core.planner.records import BUILDING, NEW_BUILD, clip_message
from derived_views.core.revision import job_settings_of


def rebuild_lost_candidate(ctx: Context, draft: Draft) -> None:
    """A building candidate whose index lost batches its ledger claims is rebuilt from
    offset 0 (a new build, a fresh checkpoint), never promoted: stop its job, drop the
    table and ledger rows once the job is gone, then start again."""
    revision = ctx.desired
    record = draft.records.get(revision)
    if revision == draft.active or record is None or record.phase not in BUILDING:
        return
    cause = readings.lost_cause(ctx, revision)
    if cause is None:
        if record.reason == reasons.INDEX_LOST and revision in ctx.apps:
            draft.set(revision, reason=reasons.BACKFILL_STARTED)  # rebuilding; a new loss counts anew
        return
    if record.reason != reasons.INDEX_LOST:
        build = record.build + 1
        draft.set(revision, phase=Phase.Pending, reason=reasons.INDEX_LOST,
                  message=clip_message(f"{cause}; rebuilding from offset 0 (build {build}); it is "
                               "not promoted before the rebuild catches up"),
                  build=build, checkpoint_location=ctx.checkpoint(revision, build),
                  started_at=ctx.now, caught_up_since=None, lag=None, job_state=None,
                  execution_attempts=None,
                  source_partitions=readings.partitions_now(ctx, draft, revision), **NEW_BUILD)
        draft.event(reasons.INDEX_LOST, f"Rebuilding candidate revision {revision} from "
                                          f"offset 0: {cause}.", warning=True)
    effects.delete_app(ctx, draft, revision)
    draft.held_jobs.add(revision)
    if revision not in ctx.apps and revision not in ctx.obs.driver_pods:
        effects.purge(ctx, draft, revision)


def progress_desired(ctx: Context, draft: Draft) -> None:
    """Job, failure, deadline, lag gate and promotion of the spec's revision."""
    revision = ctx.desired
    record = draft.records.get(revision)
    if revision == draft.active or record is None or record.phase not in BUILDING:
        return
    app = ctx.apps.get(revision)
    replacing = any(d.revision == revision for d in draft.deletes)
    if not replacing and app is not None and not app.deleting and app.stopped:
        ended = judge_job(app)  # the driver's termination message when there is one
        reason, detail = ended.reason, ended.message
        draft.set(revision, phase=Phase.Failed, reason=reason, message=clip_message(detail),
                  caught_up_since=None, job_state=app.state,
                  execution_attempts=app.execution_attempts,
                  retry_token=ctx.retry_token, generation=ctx.view.generation)
        draft.event(reason, f"Stopped waiting for revision {revision}: its job ended "
                            f"({app.state}): {detail}", warning=True)
        return
    verdict = deadline_verdict(ctx.spec.cutover, record.started_at,
                               ctx.position_of(revision), readings.lag_of(ctx, draft, revision),
                               ctx.now)
    if not ctx.paused and verdict is not None:
        reason, message = verdict
        draft.set(revision, phase=Phase.Failed, reason=reason, message=message,
                  caught_up_since=None, lag=None, content=None, job_state=None,
                  execution_attempts=None, retry_token=ctx.retry_token,
                  generation=ctx.view.generation)
        effects.delete_app(ctx, draft, revision)
        draft.event(reason, f"Aborted candidate revision {revision}: {message}.", warning=True)
        return
    if app is None and not replacing and not readings.missing_topics_of(ctx, draft, revision):
        effects.create_app(ctx, draft, revision)
    readings.refresh(ctx, draft, revision)
    take_checks_run(ctx, draft, revision)
    phases_cutover.try_promote(ctx, draft, revision)


def take_checks_run(ctx: Context, draft: Draft, revision: str) -> None:
    """Record the finished run of the candidate's checks this pass takes (Context.checks_taken);
    one event when the outcome (or which checks fail) changes, not one per run."""
    taken = ctx.checks_taken
    if taken is None or taken.request.revision != revision:
        return
    record = draft.records[revision]
    run = taken.run
    before = checks.shown_run(ctx.spec, record.checks, record.caught_up_since,
                              record.started_at)
    draft.set(revision, checks=run)
    if run.passed:
        announce.emit_on_change(draft, before is not None and before.passed, True, reasons.CHECKS_PASSED,
                           f"Cutover checks of revision {revision}: {checks.checks_summary(run)}.")
        return
    reason, text = checks.failure_text(run)
    # by the failing checks, not their words: a sample's examples differ on every run
    told = None if before is None else [(r.name, r.outcome) for r in before.failing()]
    announce.emit_on_change(draft, told, [(r.name, r.outcome) for r in run.failing()], reason,
                       f"Revision {revision} is not promoted: {text}.", warning=True)


def apply_job_settings(ctx: Context, draft: Draft) -> None:
    """Restart running jobs whose job settings changed, from their checkpoints: no replay.
    Not while the schema registry cannot be asked: the stopped job could not start again."""
    if ctx.registry_problem is not None:
        return
    wanted = job_settings_of(ctx.spec, ctx.settings.spark.trigger_of(ctx.spec.cutover))
    # the active first, then the candidate: a plan's actions come in a fixed order
    for revision in dict.fromkeys(r for r in (draft.active, ctx.desired) if r is not None):
        record, app = draft.records.get(revision), ctx.apps.get(revision)
        if (record is None or app is None or app.deleting or app.stopped
                or not app.job_settings or app.job_settings == wanted
                or not (record.phase in BUILDING or revision == draft.active)):
            continue
        effects.delete_app(ctx, draft, revision)
        draft.event(reasons.JOB_RESTARTED, f"Restarted the job of revision {revision} from its "
                                    "checkpoint to apply changed job settings (spec.spark, "
                                    "the Kafka connection or the micro-batch interval).")
