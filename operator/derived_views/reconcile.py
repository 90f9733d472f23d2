"""observe -> plan -> act for one DerivedView: the imperative shell around the planner.

A pass is three named steps. `observe` reads everything the planner needs (the
view's jobs, its sink, its Secrets, its topics' end offsets, the cutover checks'
run) and writes nothing; `plan` (core.plan.plan) decides; `act` carries the
actions out. Between observe and plan the shell prunes the sink's ledger, the one
write it does not plan (SinkSession.prune_ledger). The pass returns its outcome
(PassOutcome: released, and what a settled view read for the settled watch);
the caller, not the pass, tells the watch.

The planner's first action is `RecordIntent`, patched into status before any
other effect, so an operator that dies mid-way replans from a fresh
observation and resumes.  Actions run in order; the first failure stops the
pass (the next pass replans).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from derived_views.adapters import checkpoints as ckpt
from derived_views.adapters.kafka_offsets import EndOffsetsCache, OffsetsUnavailable
from derived_views.adapters.kube import EventRefused, Kube, SecretMissing
from derived_views.adapters.sink import open_session
from derived_views.adapters.sink_contract import (
    SinkPools,
    SinkSecretInvalid,
    SinkSession,
    SinkUnavailable,
)
from derived_views.api.constants import FINALIZER, SECRET_FINALIZER
from derived_views.api.spec import DerivedViewSpec
from derived_views.api.status import CONDITION_MESSAGE_LIMIT, CheckRun, DerivedViewStatus, clip_text
from derived_views.check_runner import CheckRunner
from derived_views.core import actions as A
from derived_views.core import checks, reasons, unjudged
from derived_views.core.cadence import ViewKey, settled
from derived_views.core.installation import OperatorConfig
from derived_views.core.job_state import KNOWN_STATES
from derived_views.core.kafka_connection import (
    KafkaCluster,
    KafkaSecretInvalid,
    SourceOffsets,
    client_settings,
)
from derived_views.core.observed import (
    DriverObserved,
    Observed,
    SinkObserved,
    SparkApplicationObserved,
    ViewObserved,
    drivers_by_revision,
    revisions_to_observe,
    spark_application_from_object,
    status_from_object,
    topics_to_observe,
    view_from_object,
    with_drivers,
)
from derived_views.core.offsets_freshness import committed_beyond, decides_gate
from derived_views.core.plan import plan
from derived_views.core.tenancy import (
    TenancyPolicy,
    cluster_refusal,
    secret_refusal,
    secrets_of,
)
from derived_views.failpoints import Failpoints
from derived_views.metrics import Metrics
from derived_views.settled_watch import Seen

log = logging.getLogger("derived_views")

Planner = Callable[[DerivedViewSpec, Observed, dt.datetime], list[A.Action]]
"""core.plan.plan; a test hands in a judge that raises, to drive the shell's backstop."""


@dataclass
class Deps:
    kube: Kube
    offsets: EndOffsetsCache
    config: OperatorConfig
    metrics: Metrics = field(default_factory=Metrics)
    sink_pools: SinkPools = field(default_factory=SinkPools)
    check_runner: CheckRunner = field(default_factory=CheckRunner)
    """Runs cutover checks off the pass threads (check_runner)."""
    failpoints: Failpoints = field(default_factory=Failpoints)
    """Where a fault test may hold the pass (all off unless the environment armed them)."""


@dataclass(frozen=True)
class PassOutcome:
    """What a pass tells its caller: whether the plan released the view for deletion, and,
    for a view the pass left settled (core.cadence), what it read of its topics (for the
    settled watch); None: the view is polled."""

    released: bool
    settled: Seen | None = None


@dataclass
class PassRecord:
    """What one pass did that metrics care about; filled in as it goes."""

    stage: str = "observe"
    index_rows: dict[str, int] = field(default_factory=dict)
    status: DerivedViewStatus | None = None
    switched: bool = False
    source: SourceOffsets | None = None


def _stall(body: dict[str, Any], key: ViewKey, deps: Deps, now: dt.datetime, reason: str,
           message: str) -> None:
    """Write the Stalled status of a spec that cannot run (core.unjudged, through
    core.conditions: an unchanged condition keeps its lastTransitionTime); nothing when the
    stored status already says so, so an unjudged view is not written to on every poll."""
    patch = unjudged.stalled_status(body, reason, message, now)
    if patch is not None:
        deps.kube.patch_view_status(*key, patch)


def _delete_unjudged(body: dict[str, Any], key: ViewKey, deps: Deps, now: dt.datetime,
                     record: PassRecord, why: str, *, stand_in: bool, planner: Planner) -> bool:
    """Delete a view whose spec cannot be read or judged: first by the planner's own deletion
    on a stand-in spec (core.unjudged.deletion_spec: the sink, the deletion policy and the
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
    _emit(body, A.EmitEvent(reasons.LEFT_BEHIND, clip_text(
        f"Released the view after stopping its jobs, without touching its sink: {why}{left}.",
        CONDITION_MESSAGE_LIMIT), "Warning"), key, deps)
    deps.kube.remove_finalizer(ns, name, FINALIZER)
    return True


class SecretNotLabelled(SecretMissing):
    """A Secret the tenancy policy keeps views from using; the message says how to allow it."""


class PassSecrets:
    """The view's Secrets, each read once per pass; one the policy does not let views use is
    never handed out (the operator does not connect with it either)."""

    def __init__(self, kube: Kube, namespace: str, policy: TenancyPolicy) -> None:
        self.kube, self.namespace, self.policy = kube, namespace, policy
        self.read: dict[str, tuple[dict[str, str], dict[str, str]] | SecretMissing] = {}

    def _get(self, name: str) -> tuple[dict[str, str], dict[str, str]]:
        if name not in self.read:
            try:
                self.read[name] = self.kube.secret(self.namespace, name)
            except SecretMissing as exc:
                self.read[name] = exc
        got = self.read[name]
        if isinstance(got, SecretMissing):
            raise got
        return got

    def secret_data(self, namespace: str, name: str) -> dict[str, str]:
        data, labels = self._get(name)
        refusal = secret_refusal(namespace, name, labels, self.policy)
        if refusal is not None:
            raise SecretNotLabelled(refusal.message)
        return data

    def labels(self, names: tuple[str, ...]) -> dict[str, dict[str, str] | None]:
        """Labels of each Secret (None: missing), reading those not read yet."""
        found: dict[str, dict[str, str] | None] = {}
        for name in names:
            try:
                found[name] = self._get(name)[1]
            except SecretMissing:
                found[name] = None
        return found


@dataclass(frozen=True)
class SinkReading:
    """The sink's session and observation, or why there are none this time."""

    session: SinkSession | None = None
    observed: SinkObserved | None = None
    problem: tuple[str, str] | None = None
    index_rows: dict[str, int] = field(default_factory=dict)
    """Rows per index, for metrics."""


def _sink(spec: DerivedViewSpec, status: DerivedViewStatus, key: ViewKey, deps: Deps,
          secrets: PassSecrets, *, dropping: bool) -> SinkReading:
    """Connect to the sink and observe it; a problem (reason, message) when it cannot.
    `dropping`: the view is being deleted with deletionPolicy Delete."""
    ns, name = key
    secret = spec.sink.secret_ref.name
    try:
        data = secrets.secret_data(ns, secret)
        session = open_session(spec, data, deps.config, deps.sink_pools)
    except SecretNotLabelled as exc:
        return SinkReading(problem=(reasons.SECRET_NOT_LABELLED, str(exc)))
    except SecretMissing as exc:
        keys = ("url, optionally username and password" if spec.sink.kind == "opensearch"
                else "host, port, database, user, password")
        return SinkReading(problem=(reasons.SECRET_MISSING, f"sink {exc}: create it (keys {keys}) or "
                                    f"fix spec.sink.{spec.sink.kind}.secretRef"))
    except SinkSecretInvalid as exc:
        return SinkReading(problem=(reasons.SINK_SECRET_INVALID, f"secret {ns}/{secret}: {exc}"))
    except SinkUnavailable as exc:
        log.warning("%s/%s: sink unavailable: %s", ns, name, exc)
        return SinkReading(problem=(reasons.SINK_UNREACHABLE, str(exc)))
    try:
        observation = session.observe(spec, status, dropping=dropping)
    except BaseException:
        session.close()  # a query that failed after connecting must not leak the connection
        raise
    return SinkReading(session=session, observed=observation.observed,
                       index_rows=dict(observation.index_rows))


def kafka_cluster(spec: DerivedViewSpec, namespace: str, kube: Kube | PassSecrets
                  ) -> KafkaCluster:
    """The view's Kafka connection, with the credentials of its Secret if it names one.

    Raises SecretMissing (no such Secret) or KafkaSecretInvalid (unusable data).
    """
    kafka = spec.source.kafka
    if kafka.secret_ref is None:
        return KafkaCluster.of(kafka.bootstrap_servers)
    secret = kafka.secret_ref.name
    data = kube.secret_data(namespace, secret)
    return KafkaCluster.of(kafka.bootstrap_servers,
                           client_settings(data, secret=f"secret {namespace}/{secret}"))


def _end_offsets(spec: DerivedViewSpec, status: DerivedViewStatus, key: ViewKey,
                 deps: Deps, secrets: PassSecrets | None = None, *,
                 not_before: float | None = None) -> SourceOffsets:
    """End offsets of the topics the view needs, fetched no earlier than `not_before`
    (the offsets cache's clock, `deps.offsets.now()`) when given."""
    ns = key[0]
    where = "/".join(key)
    topics = frozenset(topics_to_observe(spec, status))
    refused = cluster_refusal(spec, deps.config.tenancy, ns)
    if refused is not None:  # the operator does not connect there either, Secret or not
        return SourceOffsets(None, reason=refused.reason, message=refused.message)
    try:
        cluster = kafka_cluster(spec, ns, secrets or PassSecrets(deps.kube, ns,
                                                                 deps.config.tenancy))
    except SecretNotLabelled as exc:
        log.warning("%s: end offsets unknown: Kafka %s", where, exc)
        return SourceOffsets(None, reason=reasons.SECRET_NOT_LABELLED, message=f"Kafka {exc}")
    except SecretMissing as exc:
        log.warning("%s: end offsets unknown: Kafka %s", where, exc)
        return SourceOffsets(None, reason=reasons.KAFKA_SECRET_MISSING, message=f"Kafka {exc}")
    except KafkaSecretInvalid as exc:
        log.warning("%s: end offsets unknown: %s", where, exc)
        return SourceOffsets(None, reason=reasons.KAFKA_SECRET_INVALID, message=str(exc))
    deps.offsets.register(cluster, topics)
    try:
        reading = deps.offsets.get(cluster, not_before=not_before)
    except OffsetsUnavailable as exc:
        log.warning("%s: end offsets unavailable: %s", where, exc)
        return SourceOffsets(None, reason=reasons.KAFKA_UNAVAILABLE, message=str(exc), cluster=cluster,
                             topics=topics)
    ends, missing = reading.of(topics)
    if missing:
        message = f"topics not found on {cluster.describe()}: {', '.join(sorted(missing))}"
        log.warning("%s: %s", where, message)
        return SourceOffsets(ends, missing, reason=reasons.TOPIC_MISSING, message=message,
                             cluster=cluster, topics=topics)
    return SourceOffsets(ends, cluster=cluster, topics=topics)


def _jobs(spec: DerivedViewSpec, status: DerivedViewStatus, key: ViewKey, deps: Deps
          ) -> tuple[dict[str, SparkApplicationObserved], dict[str, DriverObserved]]:
    """The view's SparkApplications and driver pods by revision: two list calls."""
    ns, name = key
    apps = {}
    for obj in deps.kube.spark_applications(ns, name):
        observed_app = spark_application_from_object(obj)
        if observed_app is not None:
            apps[observed_app.revision] = observed_app
            if observed_app.state not in KNOWN_STATES:
                log.warning("%s/%s: SparkApplication %s is in state %r, which this operator "
                            "does not know; treating it as not running", ns, name,
                            observed_app.name, observed_app.state)
    drivers = drivers_by_revision(deps.kube.driver_pods(ns, name), name, apps,
                                  revisions_to_observe(spec, status))
    return with_drivers(apps, drivers), drivers


def _run_checks(spec: DerivedViewSpec, status: DerivedViewStatus, view: ViewObserved,
                deps: Deps, sink: SinkReading, now: dt.datetime
                ) -> tuple[str, CheckRun] | None:
    """The candidate's cutover checks when core.checks says they are due, run off the pass
    threads (check_runner): a pass submits a due run and goes on; a later pass of the view
    judges the finished run, dated when it was submitted. The run reads the sink Secret
    and connects on its own (the pass's connection is given back when the pass ends),
    through the same tenancy check as the pass."""
    key = (view.namespace, view.name)
    request = checks.due(spec, status, view, now)
    if request is None:
        deps.check_runner.forget(key)
        return None
    if sink.session is None or sink.observed is None:
        return None
    ns, secret = view.namespace, spec.sink.secret_ref.name

    def measure(req: checks.CheckRequest) -> dict[str, tuple[checks.Measurement, float]]:
        data = PassSecrets(deps.kube, ns, deps.config.tenancy).secret_data(ns, secret)
        session = open_session(spec, data, deps.config, deps.sink_pools)
        try:
            return session.run_checks(req)
        finally:
            session.close()

    finished = deps.check_runner.poll(key, request, measure, now)
    if finished is None:
        return None
    request = finished.request
    run = checks.judge(request, finished.found, finished.submitted_at)
    for failing in run.failing():
        deps.metrics.check_failed(view.namespace, view.name, request.revision, failing.name)
    took = sum(r.seconds or 0.0 for r in run.results)
    log.info("%s/%s: cutover checks of revision %s: %s (%.3fs)", view.namespace, view.name,
             request.revision, checks.summary(run), took)
    return request.revision, run


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


@dataclass(frozen=True)
class Observation:
    """Everything one pass read, before anything is planned or done. `session` is the
    sink's connection for the actions (None: the sink could not be observed); `close`
    gives it back."""

    observed: Observed
    session: SinkSession | None
    source: SourceOffsets
    index_rows: dict[str, int]

    def close(self) -> None:
        if self.session is not None:
            self.session.close()


def observe(spec: DerivedViewSpec, body: dict[str, Any], deps: Deps, now: dt.datetime, *,
            key: ViewKey | None = None) -> Observation:
    """Read everything the planner needs: the view's jobs, its sink (through a session left
    open for the actions), its Secrets' labels, its topics' end offsets and the cutover
    checks' run (submitted off the pass, judged by a later pass: check_runner). Writes
    nothing to the view, its jobs or its sink. The caller closes the observation."""
    meta = body["metadata"]
    key = key or (meta["namespace"], meta["name"])
    status = status_from_object(body)
    apps, drivers = _jobs(spec, status, key, deps)
    # Ledger first, end offsets after: read the other way round, records arriving in between
    # would be committed but not yet counted at the end, so a busy topic could read as caught
    # up (or, with a committed offset above a stale end, as reset). A pass that may decide a
    # gate needs a fetch started after its ledger read (passes that overlap share one); the
    # others take the cluster's latest reading (one fetch per cluster per poll for all idle
    # views) and fetch again only when a committed offset is above it.
    ledger_read = deps.offsets.now()
    secrets = PassSecrets(deps.kube, key[0], deps.config.tenancy)
    sink = _sink(spec, status, key, deps, secrets,
                 dropping=bool(meta.get("deletionTimestamp")) and spec.deletion_policy == "Delete")
    try:
        fresh = decides_gate(spec, status)
        offsets = _end_offsets(spec, status, key, deps, secrets,
                               not_before=ledger_read if fresh else None)
        if not fresh and committed_beyond(sink.observed, offsets.ends):
            offsets = _end_offsets(spec, status, key, deps, secrets, not_before=ledger_read)
        view = view_from_object(body)
        observed = Observed(view=view, status=status,
                            checks_run=_run_checks(spec, status, view, deps, sink, now),
                            secret_labels=secrets.labels(secrets_of(spec)),
                            config=deps.config, spark_applications=apps, driver_pods=drivers,
                            sink=sink.observed, sink_problem=sink.problem,
                            end_offsets=offsets.ends, missing_topics=offsets.missing,
                            source_problem=offsets.problem())
    except BaseException:
        if sink.session is not None:
            sink.session.close()
        raise
    return Observation(observed=observed, session=sink.session, source=offsets,
                       index_rows=sink.index_rows)


def _reconcile(body: dict[str, Any], key: ViewKey, deps: Deps, now: dt.datetime,
               record: PassRecord, *, stand_in: bool = False, planner: Planner = plan) -> bool:
    """The pass; a spec that cannot be read or judged ends Stalled (core.unjudged) instead of
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
    seen = observe(spec, body, deps, now, key=key)
    try:
        record.index_rows, record.source = dict(seen.index_rows), seen.source
        if seen.session is not None:  # upkeep, not observation: the one sink write not planned
            seen.session.prune_ledger()
        record.stage = "plan"
        try:
            actions = planner(spec, seen.observed, now)
        except Exception as exc:  # judging the author's input raised: core.unjudged
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
        return act(actions, body, key, deps, seen.session, record)
    finally:
        seen.close()


def act(actions: list[A.Action], body: dict[str, Any], key: ViewKey, deps: Deps,
        sink: SinkSession | None, record: PassRecord) -> bool:
    """Carry the plan out in order; the first failure raises and stops the pass (the next
    pass replans). True when an action released the view for deletion."""
    released = False
    for action in actions:
        released = _act(action, body, key, deps, sink, record) or released
    return released


def _act(action: A.Action, body: dict[str, Any], key: ViewKey, deps: Deps,
         sink: SinkSession | None, record: PassRecord) -> bool:
    ns, name = key
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
    elif isinstance(action, (A.SwitchAlias, A.DropAlias, A.DropIndex)):
        if sink is None:  # the planner plans sink actions only on an observed sink
            raise RuntimeError(f"{ns}/{name}: {A.describe(action)} planned without the sink")
        _act_on_sink(action, ns, name, deps, sink, record)
        if isinstance(action, A.DropIndex) and action.checkpoints:
            ckpt.delete_dropped_revision(deps.kube, deps.config, ns, name, action.revision,
                                         action.checkpoints)
    elif isinstance(action, A.HoldSecret):
        deps.kube.hold_secret(ns, action.name, SECRET_FINALIZER)
    elif isinstance(action, A.ReleaseSecret):
        deps.kube.release_secret(ns, action.name, SECRET_FINALIZER, view=name)
    elif isinstance(action, A.EmitEvent):
        _emit(body, action, key, deps)
    return False


def _act_on_sink(action: A.SwitchAlias | A.DropAlias | A.DropIndex, ns: str, name: str,
                 deps: Deps, sink: SinkSession, record: PassRecord) -> None:
    if isinstance(action, A.SwitchAlias):
        deps.failpoints.before_switch.hold()
        started = time.perf_counter()
        sink.switch_alias(action.schema, action.alias, action.to_index, action.from_index,
                          owner=f"{ns}/{name}")
        deps.metrics.cutover(ns, name, time.perf_counter() - started)
        record.switched = True
    elif isinstance(action, A.DropAlias):
        sink.drop_alias(action.schema, action.alias)
    else:
        sink.drop_index(action.schema, action.index, action.revision,
                        owner_uid=action.owner_uid)


def _emit(body: dict[str, Any], action: A.EmitEvent, key: ViewKey, deps: Deps) -> None:
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
