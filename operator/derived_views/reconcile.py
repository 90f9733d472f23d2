"""observe -> plan -> act for one DerivedView: the imperative shell around the planner.

The planner's first action is `RecordIntent`, patched into status before any
other effect, so an operator that dies mid-way replans from a fresh
observation and resumes.  Actions run in order; the first failure stops the
pass (the next pass replans).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from derived_views.adapters import checkpoints as ckpt
from derived_views.adapters import postgres_sink as pg
from derived_views.adapters.kafka_offsets import EndOffsetsCache, OffsetsUnavailable
from derived_views.adapters.kube import Kube, SecretMissing
from derived_views.api.spec import DerivedViewSpec
from derived_views.api.status import DerivedViewStatus
from derived_views.core import actions as A
from derived_views.core.config import OperatorConfig
from derived_views.core.observed import (
    Observed,
    SinkObserved,
    index_tables_to_observe,
    revisions_to_observe,
    spark_application_from_object,
    status_from_object,
    topics_to_observe,
    view_from_object,
)
from derived_views.core.plan import plan
from derived_views.metrics import Metrics

log = logging.getLogger("derived_views")


@dataclass
class Deps:
    kube: Kube
    offsets: EndOffsetsCache
    config: OperatorConfig
    metrics: Metrics = field(default_factory=Metrics)


@dataclass
class PassRecord:
    """What one pass did that metrics care about; filled in as it goes."""

    stage: str = "observe"
    index_rows: dict[str, int] = field(default_factory=dict)
    status: DerivedViewStatus | None = None
    switched: bool = False


def _invalid_spec_status(body: dict[str, Any], message: str, now: dt.datetime) -> dict[str, Any]:
    ts = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    gen = int(body["metadata"].get("generation", 0))
    return {"observedGeneration": gen, "conditions": [
        {"type": t, "status": s, "reason": "InvalidSpec", "message": message,
         "lastTransitionTime": ts, "observedGeneration": gen}
        for t, s in (("Ready", "False"), ("Stalled", "True"), ("Reconciling", "False"))]}


def _sink(spec: DerivedViewSpec, status: DerivedViewStatus, body: dict[str, Any], deps: Deps,
          record: PassRecord) -> tuple[Any, SinkObserved] | None:
    """Connect to the sink and observe it; None when it cannot be reached this time."""
    meta = body["metadata"]
    try:
        creds = pg.PgConnection.from_secret_data(
            deps.kube.secret_data(meta["namespace"], spec.sink.postgres.secret_ref.name))
        conn = creds.connect(autocommit=True)
    except (SecretMissing, ValueError, pg.SinkUnavailable) as exc:
        log.warning("%s/%s: sink unavailable: %s", meta["namespace"], meta["name"], exc)
        return None
    schema = spec.sink.postgres.db_schema
    indexes = pg.existing_tables(conn, schema, index_tables_to_observe(spec, status))
    record.index_rows = dict(indexes)
    ledger = pg.ledger_positions(conn, schema, revisions_to_observe(spec, status),
                                 ledger=deps.config.ledger_table)
    return conn, SinkObserved(
        indexes=frozenset(indexes),
        alias_target=pg.alias_target(conn, schema, spec.sink.postgres.table),
        ledger=ledger, alias_owner=pg.alias_owner(conn, schema, spec.sink.postgres.table))


def _end_offsets(spec: DerivedViewSpec, status: DerivedViewStatus, body: dict[str, Any],
                 deps: Deps) -> dict[tuple[str, int], int] | None:
    topics = topics_to_observe(spec, status)
    bootstrap = spec.source.kafka.bootstrap_servers
    deps.offsets.register(bootstrap, topics)
    try:
        return {tp: o for tp, o in deps.offsets.get(bootstrap).items() if tp[0] in topics}
    except OffsetsUnavailable as exc:
        log.warning("%s: end offsets unavailable: %s", body["metadata"]["name"], exc)
        return None


def reconcile(body: dict[str, Any], deps: Deps, now: dt.datetime) -> bool:
    """One pass for one view; returns True once the plan has released the view for deletion.

    Metrics record the pass (duration, failures by stage, the resulting gauges)
    around it; they never change its outcome.
    """
    meta = body["metadata"]
    ns, name = meta["namespace"], meta["name"]
    record = PassRecord()
    started = time.perf_counter()
    try:
        released = _reconcile(body, deps, now, record)
    except Exception:
        deps.metrics.reconcile_error(ns, name, record.stage)
        raise
    finally:
        deps.metrics.reconcile_duration(time.perf_counter() - started)
    if released:
        deps.metrics.forget_view(ns, name)
        return True
    status = record.status or status_from_object(body)
    deps.metrics.observe_view(ns, name, status, record.index_rows)
    if record.switched:
        deps.metrics.gate_to_switch(ns, name, status)
    return False


def _reconcile(body: dict[str, Any], deps: Deps, now: dt.datetime, record: PassRecord) -> bool:
    meta = body["metadata"]
    ns, name = meta["namespace"], meta["name"]
    try:
        spec = DerivedViewSpec.model_validate(body.get("spec") or {})
    except ValidationError as exc:
        message = "; ".join(f"spec.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
                            for e in exc.errors())
        deps.kube.patch_view_status(ns, name, _invalid_spec_status(body, message, now))
        return bool(meta.get("deletionTimestamp"))
    apps = {}
    for obj in deps.kube.spark_applications(ns, name):
        observed_app = spark_application_from_object(obj)
        if observed_app is not None:
            apps[observed_app.revision] = observed_app
    status = status_from_object(body)
    sink = _sink(spec, status, body, deps, record)
    conn = sink[0] if sink else None
    try:
        observed = Observed(view=view_from_object(body), status=status,
                            config=deps.config, spark_applications=apps,
                            sink=sink[1] if sink else None,
                            end_offsets=_end_offsets(spec, status, body, deps))
        record.stage = "plan"
        actions = plan(spec, observed, now)
        record.stage = "act"
        released = False
        for action in actions:
            released = _act(action, body, deps, conn, record) or released
        return released
    finally:
        if conn is not None:
            conn.close()


def _act(action: A.Action, body: dict[str, Any], deps: Deps, conn: Any,
         record: PassRecord) -> bool:
    ns, name = body["metadata"]["namespace"], body["metadata"]["name"]
    if isinstance(action, (A.RecordIntent, A.UpdateStatus)):
        deps.kube.patch_view_status(ns, name, action.patch)
        if isinstance(action, A.UpdateStatus):
            record.status = action.status
    elif isinstance(action, A.AddFinalizer):
        deps.kube.add_finalizer(ns, name, action.finalizer)
    elif isinstance(action, A.RemoveFinalizer):
        deps.kube.remove_finalizer(ns, name, action.finalizer)
        return True
    elif isinstance(action, A.CreateSparkApplication):
        deps.kube.create_spark_application(ns, action.manifest)
    elif isinstance(action, A.DeleteSparkApplication):
        deps.kube.delete_spark_application(ns, action.name)
    elif isinstance(action, A.SwitchAlias):
        started = time.perf_counter()
        pg.switch_alias(conn, action.schema, action.alias, action.to_index, action.from_index,
                        owner=f"{ns}/{name}")
        deps.metrics.cutover(ns, name, time.perf_counter() - started)
        record.switched = True
    elif isinstance(action, A.DropAlias):
        pg.drop_alias(conn, action.schema, action.alias)
    elif isinstance(action, A.DropIndex):
        pg.drop_index(conn, action.schema, action.index, action.revision,
                      ledger=deps.config.ledger_table)
        ckpt.delete_dropped_revision(deps.kube, deps.config, body, action.revision)
    elif isinstance(action, A.EmitEvent):
        deps.kube.event(body, reason=action.reason, message=action.message, type_=action.type)
    return False
