"""Operator settings, from the environment (the chart sets them).

Read once at start-up; everything downstream receives a `Settings`, so the
core never reads the environment itself.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from derived_views.core.installation import DEFAULT_TRIGGER_SECONDS, OperatorConfig
from derived_views.core.job.checkpoints import EXAMPLE_BASE, SECRET_KEYS, durable_base_problem
from derived_views.core.judges.tenancy import PolicyError, TenancyPolicy, parse_policy
from derived_views.core.naming import job_namespace_problem

DEFAULT_CHECKPOINT_BASE = "/tmp/derived-views/checkpoints"
"""Only usable outside a cluster (driver and executors on one machine); see core.job.checkpoints."""


class SettingsError(ValueError):
    """An operator setting is malformed; the message names the variable."""


def _float(env: Mapping[str, str], name: str, default: float, minimum: float) -> float:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r} is not a number") from None
    if value < minimum:
        raise SettingsError(f"{name}={raw!r} must be at least {minimum}")
    return value


@dataclass(frozen=True)
class Settings:
    lag_poll_seconds: float
    """How often lag is refreshed (and end offsets fetched, once per Kafka cluster)."""
    settled_poll_seconds: float
    """How often a settled view (core.cadence) is passed when nothing it watches changed."""
    spark_image: str
    main_application_file: str
    spark_jars: tuple[str, ...]
    checkpoint_base: str
    spark_service_account: str | None
    spark_template: str | None
    """Path of the SparkApplication template; None means the checkout's spark_templates/."""
    trigger_seconds: float = DEFAULT_TRIGGER_SECONDS
    """DV_TRIGGER_SECONDS: the micro-batch interval of the jobs created from now on."""
    lag_history_seconds: int = 10
    """Spacing of `status.lagHistory` samples per revision (what `dv plot` draws)."""
    metrics_port: int = 0
    """Port of the Prometheus endpoint; 0 turns it off."""
    checkpoint_secret: str | None = None
    """Secret (in each view's namespace) with the S3 credentials of s3a:// checkpoints."""
    checkpoint_s3_endpoint: str | None = None
    checkpoint_s3_region: str | None = None
    in_cluster: bool = False
    """Running in a pod (KUBERNETES_SERVICE_HOST is set): checkpoints must be durable."""
    tenancy: TenancyPolicy = field(default_factory=TenancyPolicy)
    """DV_TENANCY_POLICY: what views' authors may choose; unset: the strict defaults."""
    sink_pool_size: int = 4
    """DV_SINK_POOL_SIZE: connections kept per sink database and role, shared by its views."""
    check_concurrency: int = 2
    """DV_CHECK_CONCURRENCY: cutover-check runs measuring at once, across all views (each
    holds one sink connection), off the pass threads."""
    check_budget_seconds: float = 300.0
    """DV_CHECK_BUDGET_SECONDS: what all queries of one view's check run may take together."""
    job_namespace: str = ""
    """DV_JOB_NAMESPACE: where views' jobs run, `{namespace}` standing for the view's
    (core.installation.OperatorConfig.job_namespace); "" is the view's own namespace."""
    operator_namespace: str = ""
    """DV_OPERATOR_NAMESPACE (the chart sets it from the pod's namespace): where the
    checkpoint Secret is copied from into job namespaces."""


def operator_config(settings: Settings, template: str) -> OperatorConfig:
    """The planner's view of the installation."""
    return OperatorConfig(spark_template=template, spark_image=settings.spark_image,
                          checkpoint_base=settings.checkpoint_base,
                          main_application_file=settings.main_application_file,
                          spark_jars=settings.spark_jars,
                          spark_service_account=settings.spark_service_account,
                          lag_history_seconds=settings.lag_history_seconds,
                          trigger_seconds=settings.trigger_seconds,
                          checkpoint_secret=settings.checkpoint_secret,
                          checkpoint_s3_endpoint=settings.checkpoint_s3_endpoint,
                          checkpoint_s3_region=settings.checkpoint_s3_region,
                          in_cluster=settings.in_cluster, tenancy=settings.tenancy,
                          job_namespace=settings.job_namespace,
                          operator_namespace=settings.operator_namespace)


def from_env(env: Mapping[str, str] | None = None) -> Settings:
    e = os.environ if env is None else env
    checkpoint_base = e.get("DV_CHECKPOINT_BASE") or DEFAULT_CHECKPOINT_BASE
    in_cluster = bool(e.get("KUBERNETES_SERVICE_HOST"))
    problem = durable_base_problem(checkpoint_base, in_cluster)
    if problem is not None:
        raise SettingsError(
            f"DV_CHECKPOINT_BASE: {problem}: set DV_CHECKPOINT_BASE={EXAMPLE_BASE} and "
            "DV_CHECKPOINT_SECRET to a Secret in each view's namespace with keys "
            f"{' and '.join(SECRET_KEYS)} (chart: spark.checkpointBase, "
            "spark.checkpointSecretName)")
    try:
        tenancy = parse_policy(e.get("DV_TENANCY_POLICY"))
    except PolicyError as exc:
        raise SettingsError(f"{exc} (chart: tenancy)") from None
    return Settings(
        lag_poll_seconds=_float(e, "DV_LAG_POLL_SECONDS", 5.0, 0.5),
        settled_poll_seconds=_float(e, "DV_SETTLED_POLL_SECONDS", 300.0, 1.0),
        spark_image=e.get("DV_SPARK_IMAGE", "derived-views/spark-job:0.1.0"),
        main_application_file=e.get(
            "DV_MAIN_APPLICATION_FILE",
            "local:///opt/derived-views/spark_templates/derived_view_job.py"),
        spark_jars=tuple(j for j in e.get("DV_SPARK_JARS", "").split(",") if j),
        checkpoint_base=checkpoint_base,
        spark_service_account=e.get("DV_SPARK_SERVICE_ACCOUNT") or None,
        spark_template=e.get("DV_SPARK_TEMPLATE") or None,
        lag_history_seconds=int(_float(e, "DV_LAG_HISTORY_SECONDS", 10, 1)),
        trigger_seconds=_float(e, "DV_TRIGGER_SECONDS", DEFAULT_TRIGGER_SECONDS, 0.1),
        metrics_port=_port(e, "DV_METRICS_PORT"),
        checkpoint_secret=e.get("DV_CHECKPOINT_SECRET") or None,
        checkpoint_s3_endpoint=_endpoint(e, "DV_CHECKPOINT_S3_ENDPOINT"),
        checkpoint_s3_region=e.get("DV_CHECKPOINT_S3_REGION") or None,
        in_cluster=in_cluster,
        tenancy=tenancy,
        sink_pool_size=_count(e, "DV_SINK_POOL_SIZE", 4),
        check_concurrency=_count(e, "DV_CHECK_CONCURRENCY", 2),
        check_budget_seconds=_float(e, "DV_CHECK_BUDGET_SECONDS", 300.0, 1.0),
        job_namespace=_job_namespace(e),
        operator_namespace=e.get("DV_OPERATOR_NAMESPACE", ""),
    )


def _job_namespace(env: Mapping[str, str]) -> str:
    template = (env.get("DV_JOB_NAMESPACE") or "").strip()
    problem = job_namespace_problem(template)
    if problem is not None:
        raise SettingsError(f"DV_JOB_NAMESPACE={problem} (chart: jobs.namespace)")
    if template and env.get("DV_CHECKPOINT_SECRET") and not env.get("DV_OPERATOR_NAMESPACE"):
        raise SettingsError("DV_JOB_NAMESPACE with DV_CHECKPOINT_SECRET needs "
                            "DV_OPERATOR_NAMESPACE: the namespace the checkpoint Secret is "
                            "copied from into job namespaces (the chart sets it)")
    return template


def _endpoint(env: Mapping[str, str], name: str) -> str | None:
    raw = (env.get(name) or "").strip()
    if not raw:
        return None
    if not raw.startswith(("http://", "https://")) or raw in ("http://", "https://"):
        raise SettingsError(f"{name}={raw!r} must be a URL such as http://minio.storage:9000")
    return raw


def _count(env: Mapping[str, str], name: str, default: int) -> int:
    value = _float(env, name, default, 1)
    if value != int(value):
        raise SettingsError(f"{name}={env.get(name)!r} is not a whole number")
    return int(value)


def _port(env: Mapping[str, str], name: str) -> int:
    value = _float(env, name, 0, 0)
    if value != int(value) or value > 65535:
        raise SettingsError(f"{name}={env.get(name)!r} is not a port number (0 turns it off)")
    return int(value)
