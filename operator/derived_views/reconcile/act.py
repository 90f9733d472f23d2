"""Act: carry a plan's actions out in order; the first failure raises and stops the pass (the
next pass replans). The upkeep (the check runner's runs, the ledger's pruning) is planned
like the rest (core.actions.UPKEEP)."""

from __future__ import annotations

import logging
import time
from typing import Any

from derived_views.adapters import checkpoints as ckpt
from derived_views.adapters.kube.client import EventRefused
from derived_views.adapters.sink import open_session
from derived_views.adapters.sink_contract import SinkSession, SwitchDeferred
from derived_views.api.constants import SECRET_FINALIZER, VIEW_LABEL, VIEW_NAMESPACE_LABEL
from derived_views.api.spec import DerivedViewSpec
from derived_views.core import actions as A
from derived_views.core import check_runs
from derived_views.core.cadence import ViewKey
from derived_views.core.cutover import checks
from derived_views.core.observed import IndexOwner, view_from_object
from derived_views.reconcile.check_runner import Found, Measure
from derived_views.reconcile.deps import Deps, PassRecord
from derived_views.reconcile.secrets import PassSecrets

log = logging.getLogger("derived_views")


def act(actions: list[A.Action], body: dict[str, Any], key: ViewKey, deps: Deps,
        sink: SinkSession | None, record: PassRecord, *, spec: DerivedViewSpec) -> bool:
    """Carry the plan out in order; the first failure raises and stops the pass (the next
    pass replans). True when an action released the view for deletion."""
    released = False
    for action in actions:
        if isinstance(action, A.UPKEEP):
            _upkeep(action, key, deps, sink, spec)
            continue
        try:
            released = _act(action, body, key, deps, sink, record) or released
        except SwitchDeferred as deferred:
            # Not a failure: the candidate is behind the serving index where the switch
            # happens (core.cutover.monotonic). Nothing after the switch may be written (the status
            # would say it happened); the next pass observes again and holds or switches.
            log.info("%s/%s: cutover deferred: %s", *key, deferred)
            if isinstance(action, A.SwitchAlias) and action.not_behind is not None:
                deps.deferrals.note(key, action.not_behind.candidate, str(deferred))
            break
    return released


def _upkeep(action: A.Upkeep, key: ViewKey, deps: Deps, sink: SinkSession | None,
            spec: DerivedViewSpec) -> None:
    ns, name = key
    if isinstance(action, A.SubmitChecks):
        deps.check_runner.submit(key, action.request, _measure(spec, ns, deps), action.at)
    elif isinstance(action, A.TakeChecks):
        run = action.run
        for failing in run.failing():
            deps.metrics.check_failed(ns, name, action.revision, failing.name)
        took = sum(r.seconds or 0.0 for r in run.results)
        log.info("%s/%s: cutover checks of revision %s: %s (%.3fs)", ns, name,
                 action.revision, checks.checks_summary(run), took)
        deps.check_runner.forget(key)
    elif isinstance(action, A.ForgetChecks):
        deps.check_runner.forget(key)
    else:
        if sink is None:  # the planner plans pruning only on an observed sink
            raise RuntimeError(f"{ns}/{name}: {A.describe(action)} planned without the sink")
        sink.prune_ledger()


def _measure(spec: DerivedViewSpec, namespace: str, deps: Deps) -> Measure:
    """How the check runner measures a run of this view: it reads the sink Secret and connects
    on its own (the pass's connection is given back when the pass ends), through the same
    tenancy check as the pass."""
    secret = spec.sink.secret_ref.name

    def measure(req: check_runs.CheckRequest) -> Found:
        data = PassSecrets(deps.kube, namespace, deps.settings.tenancy).secret_data(namespace,
                                                                                  secret)
        session = open_session(spec, data, deps.settings, deps.sink_pools)
        try:
            return session.run_checks(req)
        finally:
            session.close()

    return measure


def _act(action: A.Action, body: dict[str, Any], key: ViewKey, deps: Deps,
         sink: SinkSession | None, record: PassRecord) -> bool:
    ns, name = key
    if isinstance(action, (A.RecordIntent, A.UpdateStatus)):
        deps.kube.patch_view_status(ns, name, action.patch)
        if isinstance(action, A.UpdateStatus):
            record.status = action.status
            cut = action.status.last_cutover
            if "lastCutover" in action.patch and cut is not None:
                log.info("%s/%s: the alias serves revision %s (from %s); the switching pass "
                         "read staleness %s s, lag %s messages", ns, name, cut.to_revision,
                         cut.from_revision or "none", cut.staleness_seconds, cut.lag_messages)
    elif isinstance(action, A.AddFinalizer):
        deps.kube.add_finalizer(ns, name, action.finalizer)
    elif isinstance(action, A.RemoveFinalizer):
        deps.kube.remove_finalizer(ns, name, action.finalizer)
        return True
    elif isinstance(action, A.CreateSparkApplication):
        create_job(action, deps)
    elif isinstance(action, A.DeleteSparkApplication):
        deps.kube.delete_spark_application(action.namespace or ns, action.name)
    elif isinstance(action, (A.SwitchAlias, A.DropAlias, A.DropIndex)):
        if sink is None:  # the planner plans sink actions only on an observed sink
            raise RuntimeError(f"{ns}/{name}: {A.describe(action)} planned without the sink")
        # The switching view, with its UID: the alias records it (core.ownership).
        owner = IndexOwner(ns, name, view_from_object(body).uid)
        _act_on_sink(action, owner, deps, sink, record)
        if isinstance(action, A.DropIndex) and action.checkpoints:
            ckpt.delete_dropped_revision(deps.kube, deps.settings, ns, name, action.revision,
                                         action.checkpoints)
    elif isinstance(action, A.HoldSecret):
        deps.kube.hold_secret(ns, action.name, SECRET_FINALIZER)
    elif isinstance(action, A.ReleaseSecret):
        deps.kube.release_secret(ns, action.name, SECRET_FINALIZER, view=name)
    elif isinstance(action, A.EmitEvent):
        emit(body, action, key, deps)
    return False


def create_job(action: A.CreateSparkApplication, deps: Deps) -> None:
    """Create the job, then its Secret copies in its job namespace, owned by it: its pods
    wait for them (a mount is never optional) the second it takes to write them."""
    uid = deps.kube.create_spark_application(action.namespace, action.manifest)
    owner = {"apiVersion": action.manifest["apiVersion"], "kind": action.manifest["kind"],
             "name": action.name, "uid": uid}
    labels = {k: v for k, v in action.manifest["metadata"]["labels"].items()
              if k in (VIEW_LABEL, VIEW_NAMESPACE_LABEL)}
    for copy in action.copies:
        deps.kube.copy_secret(action.namespace, copy, owner, labels)


def _act_on_sink(action: A.SwitchAlias | A.DropAlias | A.DropIndex, owner: IndexOwner,
                 deps: Deps, sink: SinkSession, record: PassRecord) -> None:
    ns, name = owner.namespace, owner.name
    if isinstance(action, A.SwitchAlias):
        deps.failpoints.before_switch.hold()
        started = time.perf_counter()
        sink.switch_alias(action.schema, action.alias, action.to_index, action.from_index,
                          owner=owner, not_behind=action.not_behind)
        deps.metrics.cutover(ns, name, time.perf_counter() - started)
        record.switched = True
    elif isinstance(action, A.DropAlias):
        sink.drop_alias(action.schema, action.alias)
    else:
        sink.drop_index(action.schema, action.index, action.revision,
                        owner_uid=action.owner_uid)


def emit(body: dict[str, Any], action: A.EmitEvent, key: ViewKey, deps: Deps) -> None:
    """Post the event; warnings go to the log too. An event that cannot be posted never
    stops a pass: a namespace being deleted refuses new events, and its views must still be
    released."""
    ns, name = key
    if action.type == "Warning":
        log.warning("%s/%s: %s: %s", ns, name, action.reason, action.message)
    try:
        deps.kube.event(body, reason=action.reason, message=action.message, type_=action.type)
    except EventRefused as exc:
        log.warning("%s/%s: event %s not posted (%s): %s", ns, name, action.reason, exc,
                    action.message)
