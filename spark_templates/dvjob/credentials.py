"""The job's credentials: files of the Secrets the operator mounts, not environment variables.

Why files: a variable in the driver's environment is readable by every child
process it starts and by Spark's `${env:X}` substitution in SQL text; had a guard
ever let such SQL through, the password would have become a column of the index.
A file of a mounted Secret is read only by code that opens it, which SQL over
`events` cannot do (the guard refuses file relations and every function that
reaches the JVM or the file system).

The operator lists each Secret in the SparkApplication's `driver.secrets` and
`executor.secrets`; the Spark Operator passes them to spark-submit as
`spark.kubernetes.driver.secrets.<name>=<path>` (resp. `executor`), and Spark
mounts the Secret there, one file per key.  The job finds each directory under
that same key of its own configuration, so it reads exactly what was mounted.

A configuration without `secrets` comes from an operator that mapped the keys
into environment variables; such a job still reads them there.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from dvjob.config import JobConfig
from dvjob.errors import ConfigError
from dvjob.sinks.postgres.stage import libpq_keywords, read_secret_dir
from dvjob.source.load import (
    ENV_CA,
    ENV_MECHANISM,
    ENV_PASSWORD,
    ENV_PROTOCOL,
    ENV_SECRET,
    ENV_USERNAME,
)
from dvjob.source.schema_registry import REGISTRY_KEYS

DRIVER_SECRETS = "spark.kubernetes.driver.secrets."
EXECUTOR_SECRETS = "spark.kubernetes.executor.secrets."

KAFKA_KEYS = {"username": ENV_USERNAME, "password": ENV_PASSWORD, "mechanism": ENV_MECHANISM,
              "securityProtocol": ENV_PROTOCOL, "ca.crt": ENV_CA}
"""The Kafka Secret's keys, as the names `load.sasl_options` reads them by."""
OPENSEARCH_KEYS = {"url": "DV_OPENSEARCH_URL", "username": "DV_OPENSEARCH_USERNAME",
                   "password": "DV_OPENSEARCH_PASSWORD"}
"""The OpenSearch sink Secret's keys, as `sink_opensearch_client.client_from` reads them."""
CHECKPOINT_KEYS = {"AWS_ACCESS_KEY_ID": "fs.s3a.access.key",
                   "AWS_SECRET_ACCESS_KEY": "fs.s3a.secret.key"}
"""The checkpoint store's Secret keys, as S3A settings (S3A's default provider chain reads
them first, before the environment)."""


@dataclass(frozen=True)
class Credentials:
    """What each client of the job is configured with."""

    kafka: dict[str, str] = field(default_factory=dict)
    """Named as `load.sasl_options` reads them."""
    postgres: dict[str, str] = field(default_factory=dict)
    """libpq keywords; empty: libpq's own PG* environment."""
    opensearch: dict[str, str] = field(default_factory=dict)
    """Named as `sink_opensearch_client.client_from` reads them."""
    hadoop: dict[str, str] = field(default_factory=dict)
    """S3A settings for the checkpoint store; empty: S3A's own chain (the environment)."""
    stage_dir: str = ""
    """Where the executors find the PostgreSQL sink Secret; "": their PG* environment."""
    registry: dict[str, str] = field(default_factory=dict)
    """The schema registry Secret's keys (`schema_registry.REGISTRY_KEYS`), format avro."""


def job_credentials(config: JobConfig, spark_conf: Callable[[str], str | None],
                    environ: Mapping[str, str] = os.environ) -> Credentials:
    """The credentials of this run: from the mounted Secrets the configuration names, or
    (configurations from before mounts) from the environment."""
    if config.secrets is None:
        return from_environment(config, environ)
    names = config.secrets

    def mounted(name: str, role: str) -> dict[str, str]:
        try:
            return read_secret_dir(mount_dir(spark_conf, DRIVER_SECRETS, name, role),
                                   what=f"the {role} Secret {name}")
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    kafka: dict[str, str] = {}
    if names.kafka:
        kafka = {KAFKA_KEYS[k]: v for k, v in mounted(names.kafka, "Kafka").items()
                 if k in KAFKA_KEYS}
        kafka[ENV_SECRET] = names.kafka
    sink = mounted(names.sink, "sink")
    postgres, opensearch, stage_dir = {}, {}, ""
    if config.sink.kind == "opensearch":
        opensearch = {OPENSEARCH_KEYS[k]: v for k, v in sink.items() if k in OPENSEARCH_KEYS}
    else:
        postgres = libpq_keywords(sink)
        stage_dir = mount_dir(spark_conf, EXECUTOR_SECRETS, names.sink, "sink")
    hadoop: dict[str, str] = {}
    if names.checkpoint:
        hadoop = {CHECKPOINT_KEYS[k]: v for k, v in mounted(names.checkpoint, "checkpoint").items()
                  if k in CHECKPOINT_KEYS}
    registry: dict[str, str] = {}
    if names.registry:
        registry = {k: v for k, v in mounted(names.registry, "schema registry").items()
                    if k in REGISTRY_KEYS}
    return Credentials(kafka=kafka, postgres=postgres, opensearch=opensearch, hadoop=hadoop,
                       stage_dir=stage_dir, registry=registry)


def from_environment(config: JobConfig, environ: Mapping[str, str]) -> Credentials:
    """The variables operators before mounted Secrets set (libpq and S3A read theirs)."""
    kafka = {k: v for k, v in environ.items() if k in {*KAFKA_KEYS.values(), ENV_SECRET}}
    opensearch = ({k: v for k, v in environ.items() if k in OPENSEARCH_KEYS.values()}
                  if config.sink.kind == "opensearch" else {})
    return Credentials(kafka=kafka, opensearch=opensearch)


def mount_dir(spark_conf: Callable[[str], str | None], prefix: str, name: str,
              role: str) -> str:
    """Where Spark mounted Secret `name`, from the setting that made it mount it."""
    directory = spark_conf(prefix + name)
    if not directory:
        raise ConfigError(f"the {role} Secret {name} is not mounted ({prefix}{name} is not "
                          "set): the SparkApplication must list it in driver.secrets and "
                          "executor.secrets, as the operator renders it")
    if prefix == DRIVER_SECRETS and not Path(directory).is_dir():  # executors: their own pods
        raise ConfigError(f"the {role} Secret {name} is not mounted at {directory} "
                          f"({prefix}{name}): no such directory")
    return directory
