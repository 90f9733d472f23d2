"""The effects a phase asks for, queued on the draft once each. Each refuses what must not
happen: nothing while paused; no job the policy, a driver pod still there, another view's
index or a schema registry that cannot be asked forbids; no drop of the alias's target (now
or after this plan's switch) or of another view's index."""

from __future__ import annotations

from derived_views.core import reasons
from derived_views.core.actions import (
    CreateSparkApplication,
    DeleteSparkApplication,
    DropIndex,
    SecretCopy,
)
from derived_views.core.job import stages
from derived_views.core.job.checkpoints import dropped_revision_location
from derived_views.core.job.sparkapplication import (
    job_secrets,
    render_spark_application,
    secret_copies,
)
from derived_views.core.judges.source_schema import reader_text
from derived_views.core.judges.transform import check_spec
from derived_views.core.planner.context import Context
from derived_views.core.planner.draft import Draft
from derived_views.core.revision import reader_schemas_of, with_content


def delete_app(ctx: Context, draft: Draft, revision: str) -> None:
    app = ctx.apps.get(revision)
    if ctx.paused or app is None or app.deleting:
        return
    if all(d.name != app.name for d in draft.deletes):
        elsewhere = app.namespace if app.namespace not in ("", ctx.view.namespace) else ""
        draft.deletes.append(DeleteSparkApplication(revision, app.name, elsewhere))


def create_app(ctx: Context, draft: Draft, revision: str) -> None:
    if ctx.paused or revision in ctx.apps or any(c.revision == revision
                                                 for c in draft.creates):
        return
    if ctx.policy_refusal is not None or ctx.registry_problem is not None:
        return  # (a job whose registry cannot be asked would fail as it starts)
    if ctx.obs.job_namespace_problem is not None:
        return  # its job namespace is missing, or not the platform's for this namespace
    if revision in ctx.obs.driver_pods:
        return  # the previous job's driver pod is still there: a new one would be refused
    if revision in draft.held_jobs:
        return  # its lost index and ledger rows are dropped by this plan, after creates
    if ctx.index(revision) in ctx.foreign:
        return  # another view's index: the job would refuse it (or write into it)
    record = draft.records[revision]
    if revision == ctx.desired:
        effective, known = ctx.spec, ctx.reader_schemas
    elif record.content is not None:
        effective = with_content(ctx.spec, record.content)
        known = reader_schemas_of(record.content)
    else:
        return  # a record from before contents were kept: nothing to render it from
    if effective.source.avro is not None and reader_text(effective.source, known) is None:
        return  # a reader schema pinned in the registry and not read (Context.reader_hold)
    refused = check_spec(effective, known) if revision != ctx.desired else None
    if refused is not None and refused.reason == reasons.POLICY_VIOLATION:
        return  # an older revision's SQL the policy now refuses: it does not run again
    manifest = render_spark_application(
        ctx.settings.spark.template, settings=ctx.settings, namespace=ctx.view.namespace,
        view=ctx.view.name, uid=ctx.view.uid, spec=effective, revision=revision,
        checkpoint_location=record.checkpoint_location, reader_schemas=known,
        size=stages.size_of(effective, record))
    copies: tuple[SecretCopy, ...] = ()
    if manifest["metadata"]["namespace"] != ctx.view.namespace:
        copies = secret_copies(job_secrets(effective, ctx.settings, record.checkpoint_location),
                               view=ctx.view.name, namespace=ctx.view.namespace, settings=ctx.settings)
    draft.creates.append(CreateSparkApplication(revision, manifest["metadata"]["name"],
                                                manifest, copies))


def queue_drop(ctx: Context, draft: Draft, revision: str) -> bool:
    """Queue the drop unless the alias selects from it (now or after this plan's switch)."""
    if ctx.paused or ctx.sink is None:
        return False
    index = ctx.index(revision)
    if index not in ctx.sink.indexes or index in ctx.foreign:
        return False
    if index == ctx.sink.alias_target or any(s.to_index == index for s in draft.switches):
        return False
    if all(d.index != index for d in draft.drops):
        draft.drops.append(drop_of(ctx, index, revision))
    return True


def drop_of(ctx: Context, index: str, revision: str) -> DropIndex:
    """The drop of a revision's index, with the view's UID (the adapter's ownership check)
    and the checkpoints to delete after it: where status recorded the revision's, else
    under the base in force now."""
    recorded = ((r.revision, r.checkpoint_location) for r in ctx.obs.status.revisions)
    return DropIndex(ctx.schema, index, revision, owner_uid=ctx.view.uid,
                     checkpoints=dropped_revision_location(
                         recorded, ctx.spec.spark.checkpoint_base, ctx.settings.checkpoints.base,
                         ctx.view.namespace, ctx.view.name, revision))


def purge(ctx: Context, draft: Draft, revision: str) -> None:
    """Drop the revision's index table (if any) with its ledger rows, and hold its job back
    this pass. Never the alias's target."""
    if ctx.paused or ctx.sink is None:
        return
    index = ctx.index(revision)
    if index == ctx.sink.alias_target or any(s.to_index == index for s in draft.switches):
        return
    if index in ctx.foreign:
        return  # another view's index and ledger rows
    draft.held_jobs.add(revision)
    if all(d.index != index for d in draft.drops):
        draft.drops.append(drop_of(ctx, index, revision))
