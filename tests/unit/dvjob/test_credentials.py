"""The job's credentials: a Secret's files as the kubelet lays them out, and the environment
only for configurations from before Secrets were mounted."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from dvjob.config import parse_config
from dvjob.credentials import job_credentials
from dvjob.errors import ConfigError
from dvjob.sinks.postgres.stage import libpq_keywords, read_secret_dir

CONFIG: dict[str, Any] = {
    "view": "shop/v", "revision": "r1",
    "source": {"bootstrapServers": "k:9092", "topics": ["t"], "schema": "a STRING"},
    "transform": {"sql": "SELECT a FROM events"},
    "sink": {"table": "t__r1", "schema": "shop", "primaryKey": ["a"], "ledgerTable": "dv_ledger"},
    "checkpointLocation": "s3a://b/c/r1", "trigger": {"processingTimeSeconds": 1},
}


def kubelet_volume(root: Path, keys: dict[str, str]) -> Path:
    """The kubelet's AtomicWriter layout: files in a timestamped directory, `..data` linking to
    it, and one link per key through `..data`."""
    volume = root / "volume"
    stamped = volume / "..2026_11_26_20_00_00.123"
    stamped.mkdir(parents=True)
    for key, value in keys.items():
        (stamped / key).write_text(value)
    (volume / "..data").symlink_to(stamped.name)
    for key in keys:
        (volume / key).symlink_to(f"..data/{key}")
    return volume


def test_a_secret_volume_reads_as_its_keys(tmp_path: Path) -> None:
    volume = kubelet_volume(tmp_path, {"host": "db", "password": "p w\n", "ca.crt": "PEM"})
    assert read_secret_dir(str(volume), what="x") == {"ca.crt": "PEM", "host": "db",
                                                      "password": "p w\n"}


def test_libpq_keywords_rename_database_and_drop_the_rest() -> None:
    assert libpq_keywords({"host": "h", "port": "5432", "database": "d", "user": "u",
                           "password": "p", "sslmode": "", "other": "x"}) == {
        "host": "h", "port": "5432", "dbname": "d", "user": "u", "password": "p"}


def test_every_role_is_read_from_its_own_mount(tmp_path: Path) -> None:
    sink = kubelet_volume(tmp_path / "db", {"host": "h", "database": "d", "user": "u",
                                            "password": "p"})
    kafka = kubelet_volume(tmp_path / "kafka", {"username": "k", "password": "kp"})
    store = kubelet_volume(tmp_path / "store", {"AWS_ACCESS_KEY_ID": "AK",
                                                "AWS_SECRET_ACCESS_KEY": "SK"})
    config = parse_config(json.dumps({**CONFIG, "secrets": {
        "sink": "db", "kafka": "kafka-creds", "checkpoint": "store"}}))
    conf = {"spark.kubernetes.driver.secrets.db": str(sink),
            "spark.kubernetes.executor.secrets.db": "/executor/mount/db",
            "spark.kubernetes.driver.secrets.kafka-creds": str(kafka),
            "spark.kubernetes.driver.secrets.store": str(store)}
    got = job_credentials(config, conf.get, environ={"PGPASSWORD": "env", "AWS_SECRET_ACCESS_KEY":
                                                     "env", "DV_KAFKA_SASL_PASSWORD": "env"})
    assert got.postgres == {"host": "h", "dbname": "d", "user": "u", "password": "p"}
    assert got.stage_dir == "/executor/mount/db"
    assert got.kafka == {"DV_KAFKA_SASL_USERNAME": "k", "DV_KAFKA_SASL_PASSWORD": "kp",
                         "DV_KAFKA_SECRET_NAME": "kafka-creds"}
    assert got.hadoop == {"fs.s3a.access.key": "AK", "fs.s3a.secret.key": "SK"}


def test_the_executors_mount_must_be_named_too(tmp_path: Path) -> None:
    sink = kubelet_volume(tmp_path, {"host": "h"})
    config = parse_config(json.dumps({**CONFIG, "secrets": {"sink": "db"}}))
    with pytest.raises(ConfigError, match=r"spark\.kubernetes\.executor\.secrets\.db"):
        job_credentials(config, {"spark.kubernetes.driver.secrets.db": str(sink)}.get)


def test_a_configuration_from_before_mounts_reads_the_environment() -> None:
    got = job_credentials(parse_config(json.dumps(CONFIG)), {}.get, environ={
        "DV_KAFKA_SASL_USERNAME": "k", "DV_KAFKA_SASL_PASSWORD": "kp", "HOME": os.sep})
    assert got.kafka == {"DV_KAFKA_SASL_USERNAME": "k", "DV_KAFKA_SASL_PASSWORD": "kp"}
    assert (got.postgres, got.hadoop, got.stage_dir) == ({}, {}, "")  # libpq, S3A: their env
