"""spark-submit of the project's job against the stack, as the integration tests run it, and
what those tests feed it and read back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
from confluent_kafka import Producer
from psycopg import sql

JOB = Path(__file__).resolve().parents[3] / "spark_templates" / "derived_view_job.py"


def _command(stack: Any, config: dict[str, Any], conf: dict[str, str]
             ) -> tuple[list[str], dict[str, str]]:
    """spark-submit of the job (local[1]), PostgreSQL from libpq's PG* variables."""
    pg = stack.pg
    env = {**os.environ, "PGHOST": str(pg["host"]), "PGPORT": str(pg["port"]),
           "PGDATABASE": str(pg["database"]), "PGUSER": str(pg["user"]),
           "PGPASSWORD": str(pg["password"]), "PYSPARK_PYTHON": sys.executable}
    spark_submit = str(Path(sys.executable).parent / "spark-submit")
    confs = [arg for key, value in {"spark.ui.enabled": "false", **conf}.items()
             for arg in ("--conf", f"{key}={value}")]
    return ([spark_submit, "--master", "local[1]", "--jars", ",".join(stack.spark_jars),
             *confs, str(JOB), "--config-json", json.dumps(config)], env)


def submit(stack: Any, config: dict[str, Any], timeout: float,
           conf: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the job to the end."""
    command, env = _command(stack, config, conf or {})
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)


def start(stack: Any, config: dict[str, Any], conf: dict[str, str], log: Path
          ) -> subprocess.Popen[bytes]:
    """Start a job that keeps running (a processing-time trigger), its output into `log`."""
    command, env = _command(stack, config, conf)
    with log.open("wb") as out:
        return subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


def produce(bootstrap: str, topic: str, records: list[tuple[str, str | None]]) -> None:
    """Keyed records to partition 0, in order; None is a tombstone."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for key, value in records:
        producer.produce(topic, key=key.encode(),
                         value=None if value is None else value.encode(), partition=0)
    assert producer.flush(30) == 0


def job_config(stack: Any, *, topic: str, schema: str, fmt: str, row_ddl: str, sql_text: str,
               key: list[str], checkpoint: Path, revision: str = "r1") -> dict[str, Any]:
    return {
        "view": "it/job", "revision": revision,
        "source": {"bootstrapServers": stack.kafka_bootstrap, "topics": [topic], "format": fmt,
                   "schema": row_ddl, "kafkaOptions": {}},
        "transform": {"sql": sql_text},
        "sink": {"table": f"mirror__{revision}", "schema": schema, "primaryKey": key,
                 "ledgerTable": "dv_ledger"},
        "checkpointLocation": str(checkpoint),
        "trigger": {"availableNow": True},
    }


def run_job(stack: Any, *, topic: str, schema: str, fmt: str, row_ddl: str, sql_text: str,
            key: list[str], checkpoint: Path, revision: str = "r1") -> subprocess.CompletedProcess[str]:
    config = job_config(stack, topic=topic, schema=schema, fmt=fmt, row_ddl=row_ddl,
                        sql_text=sql_text, key=key, checkpoint=checkpoint, revision=revision)
    return submit(stack, config, timeout=600)


def rows(stack: Any, schema: str, table: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(stack.pg_dsn) as conn:
        return [tuple(r) for r in conn.execute(
            sql.SQL("SELECT * FROM {} ORDER BY 1").format(sql.Identifier(schema, table)))]


def mounted_secrets(stack: Any, into: Path, registry: bool = True) -> dict[str, str]:
    """The sink's (and the schema registry's) Secrets as files, as the job's pods mount them;
    the Spark conf that tells the job where each one is."""
    secrets = {"views-db": {"host": stack.pg["host"], "port": stack.pg["port"],
                            "database": stack.pg["database"], "user": stack.pg["user"],
                            "password": stack.pg["password"]}}
    if registry:
        secrets["registry"] = {"url": stack.schema_registry_url}
    for name, keys in secrets.items():
        (into / name).mkdir(parents=True)
        for key, value in keys.items():
            (into / name / key).write_text(str(value))
    return {f"spark.kubernetes.{role}.secrets.{name}": str(into / name)
            for role in ("driver", "executor") for name in secrets}
