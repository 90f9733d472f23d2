"""Observe: everything the planner needs, read and nothing written (the view's jobs, its sink
through a session left open for the actions, its Secrets' labels, its topics' end and log
start offsets and retention settings, its schema registry's answers, what the check runner
holds for it)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from derived_views.adapters.kafka.offsets import EndOffsetsCache, OffsetsUnavailable
from derived_views.adapters.kafka.record_times import RecordTimesUnavailable
from derived_views.adapters.kube.client import EventsUnreadable, SecretMissing
from derived_views.adapters.sink import open_session
from derived_views.adapters.sink_contract import SinkSecretInvalid, SinkSession, SinkUnavailable
from derived_views.api.spec import DerivedViewSpec
from derived_views.api.status import DerivedViewStatus
from derived_views.core import reasons
from derived_views.core.cadence import ViewKey
from derived_views.core.job.job_state import KNOWN_STATES
from derived_views.core.judges.tenancy import TenancyPolicy, cluster_refusal, secrets_of
from derived_views.core.log.freshness import committed_beyond, decides_gate
from derived_views.core.log.kafka_connection import (
    KafkaCluster,
    KafkaSecretInvalid,
    SourceOffsets,
    client_settings,
)
from derived_views.core.log.staleness import RecordTimes, wanted_offsets
from derived_views.core.observed import (
    FAILED_MOUNT,
    DriverObserved,
    LedgerPosition,
    Observed,
    SinkObserved,
    SparkApplicationObserved,
    TopicRetention,
    awaits_volumes,
    drivers_by_revision,
    mount_failure_of,
    revisions_to_observe,
    spark_application_from_object,
    status_from_object,
    topics_to_observe,
    view_from_object,
    with_drivers,
)
from derived_views.reconcile.deps import Deps
from derived_views.reconcile.job_namespaces import placement
from derived_views.reconcile.ports import KubePort
from derived_views.reconcile.registry_reading import registry_reading
from derived_views.reconcile.secrets import PassSecrets, SecretNotLabelled

log = logging.getLogger("derived_views")


@dataclass(frozen=True)
class SinkReading:
    """The sink's session and observation, or why there are none this time."""

    session: SinkSession | None = None
    observed: SinkObserved | None = None
    problem: tuple[str, str] | None = None


def sink_reading(spec: DerivedViewSpec, status: DerivedViewStatus, key: ViewKey, deps: Deps,
          secrets: PassSecrets, *, dropping: bool) -> SinkReading:
    """Connect to the sink and observe it; a problem (reason, message) when it cannot.
    `dropping`: the view is being deleted with deletionPolicy Delete."""
    ns, name = key
    secret = spec.sink.secret_ref.name
    try:
        data = secrets.secret_data(ns, secret)
        session = open_session(spec, data, deps.settings, deps.sink_pools)
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
    return SinkReading(session=session, observed=observation)


def kafka_cluster(spec: DerivedViewSpec, namespace: str, kube: KubePort | PassSecrets
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


def end_offsets(spec: DerivedViewSpec, status: DerivedViewStatus, key: ViewKey,
                 deps: Deps, secrets: PassSecrets | None = None, *,
                 not_before: float | None = None) -> SourceOffsets:
    """End offsets (and log starts) of the topics the view needs, fetched no earlier than
    `not_before` (the offsets cache's clock, `deps.offsets.now()`) when given."""
    ns = key[0]
    return topic_offsets(spec, topics_to_observe(spec, status), key, deps.settings.tenancy,
                         deps.offsets, secrets or PassSecrets(deps.kube, ns,
                                                              deps.settings.tenancy),
                         not_before=not_before)


def topic_offsets(spec: DerivedViewSpec, topics: Iterable[str], key: ViewKey,
                  policy: TenancyPolicy, offsets: EndOffsetsCache, secrets: PassSecrets, *,
                  not_before: float | None = None) -> SourceOffsets:
    """End offsets and log starts of `topics` on the view's Kafka cluster, read with its Kafka
    Secret; never from a cluster the tenancy policy does not list. The pass and `dv plan`
    (with its own cache) both read them here."""
    ns = key[0]
    where = "/".join(key)
    wanted = frozenset(topics)
    refused = cluster_refusal(spec, policy, ns)
    if refused is not None:  # the operator does not connect there either, Secret or not
        return SourceOffsets(None, reason=refused.reason, message=refused.message)
    try:
        cluster = kafka_cluster(spec, ns, secrets)
    except SecretNotLabelled as exc:
        log.warning("%s: end offsets unknown: Kafka %s", where, exc)
        return SourceOffsets(None, reason=reasons.SECRET_NOT_LABELLED, message=f"Kafka {exc}")
    except SecretMissing as exc:
        log.warning("%s: end offsets unknown: Kafka %s", where, exc)
        return SourceOffsets(None, reason=reasons.KAFKA_SECRET_MISSING, message=f"Kafka {exc}")
    except KafkaSecretInvalid as exc:
        log.warning("%s: end offsets unknown: %s", where, exc)
        return SourceOffsets(None, reason=reasons.KAFKA_SECRET_INVALID, message=str(exc))
    offsets.register(cluster, wanted)
    try:
        reading = offsets.get(cluster, not_before=not_before)
    except OffsetsUnavailable as exc:
        log.warning("%s: end offsets unavailable: %s", where, exc)
        return SourceOffsets(None, reason=reasons.KAFKA_UNAVAILABLE, message=str(exc), cluster=cluster,
                             topics=wanted)
    ends, missing = reading.of(wanted)
    starts = reading.starts_of(wanted)
    if missing:
        message = f"topics not found on {cluster.describe()}: {', '.join(sorted(missing))}"
        log.warning("%s: %s", where, message)
        return SourceOffsets(ends, missing, starts=starts, reason=reasons.TOPIC_MISSING,
                             message=message, cluster=cluster, topics=wanted)
    return SourceOffsets(ends, starts=starts, cluster=cluster, topics=wanted)


def topic_configs(key: ViewKey, deps: Deps, offsets: SourceOffsets
                  ) -> Mapping[str, TopicRetention]:
    """Retention settings of the view's topics whose offsets resolved (the cluster answered
    for them), from the cache that reads them every few minutes; empty when it has none. A
    failed read is logged by the one pass that tried it, not by every pass of its backoff."""
    if offsets.ends is None or offsets.cluster is None:
        return {}
    topics = {topic for topic, _partition in offsets.ends}
    if not topics:
        return {}
    answer = deps.topic_configs.get(offsets.cluster, topics)
    if answer.failure is not None:
        log.warning("%s: topic retention settings unread: %s", "/".join(key), answer.failure)
    return answer.configs


def record_times(spec: DerivedViewSpec, status: DerivedViewStatus, key: ViewKey, deps: Deps,
                 offsets: SourceOffsets, sink: SinkObserved | None) -> RecordTimes:
    """Timestamps of the records at the observed revisions' committed offsets, read after the
    end offsets (core.log.staleness); empty (staleness unknown) when they cannot be read."""
    if sink is None or offsets.ends is None or offsets.cluster is None:
        return {}
    positions: list[LedgerPosition | None] = list(sink.ledger.values())
    if any(revision not in sink.ledger for revision in revisions_to_observe(spec, status)):
        positions.append(None)  # a revision without a batch lacks the whole log
    wanted = wanted_offsets(offsets.ends, positions, offsets.starts)
    if not wanted:
        return {}
    try:
        return deps.record_times(offsets.cluster, wanted)
    except RecordTimesUnavailable as exc:
        log.warning("%s: staleness unknown: record times unavailable: %s", "/".join(key), exc)
        return {}


def _jobs(spec: DerivedViewSpec, status: DerivedViewStatus, key: ViewKey, deps: Deps,
          jobs: str) -> tuple[dict[str, SparkApplicationObserved], dict[str, DriverObserved]]:
    """The view's SparkApplications and driver pods (in `jobs`, its job namespace) by
    revision: two list calls."""
    ns, name = key
    view_namespace = ns if jobs != ns else None  # in a job namespace: this namespace's views only
    apps = {}
    for obj in deps.kube.spark_applications(jobs, name, view_namespace):
        observed_app = spark_application_from_object(obj)
        if observed_app is not None:
            apps[observed_app.revision] = observed_app
            if observed_app.state not in KNOWN_STATES:
                log.warning("%s/%s: SparkApplication %s is in state %r, which this operator "
                            "does not know; treating it as not running", ns, name,
                            observed_app.name, observed_app.state)
    drivers = drivers_by_revision(deps.kube.driver_pods(jobs, name, view_namespace), name, apps,
                                  revisions_to_observe(spec, status))
    drivers = {revision: with_mount_failure(deps.kube, jobs, driver)
               for revision, driver in drivers.items()}
    return with_drivers(apps, drivers), drivers


def with_mount_failure(kube: KubePort, namespace: str, driver: DriverObserved) -> DriverObserved:
    """A driver waiting for its volumes, with the kubelet's FailedMount message: one more list
    call, only while a driver waits in ContainerCreating. (The runtime contract test reads
    drivers through this too.)"""
    if not awaits_volumes(driver):
        return driver
    try:
        events = kube.pod_events(namespace, driver.uid, FAILED_MOUNT)
    except EventsUnreadable as exc:
        log.warning("%s: the Events of driver pod %s cannot be listed (%s): why it waits is "
                    "not shown; grant the operator `list` on events", namespace, driver.name,
                    exc)
        return driver
    return replace(driver, mount_failure=mount_failure_of(events, driver.uid))


@dataclass(frozen=True)
class Observation:
    """Everything one pass read, before anything is planned or done. `session` is the
    sink's connection for the actions (None: the sink could not be observed); `close`
    gives it back."""

    observed: Observed
    session: SinkSession | None
    source: SourceOffsets

    def close(self) -> None:
        if self.session is not None:
            self.session.close()


def observe(spec: DerivedViewSpec, body: dict[str, Any], deps: Deps, *,
            key: ViewKey | None = None) -> Observation:
    """Read everything the planner needs: the view's jobs, its sink (through a session left
    open for the actions), its Secrets' labels, its topics' end offsets, its schema
    registry's answers (an Avro view not being deleted) and what the check runner holds for
    the view (a finished run, or one in flight). Writes nothing to the
    view, its jobs, its sink or the runner. The caller closes the observation."""
    meta = body["metadata"]
    key = key or (meta["namespace"], meta["name"])
    status = status_from_object(body)
    jobs, job_problem = placement(deps.settings, key[0], deps.job_namespaces,
                                  lambda name: deps.kube.namespace_labels(name))
    apps, drivers = _jobs(spec, status, key, deps, jobs)
    # Ledger first, end offsets after: read the other way round, records arriving in between
    # would be committed but not yet counted at the end, so a busy topic could read as caught
    # up (or, with a committed offset above a stale end, as reset). A pass that may decide a
    # gate needs a fetch started after its ledger read (passes that overlap share one); the
    # others take the cluster's latest reading (one fetch per cluster per poll for all idle
    # views) and fetch again only when a committed offset is above it.
    ledger_read = deps.offsets.now()
    secrets = PassSecrets(deps.kube, key[0], deps.settings.tenancy)
    sink = sink_reading(spec, status, key, deps, secrets,
                 dropping=bool(meta.get("deletionTimestamp")) and spec.deletion_policy == "Delete")
    try:
        fresh = decides_gate(spec, status)
        offsets = end_offsets(spec, status, key, deps, secrets,
                               not_before=ledger_read if fresh else None)
        if not fresh and committed_beyond(sink.observed, offsets.ends):
            offsets = end_offsets(spec, status, key, deps, secrets, not_before=ledger_read)
        times = record_times(spec, status, key, deps, offsets, sink.observed)
        configs = topic_configs(key, deps, offsets)
        registry = (None if meta.get("deletionTimestamp")
                    else registry_reading(spec, status, key, deps.registries, secrets))
        observed = Observed(view=view_from_object(body), status=status,
                            checks=deps.check_runner.held(key),
                            switch_deferred=deps.deferrals.take(key),
                            job_namespace_problem=job_problem,
                            secret_labels=secrets.labels(secrets_of(spec)),
                            settings=deps.settings, spark_applications=apps, driver_pods=drivers,
                            sink=sink.observed, sink_problem=sink.problem,
                            end_offsets=offsets.ends, log_starts=offsets.starts,
                            topic_configs=configs, record_times=times,
                            missing_topics=offsets.missing,
                            source_problem=offsets.problem(), registry=registry)
    except BaseException:
        if sink.session is not None:
            sink.session.close()
        raise
    return Observation(observed=observed, session=sink.session, source=offsets)
