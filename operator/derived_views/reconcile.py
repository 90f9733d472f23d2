"""observe -> plan -> act for one DerivedView: the imperative shell around the planner.

Status (with the plan's intent) is recorded before any action runs, so an
operator that dies mid-way replans from a fresh observation and resumes.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from derived_views import naming, spark_job
from derived_views.adapters import postgres_sink as pg
from derived_views.adapters.kafka_offsets import EndOffsetsCache, OffsetsUnavailable
from derived_views.adapters.kube import Kube, SecretMissing
from derived_views.planning import actions as A
from derived_views.planning.observed import Job, Observed, Progress
from derived_views.planning.plan import plan
from derived_views.resource.spec import DerivedViewSpec
from derived_views.resource.status import Condition, DerivedViewStatus
from derived_views.settings import Settings

log = logging.getLogger("derived_views")


@dataclass
class Deps:
    kube: Kube
    offsets: EndOffsetsCache
    settings: Settings
    template: str


def _invalid_spec_status(body: dict[str, Any], message: str, now: dt.datetime) -> dict[str, Any]:
    ts = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    gen = int(body["metadata"].get("generation", 0))
    conds = [Condition(type="Ready", status="False", reason="InvalidSpec", message=message,
                       lastTransitionTime=ts, observedGeneration=gen),
             Condition(type="Stalled", status="True", reason="InvalidSpec", message=message,
                       lastTransitionTime=ts, observedGeneration=gen)]
    return {"observedGeneration": gen, "conditions": [c.model_dump() for c in conds]}


def observe(body: dict[str, Any], spec: DerivedViewSpec, deps: Deps,
            conn: Any) -> Observed:
    meta = body["metadata"]
    ns, name = meta["namespace"], meta["name"]
    status = DerivedViewStatus.model_validate(body.get("status") or {})
    jobs: dict[str, Job] = {}
    for app in deps.kube.spark_applications(ns, name):
        rev = app["metadata"].get("labels", {}).get("derivedviews.io/revision")
        state = ((app.get("status") or {}).get("applicationState") or {})
        if rev:
            jobs[rev] = Job(name=app["metadata"]["name"], state=state.get("state", ""),
                            error=state.get("errorMessage", ""))
    schema, base = spec.sink.postgres.schema_, spec.sink.postgres.table
    known = {r.revision for r in status.revisions} | set(jobs)
    from derived_views.revision import revision_of

    known.add(revision_of(spec))
    indexes = pg.existing_tables(conn, schema, [naming.index_table(base, r) for r in known])
    positions = pg.ledger_positions(conn, schema, known)
    deps.offsets.register(spec.source.kafka.bootstrapServers, spec.source.topics)
    try:
        all_ends = deps.offsets.get(spec.source.kafka.bootstrapServers)
        ends: dict[tuple[str, int], int] | None = {
            tp: o for tp, o in all_ends.items() if tp[0] in spec.source.topics}
    except OffsetsUnavailable as exc:
        log.warning("%s/%s: end offsets unavailable: %s", ns, name, exc)
        ends = None
    return Observed(
        generation=int(meta.get("generation", 0)), status=status,
        annotations=dict(meta.get("annotations") or {}),
        deleting=bool(meta.get("deletionTimestamp")), jobs=jobs, indexes=frozenset(indexes),
        progress={r: Progress(p.end_offsets, p.committed_at) for r, p in positions.items()},
        topic_ends=ends, alias_target=pg.alias_target(conn, schema, base))


def reconcile(body: dict[str, Any], deps: Deps, now: dt.datetime) -> bool:
    """One pass for one view; returns True when the finalizer may be removed."""
    meta = body["metadata"]
    ns, name = meta["namespace"], meta["name"]
    try:
        spec = DerivedViewSpec.model_validate(body.get("spec") or {})
    except ValidationError as exc:
        message = "; ".join(f"spec.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
                            for e in exc.errors())
        deps.kube.patch_view_status(ns, name, _invalid_spec_status(body, message, now))
        return bool(meta.get("deletionTimestamp"))
    try:
        creds = pg.PgConnection.from_secret_data(
            deps.kube.secret_data(ns, spec.sink.postgres.secretRef.name))
    except (SecretMissing, ValueError) as exc:
        deps.kube.patch_view_status(ns, name, _invalid_spec_status(body, str(exc), now))
        return bool(meta.get("deletionTimestamp"))
    with creds.connect(autocommit=True) as conn:
        observed = observe(body, spec, deps, conn)
        result = plan(spec, observed, now)
        status = result.status.model_dump(mode="json", exclude_none=True)
        for cleared in ("active", "candidate", "intent"):
            status.setdefault(cleared, None)  # merge patch: null removes what is no longer true
        deps.kube.patch_view_status(ns, name, status)  # intent recorded before acting
        done = False
        view_ref = spark_job.ViewRef(namespace=ns, name=name, uid=meta["uid"])
        schema, base = spec.sink.postgres.schema_, spec.sink.postgres.table
        for action in result.actions:
            if isinstance(action, A.CreateSparkApplication):
                manifest = spark_job.render(deps.template, view_ref, spec, action.revision,
                                            deps.settings)
                deps.kube.create_spark_application(ns, manifest)
            elif isinstance(action, A.DeleteSparkApplication):
                job = observed.jobs.get(action.revision)
                deps.kube.delete_spark_application(
                    ns, job.name if job else naming.spark_application(name, action.revision))
            elif isinstance(action, A.SwitchAlias):
                pg.switch_alias(conn, schema, base, action.to_index, action.from_index)
            elif isinstance(action, A.DropIndex):
                pg.drop_index(conn, schema, action.index, action.revision)
            elif isinstance(action, A.DropAlias):
                pg.drop_alias(conn, schema, base)
            elif isinstance(action, A.EmitEvent):
                deps.kube.event(body, reason=action.reason, message=action.message,
                                type_=action.type)
            elif isinstance(action, A.RemoveFinalizer):
                done = True
        if status.get("intent"):
            deps.kube.patch_view_status(ns, name, {"intent": None})
    return done
