"""Operator settings from the environment: the checkpoint store, and refusing a pod-local one."""

from __future__ import annotations

import subprocess
import sys

import pytest

from derived_views.core.settings import DEFAULT_CHECKPOINT_BASE
from derived_views.process.environment import SettingsError, from_env

IN_POD = {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}


def test_checkpoint_settings_reach_the_planners_settings() -> None:
    settings = from_env({**IN_POD, "DV_CHECKPOINT_BASE": "s3a://derived-views/checkpoints",
                         "DV_CHECKPOINT_SECRET": "dv-checkpoints",
                         "DV_CHECKPOINT_S3_ENDPOINT": "http://minio.storage:9000",
                         "DV_CHECKPOINT_S3_REGION": "eu-central-1"})
    assert (settings.checkpoints.base, settings.checkpoints.secret,
            settings.checkpoints.s3_endpoint, settings.checkpoints.s3_region,
            settings.in_cluster) == (
        "s3a://derived-views/checkpoints", "dv-checkpoints", "http://minio.storage:9000",
        "eu-central-1", True)


def test_outside_a_cluster_the_local_default_is_fine() -> None:
    settings = from_env({})
    assert settings.checkpoints.base == DEFAULT_CHECKPOINT_BASE
    assert not settings.in_cluster
    assert (settings.checkpoints.secret, settings.checkpoints.s3_endpoint,
            settings.checkpoints.s3_region) == (None, None, None)


@pytest.mark.parametrize("base", [None, "/var/lib/ck", "file:///var/lib/ck", "local:///ck"])
def test_in_a_pod_a_pod_local_base_is_refused_naming_what_to_set(base: str | None) -> None:
    env = dict(IN_POD) if base is None else {**IN_POD, "DV_CHECKPOINT_BASE": base}
    with pytest.raises(SettingsError) as caught:
        from_env(env)
    message = str(caught.value)
    assert "\n" not in message
    assert "DV_CHECKPOINT_BASE=s3a://bucket/prefix" in message
    assert "DV_CHECKPOINT_SECRET" in message
    assert "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY" in message


@pytest.mark.parametrize("endpoint", ["minio:9000", "http://", "ftp://x"])
def test_an_endpoint_must_be_a_url(endpoint: str) -> None:
    with pytest.raises(SettingsError, match="DV_CHECKPOINT_S3_ENDPOINT"):
        from_env({"DV_CHECKPOINT_S3_ENDPOINT": endpoint})


def test_the_operator_stops_at_start_up_with_one_line() -> None:
    """What a pod's log shows: the reason and what to set, not a traceback."""
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "DV_CHECKPOINT_BASE": "/tmp/ck",
           "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-m", "derived_views.main", "-A"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [done.stderr.strip()]
    assert done.stderr.startswith("derived-views-operator: DV_CHECKPOINT_BASE: ")
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(("raw", "problem"), [("0", "must be at least 1"),
                                              ("2.5", "is not a whole number"),
                                              ("many", "is not a number")])
def test_the_sink_pool_size_is_a_positive_whole_number(raw: str, problem: str) -> None:
    assert from_env({}).sinks.pool_size == 4
    assert from_env({"DV_SINK_POOL_SIZE": "16"}).sinks.pool_size == 16
    with pytest.raises(SettingsError, match=f"DV_SINK_POOL_SIZE='{raw}' {problem}"):
        from_env({"DV_SINK_POOL_SIZE": raw})


def test_the_trigger_interval_reaches_the_jobs_configuration() -> None:
    """A platform's micro-batch interval (DV_TRIGGER_SECONDS) is what the job is told."""
    from derived_views.api.spec import DerivedViewSpec
    from derived_views.core.job.job_config import job_config
    from derived_views.core.revision import revision_of

    assert from_env({}).spark.trigger_seconds is None  # each view its gate's
    assert from_env({"DV_TRIGGER_SECONDS": ""}).spark.trigger_seconds is None
    settings = from_env({"DV_TRIGGER_SECONDS": "3"})
    spec = DerivedViewSpec.model_validate({
        "source": {"kafka": {"bootstrapServers": "kafka:9092"}, "topics": ["orders"],
                   "schema": "customer_id STRING"},
        "transform": {"sql": "SELECT customer_id FROM events"},
        "sink": {"postgres": {"secretRef": {"name": "db"}, "table": "t"},
                 "primaryKey": ["customer_id"]}})
    revision = revision_of(spec)
    document = job_config(namespace="ns", view="v", spec=spec, revision=revision,
                          checkpoint_location="s3a://b/ck", uid="u",
                          trigger_seconds=settings.spark.trigger_seconds)
    assert document["trigger"] == {"processingTimeSeconds": 3}
    assert job_config(namespace="ns", view="v", spec=spec, revision=revision,
                      checkpoint_location="s3a://b/ck", uid="u", trigger_seconds=0.5
                      )["trigger"] == {"processingTimeSeconds": 0.5}


@pytest.mark.parametrize(("raw", "problem"), [("0", "at least 0.1"), ("soon", "not a number")])
def test_a_trigger_interval_is_a_positive_number(raw: str, problem: str) -> None:
    with pytest.raises(SettingsError, match=f"DV_TRIGGER_SECONDS.*{problem}"):
        from_env({"DV_TRIGGER_SECONDS": raw})


def test_the_replay_rate_a_first_build_assumes() -> None:
    """DV_REPLAY_RECORDS_PER_SECOND and DV_REPLAY_STARTUP_SECONDS: docs/performance.md's
    figures unless the installation measured its own."""
    assert (from_env({}).spark.replay_records_per_second,
            from_env({}).spark.replay_startup_seconds) == (40_000.0, 30.0)
    spark = from_env({"DV_REPLAY_RECORDS_PER_SECOND": "125000",
                      "DV_REPLAY_STARTUP_SECONDS": "0"}).spark
    assert (spark.replay_records_per_second, spark.replay_startup_seconds) == (125_000.0, 0.0)
    with pytest.raises(SettingsError, match="DV_REPLAY_RECORDS_PER_SECOND='0' must be at least"):
        from_env({"DV_REPLAY_RECORDS_PER_SECOND": "0"})
    with pytest.raises(SettingsError, match="DV_REPLAY_STARTUP_SECONDS='soon' is not a number"):
        from_env({"DV_REPLAY_STARTUP_SECONDS": "soon"})


def test_the_replay_stages_sizing() -> None:
    """DV_REPLAY_MIN_BACKLOG, DV_REPLAY_RECORDS_PER_EXECUTOR, DV_REPLAY_MAX_EXECUTORS
    (core.job.stages): whole numbers of at least 1."""
    spark = from_env({}).spark
    assert (spark.replay_min_backlog, spark.replay_records_per_executor,
            spark.replay_max_executors) == (2_000_000, 5_000_000, 8)
    spark = from_env({"DV_REPLAY_MIN_BACKLOG": "1000", "DV_REPLAY_RECORDS_PER_EXECUTOR": "250",
                      "DV_REPLAY_MAX_EXECUTORS": "3"}).spark
    assert (spark.replay_min_backlog, spark.replay_records_per_executor,
            spark.replay_max_executors) == (1000, 250, 3)
    with pytest.raises(SettingsError, match="DV_REPLAY_MAX_EXECUTORS='0' must be at least"):
        from_env({"DV_REPLAY_MAX_EXECUTORS": "0"})
    with pytest.raises(SettingsError, match=r"DV_REPLAY_MIN_BACKLOG='1\.5' is not a whole"):
        from_env({"DV_REPLAY_MIN_BACKLOG": "1.5"})
