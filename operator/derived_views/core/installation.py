"""The installation (not the view): operator settings the planner needs to write manifests, as
plain values read by the shell."""

from __future__ import annotations

from dataclasses import dataclass, field

from derived_views.core.judges.tenancy import TenancyPolicy
from derived_views.core.naming import LEDGER_TABLE, job_namespace

DEFAULT_MAIN_APPLICATION_FILE = "local:///opt/derived-views/spark_templates/derived_view_job.py"

DEFAULT_TRIGGER_SECONDS = 1.0
"""A view's job runs until deleted, one micro-batch per second at most: an index about a
second behind its log. Each micro-batch that finds new records costs the driver a plan, a
checkpoint commit and a sink transaction, whatever its size, so a platform with many quiet
views may trade freshness for CPU (DV_TRIGGER_SECONDS)."""


@dataclass(frozen=True)
class OperatorConfig:
    """Everything about the installation (not the view) that shapes a plan.

    The shell builds it once at start-up (environment, the template file);
    the planner only reads it, so tests pass any values they like.
    """

    spark_template: str
    """Text of spark_templates/sparkapplication.yaml (see core.job.sparkapplication.load_template)."""
    spark_image: str
    """Job image when the view does not name one."""
    checkpoint_base: str
    """Checkpoint root when the view does not name one."""
    checkpoint_secret: str | None = None
    """Secret in each view's namespace with AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY for
    s3a:// checkpoints (driver and executor env, and the operator's own deletes)."""
    checkpoint_s3_endpoint: str | None = None
    """S3 endpoint of a non-AWS store (`fs.s3a.endpoint`, path-style access)."""
    checkpoint_s3_region: str | None = None
    """`fs.s3a.endpoint.region` for s3a:// checkpoints."""
    in_cluster: bool = False
    """The operator runs in a pod: checkpoints must be on a store every pod reaches
    (see core.job.checkpoints.durable_base_problem)."""
    main_application_file: str = DEFAULT_MAIN_APPLICATION_FILE
    spark_jars: tuple[str, ...] = ()
    """`deps.jars`: the Kafka connector jars (and anything else every job needs)."""
    spark_service_account: str | None = None
    ledger_table: str = LEDGER_TABLE
    deletion_sink_grace_seconds: int = 300
    """With deletionPolicy Delete, how long deletion waits for an unreachable sink before it
    removes the finalizer anyway (a namespace being deleted may already have lost the Secret)."""
    history_limit: int = 10
    """Finished revisions (Superseded, Retired, aborted) kept in status for people to read."""
    trigger_seconds: float = DEFAULT_TRIGGER_SECONDS
    """Micro-batch interval written into every job created from now on (DV_TRIGGER_SECONDS)."""
    lag_history_seconds: int = 10
    """Minimum spacing of `status.lagHistory` samples of one revision."""
    lag_history_limit: int = 360
    """Samples kept in `status.lagHistory` (oldest dropped first)."""
    tenancy: TenancyPolicy = field(default_factory=TenancyPolicy)
    job_namespace: str = ""
    """DV_JOB_NAMESPACE: where a view's jobs run, `{namespace}` standing for the view's (e.g.
    `{namespace}-dv-jobs`): a namespace the view's authors have no rights in, so they can
    neither exec into a job nor read the Secrets mounted there (the platform's checkpoint
    Secret among them). The operator copies the view's Secrets there for its jobs. "" runs
    the jobs in the view's own namespace (docs/security.md, "Where jobs run")."""
    operator_namespace: str = ""
    """The operator's own namespace: where the checkpoint Secret is copied from into job
    namespaces that do not hold one of the platform's making."""

    def jobs_of(self, namespace: str) -> str:
        """The namespace where the jobs of views in `namespace` run."""
        return job_namespace(self.job_namespace, namespace)
    """What views' authors may choose (the chart's `tenancy` values)."""
