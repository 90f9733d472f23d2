"""The operator's settings, from the environment (the chart sets it): read once at
start-up into one core.settings.Settings, so the core never reads the environment."""

from __future__ import annotations

import os
from collections.abc import Mapping

from derived_views.core.job.checkpoints import EXAMPLE_BASE, SECRET_KEYS, durable_base_problem
from derived_views.core.judges.tenancy import PolicyError, parse_policy
from derived_views.core.naming import job_namespace_problem
from derived_views.core.settings import (
    DEFAULT_CHECKPOINT_BASE,
    DEFAULT_MAIN_APPLICATION_FILE,
    DEFAULT_REPLAY_MAX_EXECUTORS,
    DEFAULT_REPLAY_MIN_BACKLOG,
    DEFAULT_REPLAY_RECORDS_PER_EXECUTOR,
    DEFAULT_REPLAY_RECORDS_PER_SECOND,
    DEFAULT_REPLAY_STARTUP_SECONDS,
    DEFAULT_SPARK_IMAGE,
    MIN_TRIGGER_SECONDS,
    CheckpointSettings,
    CheckSettings,
    JobPlacement,
    PollSettings,
    Settings,
    SinkSettings,
    SparkSettings,
)


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


def from_env(env: Mapping[str, str] | None = None) -> Settings:
    """The settings the environment gives (the template's text is read by the handlers,
    from `spark.template_path`, once)."""
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
        spark=SparkSettings(
            template_path=e.get("DV_SPARK_TEMPLATE") or None,
            image=e.get("DV_SPARK_IMAGE", DEFAULT_SPARK_IMAGE),
            main_application_file=e.get("DV_MAIN_APPLICATION_FILE",
                                        DEFAULT_MAIN_APPLICATION_FILE),
            jars=tuple(j for j in e.get("DV_SPARK_JARS", "").split(",") if j),
            service_account=e.get("DV_SPARK_SERVICE_ACCOUNT") or None,
            trigger_seconds=(None if not e.get("DV_TRIGGER_SECONDS") else
                             _float(e, "DV_TRIGGER_SECONDS", MIN_TRIGGER_SECONDS, 0.1)),
            replay_records_per_second=_float(e, "DV_REPLAY_RECORDS_PER_SECOND",
                                             DEFAULT_REPLAY_RECORDS_PER_SECOND, 1.0),
            replay_startup_seconds=_float(e, "DV_REPLAY_STARTUP_SECONDS",
                                          DEFAULT_REPLAY_STARTUP_SECONDS, 0.0),
            replay_min_backlog=_count(e, "DV_REPLAY_MIN_BACKLOG", DEFAULT_REPLAY_MIN_BACKLOG),
            replay_records_per_executor=_count(e, "DV_REPLAY_RECORDS_PER_EXECUTOR",
                                               DEFAULT_REPLAY_RECORDS_PER_EXECUTOR),
            replay_max_executors=_count(e, "DV_REPLAY_MAX_EXECUTORS",
                                        DEFAULT_REPLAY_MAX_EXECUTORS)),
        checkpoints=CheckpointSettings(
            base=checkpoint_base, secret=e.get("DV_CHECKPOINT_SECRET") or None,
            s3_endpoint=_endpoint(e, "DV_CHECKPOINT_S3_ENDPOINT"),
            s3_region=e.get("DV_CHECKPOINT_S3_REGION") or None),
        jobs=JobPlacement(namespace=_job_namespace(e),
                          operator_namespace=e.get("DV_OPERATOR_NAMESPACE", "")),
        polling=PollSettings(
            lag_seconds=_float(e, "DV_LAG_POLL_SECONDS", 5.0, 0.5),
            settled_seconds=_float(e, "DV_SETTLED_POLL_SECONDS", 300.0, 1.0),
            history_seconds=int(_float(e, "DV_LAG_HISTORY_SECONDS", 10, 1))),
        sinks=SinkSettings(pool_size=_count(e, "DV_SINK_POOL_SIZE", 4)),
        checks=CheckSettings(concurrency=_count(e, "DV_CHECK_CONCURRENCY", 2),
                             budget_seconds=_float(e, "DV_CHECK_BUDGET_SECONDS", 300.0, 1.0)),
        tenancy=tenancy, metrics_port=_port(e, "DV_METRICS_PORT"), in_cluster=in_cluster)


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
