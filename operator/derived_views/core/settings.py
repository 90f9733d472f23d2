"""The operator's settings: one object, read once at start-up (process.environment, from the
environment the chart sets), handed to every pass (`Deps.settings`, `Observed.settings`,
`Context.settings`) and never changed. The planner only reads it, so tests pass any values.

Its words, one per thing (docs/glossary.md):

- `spark`: how the jobs run: the SparkApplication template (`template`, its text; the path it
  was read from is `template_path`), the job `image` and `main_application_file` a view gets
  unless it names its own, the `jars` every job needs, the drivers' `service_account`, and
  `trigger_seconds`, the micro-batch interval of the jobs created from now on (None: each
  view's own, from its gate: `trigger_of`), the replay rate and start-up a view's first
  build is expected to take (`replay_records_per_second`, `replay_startup_seconds`), and the
  replay stage's sizing (`replay_min_backlog`, `replay_records_per_executor`,
  `replay_max_executors`: core.job.stages).
- `checkpoints`: where jobs checkpoint (`base`), the Secret with the store's keys (`secret`),
  a non-AWS store's `s3_endpoint` and `s3_region`.
- `jobs`: where a view's jobs run (`namespace`, a template with `{namespace}`; "" is the
  view's own) and the operator's own namespace (`operator_namespace`).
- `polling`: how often a view is passed (`lag_seconds`, `settled_seconds`) and how its lag
  history is sampled (`history_seconds`, `history_limit`).
- `sinks`: connections kept per sink database and role (`pool_size`), the ledger table, how
  long deletion waits for an unreachable sink (`deletion_grace_seconds`).
- `checks`: cutover-check runs measuring at once (`concurrency`) and what one run's queries
  may take together (`budget_seconds`).
- `tenancy`: what views' authors may choose (core.judges.tenancy).
- `metrics_port`, `in_cluster` and `history_limit` (finished revisions kept in status).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from derived_views.api.spec import Cutover
from derived_views.core.judges.tenancy import TenancyPolicy
from derived_views.core.naming import LEDGER_TABLE, job_namespace

DEFAULT_MAIN_APPLICATION_FILE = "local:///opt/derived-views/spark_templates/derived_view_job.py"
DEFAULT_SPARK_IMAGE = "derived-views/spark-job:0.1.0"

MIN_TRIGGER_SECONDS = 1.0
"""The shortest interval a view's gate gives its job (and what a messages-only gate gets)."""
MAX_TRIGGER_SECONDS = 60.0
"""The longest: a view whose gate allows minutes still shows a record within a minute."""


def gate_trigger_seconds(max_lag_seconds: int) -> float:
    """A job's micro-batch interval, from the staleness its view's gate allows
    (`cutover.maxLagSeconds`): half of it, between MIN_ and MAX_TRIGGER_SECONDS.

    Why half: a record waits up to one interval for the next batch and then for that batch to
    commit, so the oldest record not in the index is up to an interval plus a batch old; half
    the gate leaves the other half for the batch, a slow one included, and the gate holds
    without a pause. Why from the gate: a serving job's cost is per batch, whatever the batch
    holds (a plan, a checkpoint commit, a sink transaction: about 0.6 of a core-second on a
    small driver), so the interval is freshness bought with CPU, and the gate is where the
    view's author says how much freshness the readers need. The default gate (10 s) gives
    5 s: a fifth of the per-batch cost of a 1 s interval, an index at most about 6 s
    behind its log. A gate of 0 (messages only) asks for the freshest index: the minimum."""
    if max_lag_seconds <= 0:
        return MIN_TRIGGER_SECONDS
    return min(max(max_lag_seconds / 2, MIN_TRIGGER_SECONDS), MAX_TRIGGER_SECONDS)


DEFAULT_REPLAY_RECORDS_PER_SECOND = 40_000.0
"""docs/performance.md on a 2-core machine: the `mirror` shape (every event an index row: the
sink-bound, slower shape) replays at a steady 41,210 records/s from 4,000,000 events, and
between 30,750 and 45,623 from 0.5 to 4 million; the Spark-bound `aggregate` at 42,035 to
116,056. An installation measures its own (`make bench`) and sets it."""
DEFAULT_REPLAY_STARTUP_SECONDS = 30.0
"""docs/performance.md, "Apply to Ready": the first ledger commit about 30 s after the
SparkApplication is created (JVM, Spark session, a first batch of 50,000 records)."""

DEFAULT_REPLAY_MIN_BACKLOG = 2_000_000
"""Records a build must have to read before its job runs a replay stage (core.job.stages):
about where the replay stage pays for its restart. A steady job runs without PySpark's
daemon, which made a mirror replay measure 35,700 instead of 60,000 records/s: over 2,000,000
records that is some 20 s, what a restart into the steady stage costs. A smaller backlog
starts steady: no restart (apply to Ready of a 50,000-record view stays one job start)."""
DEFAULT_REPLAY_RECORDS_PER_EXECUTOR = 5_000_000
"""Records of the backlog per replay executor: about two minutes of one executor's work at
the rate above."""
DEFAULT_REPLAY_MAX_EXECUTORS = 8
"""The most executors a derived replay stage asks for (a view's spec may name more)."""

DEFAULT_CHECKPOINT_BASE = "/tmp/derived-views/checkpoints"
"""Only usable outside a cluster (driver and executors on one machine); see
core.job.checkpoints."""


@dataclass(frozen=True)
class SparkSettings:
    """How the jobs run."""

    template: str = ""
    """Text of the SparkApplication template (core.job.sparkapplication.load_template)."""
    template_path: str | None = None
    """DV_SPARK_TEMPLATE: where the template was read from; None: the checkout's."""
    image: str = DEFAULT_SPARK_IMAGE
    """DV_SPARK_IMAGE: the job image when a view names none."""
    main_application_file: str = DEFAULT_MAIN_APPLICATION_FILE
    jars: tuple[str, ...] = ()
    """DV_SPARK_JARS: `deps.jars`, the Kafka connector jars and anything every job needs."""
    service_account: str | None = None
    """DV_SPARK_SERVICE_ACCOUNT: the drivers' and executors' account."""
    trigger_seconds: float | None = None
    """DV_TRIGGER_SECONDS: one interval for every job created from now on; None (the
    default): each view's from its gate (gate_trigger_seconds)."""

    replay_records_per_second: float = DEFAULT_REPLAY_RECORDS_PER_SECOND
    """DV_REPLAY_RECORDS_PER_SECOND: the replay rate a view's first build is expected to reach,
    before any build of the view is measured (core.log.build_rates)."""
    replay_startup_seconds: float = DEFAULT_REPLAY_STARTUP_SECONDS
    """DV_REPLAY_STARTUP_SECONDS: what such a build is expected to take before it commits at
    that rate."""

    replay_min_backlog: int = DEFAULT_REPLAY_MIN_BACKLOG
    """DV_REPLAY_MIN_BACKLOG: records a build must have to read for its job to start in the
    replay stage; below, it starts steady (core.job.stages)."""
    replay_records_per_executor: int = DEFAULT_REPLAY_RECORDS_PER_EXECUTOR
    """DV_REPLAY_RECORDS_PER_EXECUTOR: the backlog one replay executor is given."""
    replay_max_executors: int = DEFAULT_REPLAY_MAX_EXECUTORS
    """DV_REPLAY_MAX_EXECUTORS: the most executors a replay stage derives."""

    def trigger_of(self, cutover: Cutover) -> float:
        """The micro-batch interval of a view's jobs: the installation's, else its gate's."""
        if self.trigger_seconds is not None:
            return self.trigger_seconds
        return gate_trigger_seconds(cutover.max_lag_seconds)


@dataclass(frozen=True)
class CheckpointSettings:
    """Where the jobs checkpoint."""

    base: str = DEFAULT_CHECKPOINT_BASE
    """DV_CHECKPOINT_BASE: the root when a view names none."""
    secret: str | None = None
    """DV_CHECKPOINT_SECRET: the Secret with AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY for
    s3a:// checkpoints (mounted into the jobs; read for the operator's own deletes)."""
    s3_endpoint: str | None = None
    """DV_CHECKPOINT_S3_ENDPOINT: a non-AWS store (`fs.s3a.endpoint`, path-style access)."""
    s3_region: str | None = None
    """DV_CHECKPOINT_S3_REGION: `fs.s3a.endpoint.region`."""


@dataclass(frozen=True)
class JobPlacement:
    """Where a view's jobs run (docs/security.md, "Where jobs run")."""

    namespace: str = ""
    """DV_JOB_NAMESPACE: `{namespace}` standing for the view's (e.g. `{namespace}-dv-jobs`): a
    namespace the view's authors have no rights in, so they can neither exec into a job nor
    read the Secrets mounted there; the operator copies the view's Secrets there. "" runs
    the jobs in the view's own namespace."""
    operator_namespace: str = ""
    """DV_OPERATOR_NAMESPACE: where the checkpoint Secret is copied from into job namespaces
    that do not hold one of the platform's making."""


@dataclass(frozen=True)
class PollSettings:
    """How often a view is passed, and its lag sampled."""

    lag_seconds: float = 5.0
    """DV_LAG_POLL_SECONDS: a view that is not settled is passed this often."""
    settled_seconds: float = 300.0
    """DV_SETTLED_POLL_SECONDS: a settled view (core.cadence) when nothing it watches moved."""
    history_seconds: int = 10
    """DV_LAG_HISTORY_SECONDS: minimum spacing of `status.lagHistory` samples per revision."""
    history_limit: int = 360
    """Samples kept in `status.lagHistory` (oldest dropped first)."""


@dataclass(frozen=True)
class SinkSettings:
    """The operator's side of the sinks."""

    pool_size: int = 4
    """DV_SINK_POOL_SIZE: connections kept per sink database and role, shared by its views."""
    ledger_table: str = LEDGER_TABLE
    deletion_grace_seconds: int = 300
    """With deletionPolicy Delete, how long deletion waits for an unreachable sink before it
    removes the finalizer anyway (a namespace being deleted may already have lost the Secret)."""


@dataclass(frozen=True)
class CheckSettings:
    """The cutover checks' runner."""

    concurrency: int = 2
    """DV_CHECK_CONCURRENCY: check runs measuring at once, across all views (each holds one
    sink connection), off the pass threads."""
    budget_seconds: float = 300.0
    """DV_CHECK_BUDGET_SECONDS: what all queries of one view's check run may take together."""


@dataclass(frozen=True)
class Settings:
    """Everything about the installation (not the view) that shapes a pass; see the module
    docstring for its words."""

    spark: SparkSettings = field(default_factory=SparkSettings)
    checkpoints: CheckpointSettings = field(default_factory=CheckpointSettings)
    jobs: JobPlacement = field(default_factory=JobPlacement)
    polling: PollSettings = field(default_factory=PollSettings)
    sinks: SinkSettings = field(default_factory=SinkSettings)
    checks: CheckSettings = field(default_factory=CheckSettings)
    tenancy: TenancyPolicy = field(default_factory=TenancyPolicy)
    """DV_TENANCY_POLICY: what views' authors may choose (the chart's `tenancy` values)."""
    metrics_port: int = 0
    """DV_METRICS_PORT: the Prometheus endpoint; 0 turns it off."""
    in_cluster: bool = False
    """The operator runs in a pod (KUBERNETES_SERVICE_HOST): checkpoints must be on a store
    every pod reaches (core.job.checkpoints.durable_base_problem)."""
    history_limit: int = 10
    """Finished revisions (Superseded, Retired, aborted) kept in status for people to read."""

    def jobs_of(self, namespace: str) -> str:
        """The namespace where the jobs of views in `namespace` run."""
        return job_namespace(self.jobs.namespace, namespace)
