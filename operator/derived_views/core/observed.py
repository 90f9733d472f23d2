"""One immutable snapshot of everything the planner may look at.

The shell gathers it through adapters (Kubernetes, Kafka, the sink) and
never changes anything while doing so. Mappings are treated as read-only.
`None` for a whole source (sink, end offsets) means "could not be asked this
time": the planner then makes no decision that depends on it.

Helpers at the bottom turn API objects into these values and tell the shell
what to look up, so the shell holds no rules of its own.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from derived_views.api.constants import (
    JOB_SETTINGS_ANNOTATION,
    JOB_STAGE_LABEL,
    REVISION_LABEL,
    is_paused,
)
from derived_views.api.spec import DerivedViewSpec
from derived_views.api.status import DerivedViewStatus, SubjectVersion
from derived_views.core import naming
from derived_views.core.check_runs import Held
from derived_views.core.judges.source_schema import pinned_reader
from derived_views.core.revision import revision_of
from derived_views.core.settings import Settings
from derived_views.core.times import parse_timestamp

TopicPartition = tuple[str, int]

RUNNING = "RUNNING"
SUBMISSION_FAILED = "SUBMISSION_FAILED"
FAILED_STATES = frozenset({"FAILED", SUBMISSION_FAILED})
STOPPED_STATES = FAILED_STATES | {"COMPLETED"}
"""Terminal states of the Spark Operator: the job will not run again unless resubmitted.
COMPLETED counts as stopped: a view's streaming job is meant to run until deleted.
SUBMISSION_FAILED is terminal only when the restart policy allows no resubmission."""

DRIVER_CONTAINER = "spark-kubernetes-driver"
"""Name of the driver container in the driver pod (Spark on Kubernetes)."""


@dataclass(frozen=True)
class DriverObserved:
    """A job's driver pod as the kubelet reports it.

    On a cluster the job's own cause of failure is here (the termination message), not in
    the SparkApplication, and so is why a driver cannot start (a missing Secret).
    """

    name: str
    phase: str = ""
    """`status.phase`: Pending, Running, Succeeded, Failed, Unknown ("" before the first report)."""
    waiting_reason: str = ""
    """The driver container's `state.waiting.reason`, e.g. CreateContainerConfigError."""
    waiting_message: str = ""
    exit_code: int | None = None
    """From `state.terminated`, else `lastState.terminated` (the previous attempt)."""
    terminated_reason: str = ""
    terminated_message: str = ""
    """The termination message the job wrote: its one-line cause."""
    deleting: bool = False
    uid: str = ""
    created_at: dt.datetime | None = None
    """`metadata.creationTimestamp`: when this attempt of the driver was created (the Spark
    Operator creates a new pod for each)."""
    mount_failure: str = ""
    """The kubelet's newest FailedMount message for this pod (`mount_failure_of`), read only
    while its container waits in ContainerCreating (`awaits_volumes`): a Secret volume that
    cannot be mounted is reported in an Event, never in the pod's status."""


@dataclass(frozen=True)
class ViewObserved:
    """The DerivedView object itself (its spec is passed to `plan` separately)."""

    namespace: str
    name: str
    uid: str
    generation: int
    annotations: Mapping[str, str] = field(default_factory=dict)
    finalizers: tuple[str, ...] = ()
    deletion_timestamp: dt.datetime | None = None

    @property
    def paused(self) -> bool:
        """The view's `derivedviews.io/paused` annotation is true (`is_paused`): read here
        once for the planner and the cutover checks."""
        return is_paused(self.annotations)


@dataclass(frozen=True)
class SparkApplicationObserved:
    """A revision's SparkApplication as the Spark Operator reports it."""

    name: str
    revision: str
    state: str = ""
    """`status.applicationState.state`; "" until the Spark Operator has seen it."""
    error_message: str = ""
    execution_attempts: int = 0
    submission_attempts: int = 0
    deleting: bool = False
    """Its deletionTimestamp is set: going away, neither to be deleted again nor judged."""
    job_settings: str = ""
    """The spec.spark hash it was created with ("" for objects from before it was stamped)."""
    stage: str = ""
    """Its `derivedviews.io/job-stage` label: replay or steady ("" from before stages)."""
    driver_pod: str = ""
    """`status.driverInfo.podName` ("" before the first submission)."""
    retries_submission: bool = False
    """A failed submission will be retried by the Spark Operator (its restart policy allows it)."""
    driver: DriverObserved | None = None
    """Its driver pod, when one exists."""
    namespace: str = ""
    """Where it lives: the view's namespace, or its job namespace ("": not recorded)."""
    created_at: dt.datetime | None = None
    """`metadata.creationTimestamp`: a restart from the checkpoint is a new object."""

    @property
    def running(self) -> bool:
        return self.state == RUNNING

    @property
    def started_at(self) -> dt.datetime | None:
        """When its current driver was created: the later of the object's and its driver
        pod's creation (a resubmission keeps the object), None when neither is known. A
        batch committed before this was committed by an earlier driver."""
        pod = self.driver.created_at if self.driver is not None else None
        known = [t for t in (self.created_at, pod) if t is not None]
        return max(known) if known else None

    @property
    def stopped(self) -> bool:
        if self.state == SUBMISSION_FAILED:
            return not self.retries_submission
        return self.state in STOPPED_STATES

    @property
    def driver_pod_name(self) -> str:
        return self.driver_pod or driver_pod_name(self.name)


@dataclass(frozen=True)
class LedgerPosition:
    """A revision's newest committed batch in the sink's ledger."""

    end_offsets: Mapping[TopicPartition, int]
    """Exclusive end offsets (next offset to read) per partition after that batch."""
    committed_at: dt.datetime | None = None
    batch_id: int | None = None
    earlier: LedgerPosition | None = None
    """An earlier batch of the same revision (about a rate window before this one, else its
    first), so the planner can measure the commit rate; None with a single batch."""
    index_oid: int | str | None = None
    """Identity of the index that batch was written to: PostgreSQL's table OID, OpenSearch's
    index.uuid (None: not recorded by that job)."""
    history_start: Mapping[TopicPartition, int] | None = None
    """Where the revision's replay began reading, per partition: the offsets Spark resolved
    `earliest` to when the job first started (its checkpoint's initial offsets), which the job
    writes with every ledger row. None: not recorded (a job from before it was)."""


@dataclass(frozen=True)
class TopicRetention:
    """What a topic's configuration says about how much of its history the log keeps
    (describe configs; read every few minutes, not every pass)."""

    cleanup_policy: str = "delete"
    """`delete`, `compact` or `compact,delete`."""
    retention_ms: int | None = None
    """`retention.ms`: -1 keeps records forever; None: not reported."""
    retention_bytes: int | None = None
    """`retention.bytes`: -1 is no size limit; None: not reported."""
    remote_storage: bool = False
    """`remote.storage.enable`: tiered storage keeps old segments beyond the local log."""

    @property
    def compacted(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def deletes(self) -> bool:
        """Whether records leave the log's start (by age or size); compaction alone keeps it."""
        return "delete" in self.cleanup_policy and (
            (self.retention_ms is not None and self.retention_ms >= 0)
            or (self.retention_bytes is not None and self.retention_bytes >= 0))


@dataclass(frozen=True)
class RunningBatch:
    """How far a revision's running batch has read the log, as its job last reported
    (dvjob.batch_progress): read, not committed, so never part of the gate."""

    batch_id: int
    records_read: int
    end_offsets: Mapping[TopicPartition, int]
    """The batch's exclusive end offsets (its range ends there)."""
    started_at: dt.datetime
    reported_at: dt.datetime


@dataclass(frozen=True)
class SwitchBlocker:
    """Why the alias cannot switch to an index now: a CamelCase reason and what to do."""

    reason: str
    message: str


@dataclass(frozen=True)
class IndexOwner:
    """The view an index records as the one that created it (its job writes it there)."""

    namespace: str
    name: str
    uid: str
    """The view's metadata.uid; "" when only the name was recorded (OpenSearch indexes from
    before UIDs were): such an owner is judged by namespace/name."""

    def describe(self) -> str:
        uid = f" (uid {self.uid})" if self.uid else ""
        return f"DerivedView {self.namespace}/{self.name}{uid}"


@dataclass(frozen=True)
class SinkObserved:
    """The sink's side: which indexes exist, where the alias points, ledger heads."""

    indexes: frozenset[str] = frozenset()
    """Existing index tables of this view (`<base>__<revision>`) in the sink schema."""
    alias_target: str | None = None
    """The table the alias VIEW selects from, or None when there is no alias."""
    ledger: Mapping[str, LedgerPosition] = field(default_factory=dict)
    """Newest ledger row per revision; revisions without a committed batch are absent."""
    alias_owner: IndexOwner | None = None
    """The view the alias records as its owner, judged as an index's (core.ownership); uid ""
    when recorded by name only, from before (None: no alias, or unmarked)."""
    switch_blockers: Mapping[str, SwitchBlocker] = field(default_factory=dict)
    """Index -> why switching the alias to it would fail or break a dependent (absent: fine)."""
    drop_blockers: tuple[str, ...] = ()
    """Database objects of others that depend on the alias or an index table (observed while
    a view with deletionPolicy Delete is deleted): DROP without CASCADE refuses them."""
    running: Mapping[str, RunningBatch] = field(default_factory=dict)
    """Revision -> its job's last progress report of a running batch (absent: none)."""
    bad_records: Mapping[str, int] = field(default_factory=dict)
    """Records each revision left out under its bad-record policy (sum over its ledger rows)."""
    index_owners: Mapping[str, IndexOwner] = field(default_factory=dict)
    """Index -> the view it records as its owner; absent: none recorded (an index from before
    owners were recorded: judged by the alias that serves it, else as this view's by name)."""
    index_rows: Mapping[str, int] = field(default_factory=dict)
    """Index -> the rows (documents) it holds now, as the sink counts them cheaply (PostgreSQL's
    estimate from its statistics, OpenSearch's count): what promotion rules (cutover.minRows)
    and the metrics read alike."""
    index_oids: Mapping[str, int | str] | None = None
    """Index -> its identity (table OID, index.uuid), read after the ledger (a table the ledger's newest row names
    must still be there then); None when not observed: no integrity decision is made."""


@dataclass(frozen=True)
class RegistryObserved:
    """What the view's schema registry told this pass (views that read Avro)."""

    where: str
    """The registry as messages name it (its host and port, never credentials)."""
    reader_schemas: Mapping[SubjectVersion, str] = field(default_factory=dict)
    """The spec's pinned reader schema, fetched (`reader_to_fetch`); absent when it was not
    asked for (its revision's status keeps it) or could not be fetched."""
    unregistered: frozenset[str] = frozenset()
    """Value subjects (`<topic>-value`) of the spec's topics with nothing registered."""
    problem: tuple[str, str] | None = None
    """(reason, message) why the registry could not be asked: SchemaRegistryUnreachable,
    SchemaRegistrySecretInvalid (or the Secret is missing: the tenancy policy says so). No
    job of the view is created meanwhile."""
    reader_problem: tuple[str, str] | None = None
    """(ReaderSchemaNotFound, message): the pinned subject or version is not there, or is not
    Avro."""


@dataclass(frozen=True)
class Observed:
    """Input of `plan` besides the spec and the time."""

    view: ViewObserved
    status: DerivedViewStatus
    settings: Settings
    spark_applications: Mapping[str, SparkApplicationObserved] = field(default_factory=dict)
    """This view's SparkApplications by revision (label derivedviews.io/revision)."""
    sink: SinkObserved | None = None
    end_offsets: Mapping[TopicPartition, int] | None = None
    """High watermark of every partition of `topics_to_observe`, read after the ledger."""
    log_starts: Mapping[TopicPartition, int] | None = None
    """Log start offset (low watermark) of the partitions of `end_offsets`, read in the same
    fetch: records below it are gone (retention, delete-records). None: not read."""
    topic_configs: Mapping[str, TopicRetention] = field(default_factory=dict)
    """Retention settings of the topics of `topics_to_observe` (absent: not read yet)."""
    record_times: Mapping[tuple[TopicPartition, int], dt.datetime | None] = field(
        default_factory=dict)
    """Kafka timestamps of the records at the ledger's committed offsets, for staleness
    (core.log.staleness.RecordTimes: read after the end offsets, for `wanted_offsets`)."""
    missing_topics: frozenset[str] = frozenset()
    """Topics of `topics_to_observe` the Kafka cluster says do not exist."""
    source_problem: tuple[str, str] | None = None
    """(reason, message) why `end_offsets` is None: KafkaSecretMissing, KafkaSecretInvalid,
    KafkaUnavailable."""
    sink_problem: tuple[str, str] | None = None
    """(reason, message) why `sink` is None: SecretMissing, SinkSecretInvalid, SinkUnreachable."""
    secret_labels: Mapping[str, Mapping[str, str] | None] = field(default_factory=dict)
    """Labels of the Secrets the spec names (None: no such Secret), for the tenancy policy."""
    driver_pods: Mapping[str, DriverObserved] = field(default_factory=dict)
    """Driver pods of this view's jobs by revision, whether or not their SparkApplication still
    exists: a new SparkApplication must wait until the previous one's driver pod is gone."""
    switch_deferred: tuple[str, str] | None = None
    """(revision, why) when the sink deferred a switch to `revision` since the last pass
    (core.cutover.monotonic: the candidate stayed behind the serving index)."""
    checks: Held = field(default_factory=Held)
    """The view's cutover checks as the operator's check runner holds them: a finished run
    no pass has taken yet, and whether one is queued or measuring."""
    registry: RegistryObserved | None = None
    """The schema registry of a view that reads Avro; None for the others (and when it was
    not asked: the view is being deleted)."""
    job_namespace_problem: tuple[str, str] | None = None
    """(JobNamespaceMissing, message) when the view's jobs belong in a job namespace that does
    not exist or was not made for them: no job of the view is created."""


# Helpers for the shell ----------------------------------------------------------------------

def view_from_object(body: Mapping[str, Any]) -> ViewObserved:
    """A DerivedView as returned by the API server (or Kopf's body) -> ViewObserved."""
    meta = body.get("metadata") or {}
    return ViewObserved(
        namespace=str(meta.get("namespace", "")), name=str(meta["name"]),
        uid=str(meta.get("uid", "")), generation=int(meta.get("generation") or 0),
        annotations=dict(meta.get("annotations") or {}),
        finalizers=tuple(meta.get("finalizers") or ()),
        deletion_timestamp=parse_timestamp(meta.get("deletionTimestamp")))


def status_from_object(body: Mapping[str, Any]) -> DerivedViewStatus:
    """The recorded status (empty for a new view); unknown fields are ignored."""
    return DerivedViewStatus.model_validate(body.get("status") or {})


def spark_application_from_object(obj: Mapping[str, Any]) -> SparkApplicationObserved | None:
    """A SparkApplication object -> SparkApplicationObserved; None if it has no revision label."""
    meta = obj.get("metadata") or {}
    revision = (meta.get("labels") or {}).get(REVISION_LABEL)
    if not revision:
        return None
    status = obj.get("status") or {}
    state = status.get("applicationState") or {}
    submission_attempts = int(status.get("submissionAttempts") or 0)
    policy = (obj.get("spec") or {}).get("restartPolicy") or {}
    return SparkApplicationObserved(
        name=str(meta["name"]), revision=str(revision), state=str(state.get("state") or ""),
        namespace=str(meta.get("namespace") or ""),
        error_message=str(state.get("errorMessage") or ""),
        execution_attempts=int(status.get("executionAttempts") or 0),
        submission_attempts=submission_attempts,
        deleting=bool(meta.get("deletionTimestamp")),
        job_settings=str((meta.get("annotations") or {}).get(JOB_SETTINGS_ANNOTATION, "")),
        stage=str((meta.get("labels") or {}).get(JOB_STAGE_LABEL, "")),
        driver_pod=str((status.get("driverInfo") or {}).get("podName") or ""),
        retries_submission=_retries_submission(policy, submission_attempts),
        created_at=parse_timestamp(meta.get("creationTimestamp")))


def _retries_submission(policy: Mapping[str, Any], submission_attempts: int) -> bool:
    """Whether the Spark Operator resubmits after SUBMISSION_FAILED (its util.ShouldRetry):
    always with Always; with OnFailure while attempts <= onSubmissionFailureRetries."""
    kind = policy.get("type")
    if kind == "Always":
        return True
    retries = policy.get("onSubmissionFailureRetries")
    return kind == "OnFailure" and retries is not None and submission_attempts <= int(retries)


def driver_pod_name(app_name: str) -> str:
    """The Spark Operator's driver pod name when the app names none: `<app>-driver`."""
    return f"{app_name}-driver"


def driver_from_pod(obj: Mapping[str, Any]) -> DriverObserved:
    """A Pod object (camelCase, as the API server returns it) -> DriverObserved."""
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    containers = list(status.get("containerStatuses") or [])
    container = next((c for c in containers if c.get("name") == DRIVER_CONTAINER),
                     containers[0] if len(containers) == 1 else {})
    state = container.get("state") or {}
    waiting = state.get("waiting") or {}
    terminated = state.get("terminated") or (container.get("lastState") or {}).get(
        "terminated") or {}
    exit_code = terminated.get("exitCode")
    return DriverObserved(
        name=str(meta.get("name", "")), phase=str(status.get("phase") or ""),
        waiting_reason=str(waiting.get("reason") or ""),
        waiting_message=str(waiting.get("message") or ""),
        exit_code=None if exit_code is None else int(exit_code),
        terminated_reason=str(terminated.get("reason") or ""),
        terminated_message=str(terminated.get("message") or "").strip(),
        deleting=bool(meta.get("deletionTimestamp")), uid=str(meta.get("uid") or ""),
        created_at=parse_timestamp(meta.get("creationTimestamp")))


FAILED_MOUNT = "FailedMount"
"""The reason of the kubelet's Event when a pod's volume cannot be set up (pkg/kubelet/events)."""


def awaits_volumes(driver: DriverObserved) -> bool:
    """A driver container the kubelet has not created yet because its volumes are not set up:
    the one case where the pod itself does not say why, so the shell reads its Events."""
    return (not driver.deleting and bool(driver.uid) and driver.phase in ("", "Pending")
            and driver.waiting_reason == "ContainerCreating")


def mount_failure_of(events: Iterable[Mapping[str, Any]], uid: str) -> str:
    """The message of the newest FailedMount Event about the pod `uid` ("" when none): the
    kubelet repeats it on every retry, so the newest says what still fails."""
    newest: tuple[dt.datetime, str] | None = None
    for event in events:
        involved = event.get("involvedObject") or {}
        if event.get("reason") != FAILED_MOUNT or involved.get("uid") != uid:
            continue
        meta = event.get("metadata") or {}
        stamp = parse_timestamp(event.get("lastTimestamp") or event.get("eventTime")
                                or event.get("firstTimestamp") or meta.get("creationTimestamp"))
        at = stamp or dt.datetime.min.replace(tzinfo=dt.UTC)
        if newest is None or at >= newest[0]:
            newest = (at, str(event.get("message") or "").strip())
    return newest[1] if newest else ""


def drivers_by_revision(pods: Iterable[Mapping[str, Any]], view: str,
                        apps: Mapping[str, SparkApplicationObserved],
                        revisions: Iterable[str]) -> dict[str, DriverObserved]:
    """Match driver pods to revisions by name: the name each app reports, else the name the
    Spark Operator would give the revision's SparkApplication's driver. Other pods are ignored."""
    wanted = {driver_pod_name(naming.spark_application_name(view, r)): r for r in revisions
              if r not in apps}
    wanted.update({app.driver_pod_name: revision for revision, app in apps.items()})
    found: dict[str, DriverObserved] = {}
    for pod in pods:
        revision = wanted.get(str((pod.get("metadata") or {}).get("name", "")))
        if revision is not None:
            found[revision] = driver_from_pod(pod)
    return found


def with_drivers(apps: Mapping[str, SparkApplicationObserved],
                 drivers: Mapping[str, DriverObserved]) -> dict[str, SparkApplicationObserved]:
    """The apps, each with its revision's driver pod attached."""
    return {revision: replace(app, driver=drivers.get(revision))
            for revision, app in apps.items()}


def revisions_to_observe(spec: DerivedViewSpec, status: DerivedViewStatus) -> frozenset[str]:
    """The spec's revision and every revision the status still tracks."""
    return frozenset({revision_of(spec), *(r.revision for r in status.revisions)})


def reader_to_fetch(spec: DerivedViewSpec, status: DerivedViewStatus) -> SubjectVersion | None:
    """The reader schema to fetch from the registry: the spec's pinned one, unless the status
    keeps it already (its revision started with it): a started revision never needs the
    registry's copy again, so a thousand serving views fetch none."""
    pin = pinned_reader(spec.source)
    if pin is None:
        return None
    record = status.record(revision_of(spec))
    kept = record.content.reader_schema if record is not None and record.content else None
    return None if kept == pin else pin


def index_tables_to_observe(spec: DerivedViewSpec, status: DerivedViewStatus) -> frozenset[str]:
    """Index tables whose existence the planner needs (ask the sink which of these exist).

    On deletion with deletionPolicy Delete, also list the schema's tables for which
    `naming.index_revision(base, table)` is not None, so forgotten indexes are dropped too.
    """
    base = spec.sink.alias
    return frozenset(naming.index_table(base, r) for r in revisions_to_observe(spec, status))


def topics_to_observe(spec: DerivedViewSpec, status: DerivedViewStatus) -> frozenset[str]:
    """Topics whose end offsets the planner needs: the spec's and those of tracked revisions."""
    topics = set(spec.source.topics)
    for record in status.revisions:
        if record.content is not None:
            topics.update(record.content.topics)
    return frozenset(topics)
