"""Every reason the operator writes, in one catalogue: conditions', revision records' and
Events'.

Tools match on these strings (`kubectl wait`, Argo CD's health script, alert rules, the
CLI), so each has one spelling, said here; renaming one is an API change. A module that
decides a reason imports it from here, and nothing else defines one.
"""

from __future__ import annotations

from typing import Final

# --- calm and in-progress ------------------------------------------------------------
AS_EXPECTED: Final = "AsExpected"
"""Degraded and Stalled when nothing is wrong."""
RECONCILED: Final = "Reconciled"
"""Reconciling is False: the view is where its spec says."""
STARTING: Final = "Starting"
"""The desired revision's job is about to be created."""
PENDING: Final = "Pending"
"""Ready is False: nothing serves yet and no candidate builds."""
SERVING: Final = "Serving"
"""Ready is True: the alias points at the active revision's index."""
DELETING: Final = "Deleting"
PAUSED: Final = "Paused"
"""The paused annotation is true: status only, no actions."""
AWAITING_PROMOTION: Final = "AwaitingPromotion"
"""Manual cutover: the gate holds, the promote annotation does not name the candidate."""
BACKFILLING: Final = "Backfilling"
"""Reconciling: the candidate replays (the candidate's phase, said as a reason)."""
REPLAY_STAGE: Final = "ReplayStage"
"""Reconciling: the candidate's gate holds while its job still runs in its replay stage; it
is restarted in its steady stage before readers switch (core.job.stages)."""
JOB_STARTING: Final = "JobStarting"
"""Reconciling: the candidate's gate holds, but its job is not running, or records wait
that its current driver has not committed a batch of yet (a restart); readers switch once a
running driver keeps the index fresh."""
CAUGHT_UP_REASON: Final = "CaughtUp"
"""Reconciling: the candidate is within the gate, not yet stable for long enough."""
BELOW_MIN_ROWS: Final = "BelowMinRows"
"""Reconciling: a first revision's index holds fewer rows than cutover.minRows: not served."""
CHECKING: Final = "Checking"
"""Reconciling: the gate holds and the cutover checks run (or wait to)."""
BEHIND_ACTIVE: Final = "BehindActive"
"""Reconciling: the sink deferred the switch: the candidate stayed behind the serving index
on a partition, and switching would take readers back in time (core.cutover.monotonic)."""

# --- lag (CaughtUp) ---------------------------------------------------------------------
LAG_WITHIN_GATE: Final = "LagWithinGate"
LAG_ABOVE_GATE: Final = "LagAboveGate"
LAG_UNKNOWN: Final = "LagUnknown"

# --- the spec --------------------------------------------------------------------------
INVALID_SPEC: Final = "InvalidSpec"
"""The spec does not validate (pydantic): a view stored before a limit was tightened."""
SPEC_NOT_JUDGED: Final = "SpecNotJudged"
"""Judging the spec raised: the operator cannot say whether it may run."""
INVALID_SCHEMA: Final = "InvalidSchema"
INVALID_TRANSFORM: Final = "InvalidTransform"
POLICY_VIOLATION: Final = "PolicyViolation"
"""Everything the tenancy policy refuses (core.judges.tenancy, core.judges.transform_policy)."""
CHECKPOINT_NOT_DURABLE: Final = "CheckpointNotDurable"
JOB_NAMESPACE_MISSING: Final = "JobNamespaceMissing"
"""The view's jobs run in a job namespace (DV_JOB_NAMESPACE) that does not exist or is not
labelled as this namespace's: no job starts (running ones are left alone)."""

# --- Secrets, Kafka, the sink ------------------------------------------------------------
SECRET_MISSING: Final = "SecretMissing"
"""A Secret the view names does not exist: said alike by the sink reading and the job."""
SECRET_NOT_LABELLED: Final = "SecretNotLabelled"
SINK_SECRET_INVALID: Final = "SinkSecretInvalid"
SINK_UNREACHABLE: Final = "SinkUnreachable"
SINK_TABLE_CLAIMED: Final = "SinkTableClaimed"
KAFKA_SECRET_MISSING: Final = "KafkaSecretMissing"
KAFKA_SECRET_INVALID: Final = "KafkaSecretInvalid"
KAFKA_UNAVAILABLE: Final = "KafkaUnavailable"
TOPIC_MISSING: Final = "TopicMissing"
SCHEMA_REGISTRY_SECRET_INVALID: Final = "SchemaRegistrySecretInvalid"
"""The registry Secret exists but cannot make a connection (no url, half the credentials)."""
SCHEMA_REGISTRY_UNREACHABLE: Final = "SchemaRegistryUnreachable"
"""The registry did not answer, refused the credentials, or answered what is not the
Confluent API: no job of the view starts until it does."""
READER_SCHEMA_NOT_FOUND: Final = "ReaderSchemaNotFound"
"""The reader schema's pinned subject or version is not in the registry (or not Avro)."""
SUBJECT_NOT_FOUND: Final = "SubjectNotFound"
"""A Warning Event: no schema under a topic's `<topic>-value` subject when a job starts."""
TOPIC_RESET: Final = "TopicReset"
HISTORY_INCOMPLETE: Final = "HistoryIncomplete"
"""A revision's index would hold less history than readers have (or, for a first revision,
than the log had from offset 0): retention or delete-records removed records before its
replay read them. Not promoted under `source.history: complete`."""
HYDRATING: Final = "Hydrating"
"""CaughtUp is False: the revision's index does not yet hold every record that existed when
it was created; no gate opens before (core.log.history)."""
STALE: Final = "Stale"
"""Ready is False: the serving index is older than the gate (its job stopped, restarts or
falls behind); Ready returns once it is back within the gate."""
PARTITIONS_GREW: Final = "PartitionsGrew"

# --- indexes and the alias ---------------------------------------------------------------
INDEX_MISSING: Final = "IndexMissing"
INDEX_LOST: Final = "IndexLost"
INDEX_OWNED_BY_ANOTHER_VIEW: Final = "IndexOwnedByAnotherView"
ALIAS_MISDIRECTED: Final = "AliasMisdirected"
# why a switch is refused (adapters' SwitchRefused / SwitchBlocker)
SCHEMA_PRIVILEGES: Final = "SchemaPrivileges"
ALIAS_OWNER: Final = "AliasOwner"
ALIAS_DEPENDENTS: Final = "AliasDependents"
ALIAS_GRANTS: Final = "AliasGrants"
INDEX_NOT_READABLE: Final = "IndexNotReadable"
ALIAS_NAME_TAKEN: Final = "AliasNameTaken"

# --- the job -----------------------------------------------------------------------------
JOB_FAILED: Final = "JobFailed"
JOB_COMPLETED: Final = "JobCompleted"
JOB_SUSPENDED: Final = "JobSuspended"
CONFIG_MAP_MISSING: Final = "ConfigMapMissing"
IMAGE_PULL_FAILED: Final = "ImagePullFailed"
DRIVER_PENDING: Final = "DriverPending"
DEADLINE_EXCEEDED: Final = "DeadlineExceeded"
PROGRESS_DEADLINE_EXCEEDED: Final = "ProgressDeadlineExceeded"

# --- cutover checks ----------------------------------------------------------------------
CHECK_FAILED: Final = "CheckFailed"
CHECK_ERROR: Final = "CheckError"
CHECKS_PASSED: Final = "ChecksPassed"

# --- deletion ----------------------------------------------------------------------------
DELETION_BLOCKED: Final = "DeletionBlocked"
LEFT_BEHIND: Final = "LeftBehind"

# --- revision records and Events: what happened ------------------------------------------
BACKFILL_STARTED: Final = "BackfillStarted"
ROLLBACK_STARTED: Final = "RollbackStarted"
RESUMED: Final = "Resumed"
JOB_RESTARTED: Final = "JobRestarted"
STEADY_STAGE_STARTED: Final = "SteadyStageStarted"
"""A candidate's replay is in its index: its job restarted from its checkpoint with the
steady stage's size, before the switch."""
RETRY_STARTED: Final = "RetryStarted"
PROMOTED: Final = "Promoted"
REPLACED: Final = "Replaced"
SUPERSEDED: Final = "Superseded"
RETIRED: Final = "Retired"
CUTOVER_COMPLETED: Final = "CutoverCompleted"
ALIAS_REPAIRED: Final = "AliasRepaired"
DELETED: Final = "Deleted"
