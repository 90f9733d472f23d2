"""The DerivedView status: the planner's memory and the user's view of progress.

`revisions` is the record the planner works from (phases, builds, deadlines,
retirement times); `active`, `candidate` and `phase` summarise it for people
and printer columns. Conditions follow kstatus: Ready, Reconciling, Stalled,
plus CaughtUp and Degraded. Unknown fields are ignored on read so a newer
operator's status does not break an older one.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

CONDITION_REASON_PATTERN = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
CONDITION_MESSAGE_LIMIT = 1024
"""Characters of a condition's message the operator writes: enough for the cause and what to
do; an author's 32 K identifier quoted in it is cut, never a status the API server refuses."""
_DETAIL_LIMIT = 4096


def clip_text(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, ending in an ellipsis."""
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _clip(value: object, limit: int) -> object:
    """A string cut to `limit` characters; anything else as given (for the model's own type
    check). Messages quote authors' input, which may be of any size."""
    return clip_text(value, limit) if isinstance(value, str) else value


class Phase(StrEnum):
    """Lifecycle of one revision (see DESIGN.md)."""

    Pending = "Pending"
    Backfilling = "Backfilling"
    CaughtUp = "CaughtUp"
    Active = "Active"
    Retiring = "Retiring"
    Retired = "Retired"
    Failed = "Failed"
    Superseded = "Superseded"


class JobStage(StrEnum):
    """What a revision's job is sized for (core.job.stages): `replay` while it reads the
    backlog it started with, `steady` to follow the log."""

    Replay = "replay"
    Steady = "steady"


class ViewPhase(StrEnum):
    """One word for the whole view: the candidate's phase, else Active or Pending."""

    Pending = "Pending"
    Backfilling = "Backfilling"
    CaughtUp = "CaughtUp"
    Active = "Active"
    Failed = "Failed"
    Deleting = "Deleting"


class StatusModel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, validate_by_name=True,
                              validate_by_alias=True, serialize_by_alias=True,
                              frozen=True, extra="ignore")


class Lag(StatusModel):
    """How far a revision's index is behind the log."""

    messages: Annotated[int, Field(
        ge=0, description="Sum over partitions of the topic end offset minus the offset "
                          "committed in the index.")]
    seconds: Annotated[int | None, Field(
        ge=0, description="Staleness: the age in seconds of the oldest record not yet in the "
                          "index (from its Kafka timestamp; the largest over partitions); 0 "
                          "when caught up; absent when a timestamp cannot be read or lies "
                          "ahead of the operator's clock. The cutover gate reads this.")
                       ] = None
    eta_seconds: Annotated[int | None, Field(
        ge=0, description="While behind: the seconds the index needs to drain what is not "
                          "read yet (`messages - batchRead`) at its measured commit rate, or "
                          "before one is measured at the running batch's read rate, or before "
                          "either at its build's estimate (`etaEstimated`); absent when none is "
                          "known. An estimate for people, never the gate.")
                          ] = None
    since_commit_seconds: Annotated[int | None, Field(
        ge=0, description="While behind: seconds since the index last committed a batch "
                          "(absent before the first batch).")] = None
    eta_estimated: Annotated[bool | None, Field(
        description="True: `etaSeconds` is the build's estimate (`estimate` of its "
                    "revision), because neither rate is measured yet (a replay's first "
                    "seconds); absent: measured.")] = None
    batch_read: Annotated[int | None, Field(
        ge=0, description="While a batch runs: the records of `messages` it has read from the "
                          "log so far, not yet committed (from the job's progress report, a "
                          "few seconds old); `messages - batchRead` is still to be read.")
                          ] = None
    partitions: Annotated[dict[str, Annotated[int, Field(ge=0)]], Field(
        description="Lag per `topic/partition`.")] = {}
    end_offsets: Annotated[dict[str, Annotated[int, Field(ge=0)]], Field(
        description="Topic end offset per `topic/partition` when the lag was measured, so "
                    "progress is `endOffsets - partitions` out of `endOffsets`.")] = {}


class SubjectVersion(StatusModel):
    """A version of a schema registry subject: where a revision's reader schema was fetched
    from (hashable: the key of fetched schemas in the operator)."""

    subject: Annotated[str, Field(description="The registry subject.")]
    version: Annotated[int, Field(ge=1, description="The subject's version.")]

    def describe(self) -> str:
        return f"subject {self.subject} version {self.version}"


class RevisionContent(StatusModel):
    """The content fields of a revision, so its job can be recreated after the spec moved on."""

    topics: Annotated[list[str], Field(description="Topics the revision reads.")]
    format: Annotated[str, Field(description="Encoding of record values.")]
    value_schema: Annotated[str, Field(
        alias="schema", description="Spark DDL of the value, or (encoding avro) the Avro reader "
                                    "schema.")]
    encoding: Annotated[str | None, Field(
        description="`avro` when values are Avro read through a schema registry (format avro, "
                    "or debezium from Debezium's Avro converter); absent for JSON.")] = None
    reader_schema: Annotated[SubjectVersion | None, Field(
        description="The registry subject and version `schema` (the reader schema) was "
                    "fetched from when the spec pins it there: the text is kept here so the "
                    "revision's job renders the same whatever the registry holds later.")
                             ] = None
    sql: Annotated[str | None, Field(description="The SQL transform, if SQL.")] = None
    python_function: Annotated[str | None, Field(
        description="The Python transform `package.module:function`, if Python.")] = None
    py_files: Annotated[list[str], Field(description="Files shipped with a Python transform.")] = []
    primary_key: Annotated[list[str], Field(description="Primary key columns.")]


class CheckOutcome(StrEnum):
    """How one cutover check came out."""

    Passed = "Passed"
    Failed = "Failed"
    Error = "Error"
    """It could not run (SQL error, timeout, permission): it blocks the cutover too."""
    Skipped = "Skipped"
    """Not applicable (a parity check without an active index, or with a changed key)."""


class CheckResult(StatusModel):
    """One check's latest outcome."""

    name: Annotated[str, Field(description="rowCount, keySample, diff or an assertion's name.")]
    outcome: Annotated[CheckOutcome, Field(description="Passed, Failed, Error or Skipped.")]
    observed: Annotated[str | None, Field(
        max_length=1024, description="What the check found.")] = None
    expected: Annotated[str | None, Field(
        max_length=1024, description="What it needed to find.")] = None
    seconds: Annotated[float | None, Field(
        ge=0, description="How long its queries took.")] = None

    @field_validator("observed", "expected", mode="before")
    @classmethod
    def _cut(cls, value: object) -> object:
        """Shortened, not refused: a refusal would fail the pass that builds the status."""
        return _clip(value, 1024)


class CheckRun(StatusModel):
    """The latest run of a candidate's cutover checks."""

    checks_hash: Annotated[str, Field(
        description="Hash of spec.cutover.checks the run used: other checks need a new run.")]
    checked_at: Annotated[AwareDatetime, Field(
        description="When the pass that ran them observed the view.")]
    results: Annotated[list[CheckResult], Field(description="One result per check.")] = []

    @property
    def passed(self) -> bool:
        return all(r.outcome in (CheckOutcome.Passed, CheckOutcome.Skipped)
                   for r in self.results)

    def failing(self) -> list[CheckResult]:
        return [r for r in self.results
                if r.outcome in (CheckOutcome.Failed, CheckOutcome.Error)]


class BuildRate(StatusModel):
    """How fast a build replayed the log, measured from the ledger's commits while it built
    (kept once it is hydrated): what a later build's estimate assumes (core.log.build_rates)."""

    first_records: Annotated[int, Field(
        ge=0, description="Records the build had committed (from its history start) at the "
                          "first of its commits the operator saw.")]
    first_seconds: Annotated[float, Field(
        ge=0, description="Seconds from the attempt's start (`startedAt`) to that commit.")]
    records: Annotated[int, Field(
        ge=0, description="Records committed at the newest commit measured while it built.")]
    seconds: Annotated[float, Field(
        ge=0, description="Seconds from the attempt's start to that commit.")]
    records_per_second: Annotated[float | None, Field(
        ge=0, description="The steady replay rate: records committed per second from the "
                          "first commit seen to the newest (absent before a second commit).")
                                  ] = None


class BuildEstimate(StatusModel):
    """What a build is expected to read and take, set as it starts, so an ETA is shown before
    its first batch commits."""

    records: Annotated[int, Field(
        ge=0, description="Records the build reads: per partition of its topics, the end "
                          "offset minus the log start (or what it committed) when it started, "
                          "summed.")]
    seconds: Annotated[int, Field(
        ge=0, description="Expected seconds from its start until it holds them: "
                          "`startupSeconds`, then `records` at `recordsPerSecond`.")]
    records_per_second: Annotated[float, Field(
        ge=0, description="The replay rate assumed, in records per second.")]
    startup_seconds: Annotated[float, Field(
        ge=0, description="The start-up assumed: from the build's start until records commit "
                          "at that rate (the job's JVM, Spark session, first batch).")]
    from_revision: Annotated[str | None, Field(
        description="The revision whose measured build rate (`buildRate`) is assumed; absent: "
                    "the rate the installation sets for a first build "
                    "(DV_REPLAY_RECORDS_PER_SECOND, DV_REPLAY_STARTUP_SECONDS).")] = None


class RevisionStatus(StatusModel):
    """Everything the operator remembers about one revision."""

    revision: Annotated[str, Field(description="Content hash of the definition.")]
    index: Annotated[str, Field(description="The revision's index table.")]
    phase: Annotated[Phase, Field(description="Lifecycle phase.")]
    since: Annotated[AwareDatetime, Field(description="When the revision entered its phase.")]
    spark_application: Annotated[str, Field(description="Name of its SparkApplication.")]
    checkpoint_location: Annotated[str, Field(
        description="Checkpoint of its job; kept so a resume uses the same one.")]
    content: Annotated[RevisionContent | None, Field(
        description="Its content fields while it may need a job again (absent once torn "
                    "down): the job of an active revision is recreated from these, not from a "
                    "spec that has since changed.")] = None
    build: Annotated[int, Field(
        ge=0, description="How many times the index was rebuilt from offset 0 after being "
                          "dropped; a rebuild never reuses a spent checkpoint.")] = 0
    started_at: Annotated[AwareDatetime, Field(
        description="When the current attempt started; the cutover deadline counts from here.")]
    generation: Annotated[int, Field(
        ge=0, description="The view's generation when the current attempt started.")] = 0
    retry_token: Annotated[str | None, Field(
        description="Value of the derivedviews.io/retry annotation when the current attempt "
                    "started; a new value restarts a failed job.")] = None
    job_state: Annotated[str | None, Field(
        description="Last observed state of the SparkApplication.")] = None
    execution_attempts: Annotated[int | None, Field(
        ge=0, description="Executions the Spark Operator reported for the current job.")] = None
    lag: Annotated[Lag | None, Field(description="Latest lag.")] = None
    caught_up_since: Annotated[AwareDatetime | None, Field(
        description="Start of the current run of lag at or under the gate.")] = None
    retire_after: Annotated[AwareDatetime | None, Field(
        description="When a retiring revision's index is dropped.")] = None
    follow_until: Annotated[AwareDatetime | None, Field(
        description="Until when a retiring revision's job keeps following the log, so that a "
                    "rollback switches back at once (cutover.keepPreviousRunningSeconds).")] = None
    bad_records: Annotated[int | None, Field(
        ge=0, description="Records this revision's job left out under the bad-record policy "
                          "(skipped or dead-lettered), exactly as committed with its batches; "
                          "absent before its first batch.")] = None
    reason: Annotated[str | None, Field(
        pattern=CONDITION_REASON_PATTERN,
        description="CamelCase reason of the phase or of a problem (e.g. JobFailed).")] = None
    message: Annotated[str | None, Field(
        max_length=_DETAIL_LIMIT, description="Human-readable detail.")] = None
    checks: Annotated[CheckRun | None, Field(
        description="Latest run of the cutover checks against this revision's index (while "
                    "it is a candidate).")] = None
    source_partitions: Annotated[dict[str, int] | None, Field(
        description="Partitions of each source topic when the current build started: a topic "
                    "that grows under a revision ordering by _kafka_offset is reported.")] = None
    history_start: Annotated[dict[str, Annotated[int, Field(ge=0)]] | None, Field(
        description="Per `topic/partition`, the first offset this revision's replay read "
                    "(where Spark resolved `earliest`; a partition not listed starts at 0), "
                    "as its job recorded with its first batch: kept here so a rollback or a "
                    "comparison never needs the log again. Absent before its first batch.")
                             ] = None
    history_gaps: Annotated[dict[str, Annotated[int, Field(ge=0)]] | None, Field(
        description="Per `topic/partition`, records the log deleted (retention, "
                    "delete-records) before this revision's replay read them.")] = None
    hydration_target: Annotated[dict[str, Annotated[int, Field(ge=0)]] | None, Field(
        description="The end offsets per `topic/partition` when the current build started: "
                    "its index is hydrated once it holds every record below them, and no "
                    "gate opens before.")] = None
    hydrated_at: Annotated[AwareDatetime | None, Field(
        description="When its index first held every record of `hydrationTarget`.")] = None
    estimate: Annotated[BuildEstimate | None, Field(
        description="What its current build was expected to read and take, from its start "
                    "(absent for a build that started before estimates were kept).")] = None
    build_rate: Annotated[BuildRate | None, Field(
        description="How fast its current build replayed, measured while it built (absent "
                    "before its first commit).")] = None
    stage: Annotated[JobStage | None, Field(
        description="What its job is sized for: replay (the backlog it started with, with "
                    "more executors) or steady (following the log, spec.spark.executor); "
                    "absent: not decided yet, or a job from before stages (steady).")] = None
    replay_executors: Annotated[int | None, Field(
        ge=1, description="Executors its backlog asked for in the replay stage, decided as "
                          "its build started (spec.spark.replay.executor.instances, when set, "
                          "runs instead).")] = None

    @field_validator("message", mode="before")
    @classmethod
    def _cut(cls, value: object) -> object:
        """Shortened, not refused: a refusal would fail the pass that builds the status."""
        return _clip(value, _DETAIL_LIMIT)


class ActiveStatus(StatusModel):
    """The revision the alias serves."""

    revision: Annotated[str, Field(description="Revision readers are served from.")]
    index: Annotated[str, Field(description="Its index table.")]
    since: Annotated[AwareDatetime, Field(description="When it started serving.")]
    lag: Annotated[Lag | None, Field(description="How stale the served index is.")] = None
    bad_records: Annotated[int | None, Field(
        ge=0, description="Records this revision's job left out under the bad-record policy "
                          "(skipped or dead-lettered), exactly as committed with its batches; "
                          "absent before its first batch.")] = None


class CandidateStatus(StatusModel):
    """The spec's revision while it is built beside the active one."""

    revision: Annotated[str, Field(description="Revision being built.")]
    index: Annotated[str, Field(description="Its index table.")]
    phase: Annotated[Phase, Field(description="Its lifecycle phase.")]
    since: Annotated[AwareDatetime, Field(description="When it entered its phase.")]
    lag: Annotated[Lag | None, Field(description="Latest lag.")] = None
    caught_up_since: Annotated[AwareDatetime | None, Field(
        description="Start of the current run of lag at or under the gate.")] = None
    message: Annotated[str | None, Field(
        max_length=_DETAIL_LIMIT, description="Detail.")] = None
    bad_records: Annotated[int | None, Field(
        ge=0, description="Records this revision's job left out under the bad-record policy "
                          "(skipped or dead-lettered), exactly as committed with its batches; "
                          "absent before its first batch.")] = None
    checks: Annotated[CheckRun | None, Field(
        description="Latest run of the cutover checks against its index.")] = None
    estimate: Annotated[BuildEstimate | None, Field(
        description="What its build is expected to read and take, from its start "
                    "(`revisions[].estimate`).")] = None
    stage: Annotated[JobStage | None, Field(
        description="What its job is sized for: replay or steady (`revisions[].stage`).")
                     ] = None

    @field_validator("message", mode="before")
    @classmethod
    def _cut(cls, value: object) -> object:
        """Shortened, not refused: a refusal would fail the pass that builds the status."""
        return _clip(value, _DETAIL_LIMIT)


def shown_lag(active: ActiveStatus | None, candidate: CandidateStatus | None) -> Lag | None:
    """The lag a view is about now: the candidate's while one is built (what a
    migration waits on), else the served revision's. Feeds the LAG column and `dv status`."""
    shown = candidate if candidate is not None else active
    return shown.lag if shown is not None else None


class LagSample(StatusModel):
    """One point of a revision's lag over time, kept so people can plot a migration."""

    time: Annotated[AwareDatetime, Field(description="When the lag was measured.")]
    revision: Annotated[str, Field(description="The revision measured.")]
    messages: Annotated[int, Field(ge=0, description="Lag in messages.")]
    seconds: Annotated[int | None, Field(ge=0, description="Lag in seconds, if known.")] = None
    eta_seconds: Annotated[int | None, Field(
        ge=0, description="The ETA the lag showed then, if any.")] = None
    batch_read: Annotated[int | None, Field(
        ge=0, description="What the running batch had read of the lag then, if it reported.")
                          ] = None


class CutoverRecord(StatusModel):
    """The last alias switch, for people, dashboards and the metrics endpoint."""

    from_revision: Annotated[str | None, Field(
        alias="from", description="Revision the alias served before (absent for the first).")] = None
    to_revision: Annotated[str, Field(alias="to", description="Revision the alias serves since.")]
    gate_held_at: Annotated[AwareDatetime | None, Field(
        description="When the lag gate was first satisfied (caught up plus stableForSeconds; "
                    "absent for a rollback, which needs no gate).")] = None
    switched_at: Annotated[AwareDatetime, Field(
        description="When the pass that switched the alias observed the view.")]
    staleness_seconds: Annotated[int | None, Field(
        ge=0, description="The new revision's staleness as that pass read it (the age of the "
                          "oldest record not yet in its index; absent when unknown or for a "
                          "switch finished by a later pass).")] = None
    lag_messages: Annotated[int | None, Field(
        ge=0, description="The new revision's lag in messages as that pass read it.")] = None


class Condition(StatusModel):
    """A kstatus condition (the shape of metav1.Condition)."""

    type: Annotated[str, Field(
        max_length=316, description="Ready, Reconciling, Stalled, CaughtUp or Degraded.")]
    status: Annotated[Literal["True", "False", "Unknown"], Field(
        description="True, False or Unknown.")]
    reason: Annotated[str, Field(
        min_length=1, max_length=1024, pattern=CONDITION_REASON_PATTERN,
        description="CamelCase reason for the condition's last transition.")]
    # The schema keeps metav1.Condition's 32768 so statuses written before the cut still
    # validate; what is written is cut to CONDITION_MESSAGE_LIMIT.
    message: Annotated[str, Field(max_length=32768, description="Human-readable detail.")] = ""
    last_transition_time: Annotated[AwareDatetime, Field(
        description="When the status last changed.")]
    observed_generation: Annotated[int | None, Field(
        ge=0, description="The view generation the condition reflects.")] = None

    # The schema keeps metav1.Condition's 32768, so statuses written before the cut still
    # read; what the operator writes is cut to CONDITION_MESSAGE_LIMIT.
    @field_validator("message", mode="before")
    @classmethod
    def _cut(cls, value: object) -> object:
        """Shortened, not refused: a refusal would fail the pass that builds the status."""
        return _clip(value, CONDITION_MESSAGE_LIMIT)


class Intent(StatusModel):
    """What the operator set out to do, recorded before doing it.

    A restarted operator finds it and finishes the job: for a cutover whose
    alias switch landed, it completes the bookkeeping instead of deciding
    afresh. Cleared by the status update that ends a successful pass.
    """

    steps: Annotated[list[str], Field(description="The actions, in order.")] = []
    cutover_to: Annotated[str | None, Field(
        description="Revision the alias is being switched to, when the steps include a "
                    "cutover.")] = None
    cutover_from: Annotated[str | None, Field(
        description="Revision the alias served before that cutover.")] = None
    recorded_at: Annotated[AwareDatetime, Field(description="When the intent was recorded.")]


class TopicLog(StatusModel):
    """What a source topic's configuration says about the history its log keeps."""

    topic: Annotated[str, Field(description="The topic.")]
    cleanup_policy: Annotated[str, Field(
        description="`cleanup.policy`: delete, compact or compact,delete. A compacted topic "
                    "keeps the latest record per key: a replay reads that, not every "
                    "event.")]
    retention_ms: Annotated[int | None, Field(
        description="`retention.ms` (-1: forever).")] = None
    retention_bytes: Annotated[int | None, Field(
        description="`retention.bytes` (-1: no limit).")] = None
    remote_storage: Annotated[bool, Field(
        description="`remote.storage.enable`: tiered storage keeps old segments.")] = False


class DerivedViewStatus(StatusModel):
    """Observed state, written by the operator only."""

    observed_generation: Annotated[int | None, Field(
        ge=0, description="The spec generation last reconciled.")] = None
    phase: Annotated[ViewPhase | None, Field(
        description="Summary: the candidate's phase, else Active (serving the spec's revision) "
                    "or Pending; Deleting during deletion.")] = None
    revision: Annotated[str | None, Field(
        description="The spec's current revision (content hash).")] = None
    active: Annotated[ActiveStatus | None, Field(
        description="The revision the alias serves.")] = None
    candidate: Annotated[CandidateStatus | None, Field(
        description="The spec's revision while it is built beside the active one.")] = None
    lag_messages: Annotated[int | None, Field(
        ge=0, description="The lag the phase is about: the candidate's while one is built, "
                          "else the served revision's (the LAG printer column).")] = None
    bad_records: Annotated[int | None, Field(
        ge=0, description="Records left out under the bad-record policy by the same revision "
                          "as lagMessages (the BAD printer column); per revision in "
                          "`revisions`.")] = None
    checks: Annotated[str | None, Field(
        description="The candidate's cutover checks in a few words (the CHECKS printer "
                    "column): `3/3 passed`, `rowCount failed`, `pending`.")] = None
    revisions: Annotated[list[RevisionStatus], Field(
        json_schema_extra={"x-kubernetes-list-type": "map",
                           "x-kubernetes-list-map-keys": ["revision"]},
        description="Every revision the operator still tracks.")] = []
    spent_builds: Annotated[dict[str, Annotated[int, Field(ge=0)]], Field(
        description="Last build number of revisions dropped from `revisions`, so a rebuild "
                    "of one of them still gets a fresh checkpoint.")] = {}
    spent_builds_floor: Annotated[int | None, Field(
        ge=0, description="Builds of revisions forgotten from `spentBuilds` (it is bounded) are "
                          "all below this: a revision not named there starts at this build.")
                                  ] = None
    held_secrets: Annotated[list[str], Field(
        description="Secrets on which the operator holds the derivedviews.io/sink-secret "
                    "finalizer for this view (deletionPolicy Delete: the sink Secret, and the "
                    "checkpoint Secret for s3a:// checkpoints), so its cleanup can still reach "
                    "the database and the store while the namespace is deleted.")] = []
    conditions: Annotated[list[Condition], Field(
        json_schema_extra={"x-kubernetes-list-type": "map",
                           "x-kubernetes-list-map-keys": ["type"]},
        description="kstatus conditions: Ready, Reconciling, Stalled, CaughtUp, Degraded.")] = []
    intent: Annotated[Intent | None, Field(
        description="The actions being carried out, recorded before acting.")] = None
    last_cutover: Annotated[CutoverRecord | None, Field(
        description="The last alias switch.")] = None
    source_logs: Annotated[list[TopicLog], Field(
        max_length=100,
        description="Retention and cleanup of each source topic, as last read (every few "
                    "minutes): what a replay of it can hold (docs/history.md).")] = []
    lag_history: Annotated[list[LagSample], Field(
        description="Bounded history of the active's and the candidate's lag, oldest first "
                    "(sampled when it changed, at most every DV_LAG_HISTORY_SECONDS per revision; a "
                    "sample holds until the next).")] = []

    def condition(self, type_: str) -> Condition | None:
        """The condition of this type, if recorded."""
        return next((c for c in self.conditions if c.type == type_), None)

    def record(self, revision: str) -> RevisionStatus | None:
        """The tracked record of a revision, if any."""
        return next((r for r in self.revisions if r.revision == revision), None)

