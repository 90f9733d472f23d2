"""One Kafka Secret, two readers: the operator (librdkafka settings) and the Spark job (the
Secret's files where the rendered manifest mounts it, then Java client options) must agree on
protocol, mechanism, credentials, CA, and on which Secrets are unusable.  The job's side runs
the whole path: render, the job configuration it parses, the Secret's keys as the files a
kubelet writes, the mount directory as spark-submit's setting names it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from derived_views.api.spec import DerivedViewSpec
from derived_views.core.job.sparkapplication import load_template, render_spark_application
from derived_views.core.log.kafka_connection import KafkaSecretInvalid, client_settings
from derived_views.core.revision import revision_of
from derived_views.core.settings import CheckpointSettings, Settings, SparkSettings
from dvjob.config import parse_config
from dvjob.credentials import Credentials, job_credentials
from dvjob.errors import ConfigError
from dvjob.source.load import sasl_options

PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
SPEC = DerivedViewSpec.model_validate({
    "source": {"kafka": {"bootstrapServers": "k:9092", "secretRef": {"name": "kafka-creds"}},
               "topics": ["t"], "schema": "a STRING"},
    "transform": {"sql": "SELECT a FROM events"},
    "sink": {"postgres": {"secretRef": {"name": "db"}, "table": "t"}, "primaryKey": ["a"]}})

SECRETS: list[dict[str, str]] = [
    {"username": "u", "password": 'p"w\\'},
    {"username": "u", "password": "p", "mechanism": "SCRAM-SHA-512",
     "securityProtocol": "SASL_PLAINTEXT"},
    {"username": "u", "password": "p", "mechanism": "scram-sha-256", "ca.crt": PEM},
    {"securityProtocol": "SSL", "ca.crt": PEM},
    {"securityProtocol": "SSL"},
    # unusable, on both sides
    {},
    {"username": "u"},
    {"password": "p"},
    {"username": "u", "password": "p", "mechanism": "GSSAPI"},
    {"username": "u", "password": "p", "securityProtocol": "PLAINTEXT"},
    {"username": "u", "password": "p", "securityProtocol": "SASL_PLAINTEXT", "ca.crt": PEM},
]


CONFIG = Settings(spark=SparkSettings(template=load_template(), image="i"), checkpoints=CheckpointSettings(base="/c"))
PG = {"host": "db", "port": "5432", "database": "views", "user": "u", "password": "pw"}


def mounted(spec: DerivedViewSpec, secrets: dict[str, dict[str, str]], root: Path
            ) -> Credentials:
    """What the job reads when a kubelet mounts `secrets` where the manifest asks."""
    revision = revision_of(spec)
    manifest: dict[str, Any] = render_spark_application(
        CONFIG.spark.template, settings=CONFIG, namespace="ns", view="v", uid="u-1", spec=spec,
        revision=revision, checkpoint_location=f"/c/{revision}")
    conf: dict[str, str] = {}
    for mount in manifest["spec"]["driver"]["secrets"]:
        directory = root / mount["name"]
        directory.mkdir()
        for key, value in secrets[mount["name"]].items():
            (directory / key).write_text(value)
        conf[f"spark.kubernetes.driver.secrets.{mount['name']}"] = str(directory)
    for mount in manifest["spec"]["executor"]["secrets"]:
        conf[f"spark.kubernetes.executor.secrets.{mount['name']}"] = str(root / mount["name"])
    config = parse_config(manifest["spec"]["arguments"][1])
    return job_credentials(config, conf.get, environ={"DV_KAFKA_SASL_PASSWORD": "from-env"})


def job_environment(data: dict[str, str], root: Path) -> dict[str, str]:
    return mounted(SPEC, {"kafka-creds": data, "db": PG}, root).kafka


@pytest.mark.parametrize("data", SECRETS, ids=lambda d: ",".join(f"{k}={v[:12]}"
                                                                  for k, v in d.items()) or "{}")
def test_operator_and_job_read_a_secret_the_same_way(data: dict[str, str],
                                                     tmp_path: Path) -> None:
    try:
        operator = client_settings(data)
    except KafkaSecretInvalid:
        with pytest.raises(ConfigError):
            sasl_options(job_environment(data, tmp_path))
        return
    job = sasl_options(job_environment(data, tmp_path))
    assert job["kafka.security.protocol"] == operator["security.protocol"]
    assert job.get("kafka.sasl.mechanism") == operator.get("sasl.mechanism")
    if "sasl.username" in operator:
        jaas = job["kafka.sasl.jaas.config"]
        assert f'username="{operator["sasl.username"]}"' in jaas
        escaped = operator["sasl.password"].replace("\\", "\\\\").replace('"', '\\"')
        assert f'password="{escaped}"' in jaas
    else:
        assert "kafka.sasl.jaas.config" not in job
    assert job.get("kafka.ssl.truststore.certificates") == operator.get("ssl.ca.pem")
    assert (job.get("kafka.ssl.truststore.type") == "PEM") == ("ssl.ca.pem" in operator)


def test_the_job_reads_the_sink_from_its_files_and_nothing_from_the_environment(
        tmp_path: Path) -> None:
    got = mounted(SPEC, {"kafka-creds": {"username": "k", "password": "kp"}, "db": PG}, tmp_path)
    assert got.postgres == {"host": "db", "port": "5432", "dbname": "views", "user": "u",
                            "password": "pw"}
    assert got.stage_dir == str(tmp_path / "db")  # the executors' mount of the same Secret
    assert "from-env" not in json.dumps(got.kafka)


def test_the_opensearch_sink_secret_is_read_by_its_keys(tmp_path: Path) -> None:
    spec = DerivedViewSpec.model_validate({
        "source": {"kafka": {"bootstrapServers": "k:9092"}, "topics": ["t"],
                   "schema": "a STRING"},
        "transform": {"sql": "SELECT a FROM events"},
        "sink": {"opensearch": {"secretRef": {"name": "search"}, "index": "t"},
                 "primaryKey": ["a"]}})
    got = mounted(spec, {"search": {"url": "https://s:9200", "username": "u",
                                    "password": "p", "extra": "x"}}, tmp_path)
    assert got.opensearch == {"DV_OPENSEARCH_URL": "https://s:9200",
                              "DV_OPENSEARCH_USERNAME": "u", "DV_OPENSEARCH_PASSWORD": "p"}
    assert (got.postgres, got.kafka) == ({}, {})


def test_a_secret_the_manifest_names_but_nobody_mounted_is_a_clear_error(tmp_path: Path) -> None:
    config = parse_config(json.dumps({
        "view": "ns/v", "revision": "r1",
        "source": {"bootstrapServers": "k:9092", "topics": ["t"], "schema": "a STRING"},
        "transform": {"sql": "SELECT a FROM events"},
        "sink": {"table": "t", "schema": "public", "primaryKey": ["a"], "ledgerTable": "l"},
        "checkpointLocation": "/c", "trigger": {"processingTimeSeconds": 1},
        "secrets": {"sink": "db"}}))
    with pytest.raises(ConfigError, match=r"sink Secret db is not mounted.*driver\.secrets"):
        job_credentials(config, {}.get, environ={"PGPASSWORD": "from-env"})
    conf = {"spark.kubernetes.driver.secrets.db": str(tmp_path / "absent")}
    with pytest.raises(ConfigError, match="not mounted at"):
        job_credentials(config, conf.get)
