"""The building candidate: its job, failure, deadline, checks, and a rebuild when its index
lost what its ledger claims; its job's stage; restarts for changed job settings or stage."""

from __future__ import annotations

from derived_views.api.status import JobStage, Phase
from derived_views.core import reasons
from derived_views.core.cutover import checks
from derived_views.core.cutover.deadlines import deadline_verdict
from derived_views.core.job import stages
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


def settle_stage(ctx: Context, draft: Draft) -> None:
    """The stage of the building revision's job (core.job.stages): decided from its backlog
    as its first job is about to be created; turned steady once its replay is in its index
    (apply_job_settings then restarts the job from its checkpoint, before any switch)."""
    revision = ctx.desired
    record = draft.records.get(revision)
    if revision == draft.active or record is None or record.phase not in BUILDING:
        return
    if stages.replay_done(record):
        draft.set(revision, stage=JobStage.Steady)
    elif record.stage is None and revision not in ctx.apps:
        lag = readings.lag_of(ctx, draft, revision)
        stage, executors = stages.stage_at_start(
            None if lag is None else lag.messages, record.hydrated_at is not None,
            ctx.spec.spark.executor.instances, ctx.settings.spark)
        if stage is not None:
            draft.set(revision, stage=stage, replay_executors=executors)


def apply_job_settings(ctx: Context, draft: Draft) -> None:
    """Restart running jobs whose job settings or stage changed, from their checkpoints: no
    replay. Not while the schema registry cannot be asked: the stopped job could not start
    again."""
    if ctx.registry_problem is not None:
        return
    trigger_seconds = ctx.settings.spark.trigger_of(ctx.spec.cutover)
    # the active first, then the candidate: a plan's actions come in a fixed order
    for revision in dict.fromkeys(r for r in (draft.active, ctx.desired) if r is not None):
        record, app = draft.records.get(revision), ctx.apps.get(revision)
        if (record is None or app is None or app.deleting or app.stopped
                or not app.job_settings
                or not (record.phase in BUILDING or revision == draft.active)):
            continue
        size = stages.size_of(ctx.spec, record)
        if app.job_settings == job_settings_of(ctx.spec, trigger_seconds, size.executors):
            continue
        effects.delete_app(ctx, draft, revision)
        if app.stage == JobStage.Replay and size.stage is JobStage.Steady:
            draft.event(reasons.STEADY_STAGE_STARTED,
                        f"Restarted the job of revision {revision} from its checkpoint in its "
                        f"steady stage ({stages.executors_said(ctx.spec.spark.executor.instances)}"
                        ", spec.spark.executor): its index holds the backlog it replayed; "
                        "readers switch only after.")
        else:
            draft.event(reasons.JOB_RESTARTED, f"Restarted the job of revision {revision} from "
                                               "its checkpoint to apply changed job settings "
                                               "(spec.spark, the Kafka connection or the "
                                               "micro-batch interval).")
