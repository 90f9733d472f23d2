"""One pass for one view: observe, plan, act, and what the caller learns (PassOutcome). A spec
that cannot be read or judged ends Stalled (core.judges.unjudged) instead of raising, and its
deletion still runs."""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from derived_views.api.constants import FINALIZER, SECRET_FINALIZER
from derived_views.api.spec import DerivedViewSpec
from derived_views.api.status import CONDITION_MESSAGE_LIMIT, DerivedViewStatus, clip_text
from derived_views.core import actions as A
from derived_views.core import reasons
from derived_views.core.cadence import ViewKey, settled
from derived_views.core.judges import unjudged
from derived_views.core.log.kafka_connection import SourceOffsets
from derived_views.core.observed import Observed, status_from_object
from derived_views.core.plan import plan
from derived_views.reconcile.act import act, emit
from derived_views.reconcile.deps import Deps, PassRecord
from derived_views.reconcile.observe import observe
from derived_views.reconcile.settled_watch import Seen

log = logging.getLogger("derived_views")


Planner = Callable[[DerivedViewSpec, Observed, dt.datetime], list[A.Action]]
"""core.plan.plan; a test hands in a judge that raises, to drive the shell's backstop."""


@dataclass(frozen=True)
class PassOutcome:
    """What a pass tells its caller: whether the plan released the view for deletion, and,
    for a view the pass left settled (core.cadence), what it read of its topics (for the
    settled watch); None: the view is polled."""

    released: bool
    settled: Seen | None = None


def reconcile(body: dict[str, Any], deps: Deps, now: dt.datetime, *,
              planner: Planner = plan) -> bool:
    """One pass for one view; True once the plan has released the view for deletion
    (run_pass, for callers that need only that)."""
    return run_pass(body, deps, now, planner=planner).released


def run_pass(body: dict[str, Any], deps: Deps, now: dt.datetime, *,
             planner: Planner = plan) -> PassOutcome:
    """One pass for one view: observe, plan, act; returns what the caller needs to know
    (released; settled, with what it read of its topics).

    Metrics record the pass (duration, failures by stage, the resulting gauges)
    around it; they never change its outcome.
    """
    meta = body["metadata"]
    key: ViewKey = (meta["namespace"], meta["name"])  # read here once for the whole pass
    ns, name = key
    record = PassRecord()
    started = time.perf_counter()
    try:
        released = _reconcile(body, key, deps, now, record, planner=planner)
    except Exception:
        deps.metrics.reconcile_error(ns, name, record.stage)
        raise
    finally:
        deps.metrics.reconcile_duration(time.perf_counter() - started)
    if released:
        deps.metrics.forget_view(ns, name)
        return PassOutcome(released=True)
    status = record.status or status_from_object(body)
    deps.metrics.observe_view(ns, name, status, record.index_rows)
    if record.switched:
        deps.metrics.gate_to_switch(ns, name, status)
    return PassOutcome(released=False, settled=_settled_reading(meta, status, record.source))


def _settled_reading(meta: dict[str, Any], status: DerivedViewStatus,
                     source: SourceOffsets | None) -> Seen | None:
    """What a view the pass left settled read of its topics (it then waits for its log to
    move); None for any other view (it is polled)."""
    if (source is None or source.cluster is None or source.ends is None
            or not settled(meta, status)):
        return None
    return Seen(source.cluster, source.topics, dict(source.ends), source.missing)


def _reconcile(body: dict[str, Any], key: ViewKey, deps: Deps, now: dt.datetime,
               record: PassRecord, *, stand_in: bool = False, planner: Planner = plan) -> bool:
    """The pass; a spec that cannot be read or judged ends Stalled (core.judges.unjudged) instead of
    raising, and its deletion still runs (`stand_in`: the spec is deletion_spec's)."""
    ns, name = key
    deleting = bool(body["metadata"].get("deletionTimestamp"))
    try:
        spec = DerivedViewSpec.model_validate(body.get("spec") or {})
    except ValidationError as exc:
        message = unjudged.invalid_spec_message(exc)
        if deleting:
            return _delete_unjudged(body, key, deps, now, record,
                                    f"its spec does not validate ({message})",
                                    stand_in=stand_in, planner=planner)
        _stall(body, key, deps, now, reasons.INVALID_SPEC, message)
        return False
    seen = observe(spec, body, deps, key=key)
    try:
        sink = seen.observed.sink
        record.index_rows = dict(sink.index_rows) if sink is not None else {}
        record.source = seen.source
        record.stage = "plan"
        try:
            actions = planner(spec, seen.observed, now)
        except Exception as exc:  # judging the author's input raised: core.judges.unjudged
            deps.metrics.reconcile_error(ns, name, "judge")
            log.warning("%s/%s: %s: %s", ns, name, reasons.SPEC_NOT_JUDGED,
                        unjudged.first_line(exc))
            log.debug("%s/%s: judging the spec raised", ns, name, exc_info=exc)
            if deleting:
                return _delete_unjudged(
                    body, key, deps, now, record, f"{unjudged.failed_step(exc)} failed on its "
                    f"spec ({unjudged.first_line(exc)})", stand_in=stand_in, planner=planner)
            status = seen.observed.status
            serving = status.active.revision if status.active is not None else None
            _stall(body, key, deps, now, reasons.SPEC_NOT_JUDGED,
                   unjudged.not_judged_message(exc, serving))
            return False
        record.stage = "act"
        return act(actions, body, key, deps, seen.session, record, spec=spec)
    finally:
        seen.close()


def _stall(body: dict[str, Any], key: ViewKey, deps: Deps, now: dt.datetime, reason: str,
           message: str) -> None:
    """Write the Stalled status of a spec that cannot run (core.judges.unjudged, through
    core.conditions: an unchanged condition keeps its lastTransitionTime); nothing when the
    stored status already says so, so an unjudged view is not written to on every poll."""
    patch = unjudged.stalled_status(body, reason, message, now)
    if patch is not None:
        deps.kube.patch_view_status(*key, patch)


def _delete_unjudged(body: dict[str, Any], key: ViewKey, deps: Deps, now: dt.datetime,
                     record: PassRecord, why: str, *, stand_in: bool, planner: Planner) -> bool:
    """Delete a view whose spec cannot be read or judged: first by the planner's own deletion
    on a stand-in spec (core.judges.unjudged.deletion_spec: the sink, the deletion policy and the
    jobs are the view's own; only what is judged is set aside); when even that cannot run,
    by what is safe without a spec (_release_unread)."""
    if not stand_in:
        spec = unjudged.deletion_spec(body.get("spec") or {})
        if spec is not None:
            log.warning("%s/%s: deleting with the spec's transform, schema and cutover set "
                        "aside: %s", *key, why)
            neutral = {**body, "spec": spec.model_dump(mode="json", by_alias=True,
                                                       exclude_none=True)}
            return _reconcile(neutral, key, deps, now, record, stand_in=True, planner=planner)
    return _release_unread(body, key, deps, why)


def _release_unread(body: dict[str, Any], key: ViewKey, deps: Deps, why: str) -> bool:
    """Deletion without a spec: stop the view's jobs (found by their label), release the
    Secrets its status holds, say what may be left, and let the view go. The sink is left
    alone: without a spec nothing says for sure which tables are the view's."""
    ns, name = key
    if FINALIZER not in (body["metadata"].get("finalizers") or []):
        return True
    apps = deps.kube.spark_applications(ns, name)
    for app in apps:
        if not app["metadata"].get("deletionTimestamp"):
            deps.kube.delete_spark_application(ns, app["metadata"]["name"])
    if apps:
        return False  # released by a later pass, once its jobs are gone
    status = body.get("status") or {}
    for secret in sorted({str(s) for s in status.get("heldSecrets") or []}):
        deps.kube.release_secret(ns, secret, SECRET_FINALIZER, view=name)
    indexes = sorted({str(r["index"]) for r in status.get("revisions") or []
                      if isinstance(r, dict) and r.get("index")})
    left = (f"; index tables it may have left in its sink: {', '.join(indexes)}" if indexes
            else "")
    emit(body, A.EmitEvent(reasons.LEFT_BEHIND, clip_text(
        f"Released the view after stopping its jobs, without touching its sink: {why}{left}.",
        CONDITION_MESSAGE_LIMIT), "Warning"), key, deps)
    deps.kube.remove_finalizer(ns, name, FINALIZER)
    return True
