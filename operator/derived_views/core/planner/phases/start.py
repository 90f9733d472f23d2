"""Starting the spec's revision: finalizer and held Secrets, superseding older candidates,
and a new build, a resume, a rebuild or a rollback of the desired revision."""

from __future__ import annotations

from typing import Any

from derived_views.api.constants import FINALIZER
from derived_views.api.status import Phase, RevisionStatus
from derived_views.core import naming, reasons
from derived_views.core.actions import AddFinalizer, HoldSecret, ReleaseSecret
from derived_views.core.planner import effects, readings
from derived_views.core.planner.context import Context
from derived_views.core.planner.draft import Draft
from derived_views.core.planner.records import BUILDING, NEW_BUILD, is_torn_down
from derived_views.core.revision import content_of


def ensure_finalizer(ctx: Context, draft: Draft) -> None:
    if FINALIZER not in ctx.view.finalizers:
        draft.finalizers_added.append(AddFinalizer(FINALIZER))


def hold_sink_secret(ctx: Context, draft: Draft) -> None:
    """With deletionPolicy Delete, hold the sink Secret (a finalizer) so the cleanup can
    still connect while a namespace deletion removes everything; release one no longer
    needed (policy Retain, another secretRef)."""
    if ctx.sink is None:
        return  # the Secret could not be read (or the database not reached): not now
    held, wanted = set(draft.held_secrets), set(ctx.secrets_for_cleanup())
    for name in sorted(held - wanted):
        draft.secret_holds.append(ReleaseSecret(name))
    for name in sorted(wanted - held):
        draft.secret_holds.append(HoldSecret(name))
    draft.held_secrets = sorted(wanted)


def supersede_others(ctx: Context, draft: Draft) -> None:
    for revision, record in list(draft.records.items()):
        if revision in (ctx.desired, draft.active):
            continue
        if record.phase in BUILDING or (record.phase == Phase.Failed
                                        and not is_torn_down(record)):
            draft.set(revision, phase=Phase.Superseded, reason=reasons.SUPERSEDED,
                      message=f"superseded by revision {ctx.desired} before cutover",
                      caught_up_since=None, lag=None, content=None, job_state=None,
                      execution_attempts=None)
            draft.event(reasons.SUPERSEDED, f"Superseded candidate revision {revision} by "
                                      f"{ctx.desired} before cutover.")


def start_desired(ctx: Context, draft: Draft) -> None:
    """Make sure the spec's revision has a record that is building (or stays Failed)."""
    revision = ctx.desired
    if (revision == draft.active or ctx.checkpoint_problem is not None
            or ctx.spec_refusal is not None or ctx.policy_refusal is not None
            or ctx.reader_hold is not None):
        return  # (a revision keeps the checkpoint location it starts with: not a bad one,
        # nor one the policy refuses; its content keeps the reader schema it starts with)
    record = draft.records.get(revision)
    if (record is not None and record.phase == Phase.Retiring
            and readings.following(ctx, draft, revision)):
        switch_back(ctx, draft, revision)  # no job starts: the registry need not answer
    elif ctx.registry_problem is not None:
        return  # every other start creates a job, which would fail as it starts
    elif record is None:
        start_new(ctx, draft, revision)
    elif record.phase == Phase.Retiring:
        restart(ctx, draft, revision, rollback=True)
    elif record.phase in (Phase.Superseded, Phase.Retired) or (
            record.phase == Phase.Failed and ctx.retry_requested(record)):
        restart(ctx, draft, revision, rollback=False)
    warn_unregistered(ctx, draft, revision)


def warn_unregistered(ctx: Context, draft: Draft, revision: str) -> None:
    """A Warning Event when the revision's job starts while a topic has no schema under its
    value subject. Not a hold: the job learns each writer's schema by the id its records
    carry, so an empty topic, or producers with another naming strategy, read fine; but a
    topic of JSON records, or a misspelt registry, would make every record a bad one."""
    registry, record = ctx.obs.registry, draft.records.get(revision)
    if (registry is None or not registry.unregistered or record is None
            or record.phase != Phase.Pending or record.started_at != ctx.now):
        return
    subjects = ", ".join(sorted(registry.unregistered))
    draft.event(reasons.SUBJECT_NOT_FOUND,
                f"No schema is registered under {subjects} in the schema registry at "
                f"{registry.where}: revision {revision} starts anyway, and its job fetches each "
                "writer's schema by the id its records carry; if the producers register under "
                "<topic>-value, check spec.source.topics and the registry Secret's url.",
                warning=True)


def start_new(ctx: Context, draft: Draft, revision: str) -> None:
    build = (draft.spent_builds[revision] + 1 if revision in draft.spent_builds
             else draft.spent_builds_floor)
    exists = ctx.index_exists(revision)
    if build > 0 and exists is not False:
        # A rebuild needs a fresh index; an unknown or stale one must go first.
        effects.queue_drop(ctx, draft, revision)
        return
    if exists is False and ctx.position_of(revision) is not None:
        # ledger rows of a lost table: the new job would refuse them
        effects.purge(ctx, draft, revision)
        return
    draft.spent_builds.pop(revision, None)  # the record carries the build from now on
    draft.records[revision] = RevisionStatus(
        revision=revision, index=ctx.index(revision), phase=Phase.Pending, since=ctx.now,
        spark_application=naming.spark_application_name(ctx.view.name, revision),
        checkpoint_location=ctx.checkpoint(revision, build),
        content=content_of(ctx.spec, ctx.reader_schemas),
        build=build, started_at=ctx.now, generation=ctx.view.generation,
        retry_token=ctx.retry_token, reason=reasons.BACKFILL_STARTED,
        source_partitions=readings.partitions_now(ctx, draft, revision))
    if exists:
        draft.event(reasons.BACKFILL_STARTED, f"Resumed revision {revision} into its existing index "
                                       f"{ctx.index(revision)} from its checkpoint.")
    else:
        draft.event(reasons.BACKFILL_STARTED, f"Started replaying revision {revision} from offset 0 "
                                       f"into index {ctx.index(revision)}.")


def switch_back(ctx: Context, draft: Draft, revision: str) -> None:
    """Roll back to a revision whose job never stopped following the log: it is a
    candidate again at once, its gate record intact, so it is promoted as soon as the
    gate (and any checks) hold, without a job start or a replay."""
    draft.set(revision, phase=Phase.Backfilling, reason=reasons.ROLLBACK_STARTED,
              message="its job kept following the log; no restart, no replay",
              started_at=ctx.now, generation=ctx.view.generation,
              retry_token=ctx.retry_token, content=content_of(ctx.spec, ctx.reader_schemas),
              retire_after=None, follow_until=None)
    draft.event(reasons.ROLLBACK_STARTED, f"Rolling back to revision {revision}, whose job kept "
                                   "following the log.")


def restart(ctx: Context, draft: Draft, revision: str, *, rollback: bool) -> None:
    """Resume a known revision from its checkpoint if its index is still there, else
    rebuild it from offset 0 with a fresh checkpoint."""
    record = draft.records[revision]
    exists = ctx.index_exists(revision)
    if exists is None:
        return  # cannot tell resume from rebuild without the sink
    app = ctx.apps.get(revision)
    common: dict[str, Any] = dict(
        phase=Phase.Pending, started_at=ctx.now, generation=ctx.view.generation,
        retry_token=ctx.retry_token, content=content_of(ctx.spec, ctx.reader_schemas),
        caught_up_since=None, estimate=None,  # a resume is estimated afresh
        retire_after=None, lag=None, job_state=None, execution_attempts=None)
    if exists:
        if app is not None and app.stopped:
            effects.delete_app(ctx, draft, revision)  # a stopped job is resubmitted as a new object
        if rollback:
            draft.set(revision, reason=reasons.ROLLBACK_STARTED,
                      message="resuming from its checkpoint; no replay from offset 0",
                      **common)
            draft.event(reasons.ROLLBACK_STARTED, f"Resumed retained revision {revision} from its "
                                           "checkpoint to roll back.")
        else:
            draft.set(revision, reason=reasons.RESUMED, message="resuming from its checkpoint",
                      **common)
            draft.event(reasons.RESUMED, f"Resumed revision {revision} from its checkpoint.")
        return
    if app is not None:
        effects.delete_app(ctx, draft, revision)  # it runs on the spent checkpoint
    if ctx.position_of(revision) is not None:
        # Its table is gone but its ledger rows are not: the new job would refuse to
        # start on them. Drop them first; rebuild on a later pass.
        if app is None and revision not in ctx.obs.driver_pods:
            effects.purge(ctx, draft, revision)
        return
    build = record.build + 1
    draft.set(revision, reason=reasons.BACKFILL_STARTED, message="rebuilding from offset 0",
              build=build, checkpoint_location=ctx.checkpoint(revision, build),
              source_partitions=readings.partitions_now(ctx, draft, revision),
              **(common | NEW_BUILD))
    draft.event(reasons.BACKFILL_STARTED, f"Started rebuilding revision {revision} from offset 0 "
                                   f"into index {ctx.index(revision)}.")
