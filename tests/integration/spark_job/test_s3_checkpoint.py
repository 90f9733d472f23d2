"""The job checkpoints to s3a:// on the stack's S3Proxy and survives a SIGKILL mid-replay.

It runs with the Spark settings the operator renders for an s3a:// checkpoint: each file
written once through S3A's abortable stream (core.job.checkpoints), so a kill mid-write
leaves no file, not a partial one.

Its credentials (the database's and the store's) come only from mounted Secret files, as
the operator renders them: S3A's keys are set by the job, libpq's given by the job.

A driver on a cluster restarts in a fresh pod: only what it checkpointed to
object storage is left. Here the whole job (driver JVM and Python workers) is
killed with SIGKILL between batches and started again with the same config;
it must resume from the S3 checkpoint (no batch id reused with other offsets,
no replay from batch 0) and the index must equal the test's own arithmetic
over every event: nothing lost, nothing counted twice.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import botocore.session
import psycopg
import pytest
from botocore.config import Config
from psycopg import sql

from derived_views.core.job.checkpoints import checkpoint_spark_conf, s3a_hadoop_conf
from dvjob.batch_writer import PROGRESS_PREFIX
from dvstack.testing import replay
from dvstack.testing.waiting import wait_for
from support.paths import REPO

pytestmark = pytest.mark.integration

JOB = REPO / "spark_templates" / "derived_view_job.py"
EVENTS = 12_000
PER_BATCH = 1_500
SQL = ("SELECT customer_id, count(*) AS orders, sum(amount) AS revenue "
       "FROM events GROUP BY customer_id")


def s3_client(s3: dict[str, str]) -> Any:
    return botocore.session.get_session().create_client(
        "s3", region_name=s3["region"], endpoint_url=s3["endpoint"],
        aws_access_key_id=s3["access_key"], aws_secret_access_key=s3["secret_key"],
        config=Config(s3={"addressing_style": "path"}))


def mount(root: Path, name: str, keys: dict[str, str]) -> str:
    """A Secret as the kubelet mounts it: one file per key, in a directory of its own."""
    directory = root / "secrets" / name
    directory.mkdir(parents=True, exist_ok=True)
    for key, value in keys.items():
        (directory / key).write_text(value)
    return str(directory)


def start_job(stack: Any, config: dict[str, Any], log: Path) -> subprocess.Popen[bytes]:
    """spark-submit in its own process group, as a driver pod would hold it; its credentials
    only in mounted Secret files (the environment holds no PG* or AWS_* variable, so libpq
    and S3A can only have them from the job)."""
    s3, pg = stack.s3, stack.pg
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "AWS_"))}
    env["PYSPARK_PYTHON"] = sys.executable
    root = log.parent
    mounts = {
        "views-db": mount(root, "views-db", {k: str(pg[k]) for k in
                                             ("host", "port", "database", "user", "password")}),
        "dv-checkpoints": mount(root, "dv-checkpoints", {
            "AWS_ACCESS_KEY_ID": s3["access_key"], "AWS_SECRET_ACCESS_KEY": s3["secret_key"]}),
    }
    hadoop = s3a_hadoop_conf(s3["endpoint"], s3["region"])
    confs = [arg for k, v in hadoop.items() for arg in ("--conf", f"spark.hadoop.{k}={v}")]
    # and the Spark settings the operator renders for an s3a:// checkpoint
    confs += [arg for k, v in checkpoint_spark_conf(config["checkpointLocation"]).items()
              for arg in ("--conf", f"{k}={v}")]
    confs += [arg for name, directory in mounts.items() for role in ("driver", "executor")
              for arg in ("--conf", f"spark.kubernetes.{role}.secrets.{name}={directory}")]
    spark_submit = str(Path(sys.executable).parent / "spark-submit")
    with open(log, "ab") as out:
        return subprocess.Popen(
            [spark_submit, "--master", "local[2]", "--jars", ",".join(stack.spark_jars),
             "--conf", "spark.ui.enabled=false", *confs, str(JOB),
             "--config-json", json.dumps(config)],
            env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def ledger(stack: Any, schema: str, revision: str) -> list[tuple[int, dict[str, Any]]]:
    with psycopg.connect(stack.pg_dsn) as conn:
        try:
            found = conn.execute(sql.SQL(
                "SELECT batch_id, end_offsets FROM {} WHERE revision = %s ORDER BY batch_id"
            ).format(sql.Identifier(schema, "dv_ledger")), (revision,)).fetchall()
        except psycopg.errors.UndefinedTable:
            return []
    return [(int(b), dict(o)) for b, o in found]


def progress(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line[len(PROGRESS_PREFIX):]) for line in log.read_text().splitlines()
            if line.startswith(PROGRESS_PREFIX)]


def test_a_killed_job_resumes_from_its_s3_checkpoint(stack: Any, schema: str,
                                                      tmp_path: Path) -> None:
    topic = f"orders-s3-{uuid.uuid4().hex[:8]}"
    replay.create_topic(stack.kafka_bootstrap, topic, 3)
    events = replay.make_orders(EVENTS, customers=300, seed=11)
    replay.produce(stack.kafka_bootstrap, topic, events)
    prefix = f"it/{uuid.uuid4().hex[:12]}"
    location = f"s3a://{stack.s3['bucket']}/{prefix}/r1"
    config = {
        "view": "it/s3-restart", "revision": "r1",
        "source": {"bootstrapServers": stack.kafka_bootstrap, "topics": [topic], "format": "json",
                   "schema": replay.ORDER_SCHEMA, "maxOffsetsPerTrigger": PER_BATCH,
                   "kafkaOptions": {}},
        "transform": {"sql": SQL},
        "sink": {"table": "orders__r1", "schema": schema, "primaryKey": ["customer_id"],
                 "ledgerTable": "dv_ledger"},
        "checkpointLocation": location,
        "trigger": {"availableNow": True},
        "secrets": {"sink": "views-db", "checkpoint": "dv-checkpoints"},
    }
    first_log, second_log = tmp_path / "first.log", tmp_path / "second.log"
    first = start_job(stack, config, first_log)
    try:
        wait_for(lambda: len(ledger(stack, schema, "r1")) >= 3 or first.poll() is not None,
                 timeout=300, interval=0.2, what="three committed batches of the first run",
                 on_timeout=lambda: first_log.read_text()[-3000:])
        assert first.poll() is None, "the first run ended before it could be killed:\n" + \
            first_log.read_text()[-3000:]
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=60)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
    before = ledger(stack, schema, "r1")
    assert 3 <= len(before) < EVENTS // PER_BATCH, "killed mid-replay, not before or after it"

    s3 = s3_client(stack.s3)
    keys = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(
        Bucket=stack.s3["bucket"], Prefix=f"{prefix}/r1/") for o in page.get("Contents", [])]
    assert any(k.startswith(f"{prefix}/r1/commits/") for k in keys), keys
    assert any(k.startswith(f"{prefix}/r1/state/") for k in keys), "aggregation state on S3"
    # written once through S3A's abortable stream, never to a temporary name and renamed
    assert "based on abortable stream" in first_log.read_text()
    assert not [k for k in keys if k.endswith(".tmp")], keys

    second = start_job(stack, config, second_log)
    assert second.wait(timeout=600) == 0, second_log.read_text()[-4000:]

    # Resumed, not replayed: the second run starts at the checkpoint's next batch (or
    # re-runs only the one batch in flight, whose rows the ledger already holds).
    resumed = progress(second_log)
    assert resumed, second_log.read_text()[-3000:]
    assert resumed[0]["batch"] >= len(before) - 1
    assert [p["batch"] for p in resumed if p["status"] == "skipped"] in ([], [len(before) - 1])
    # The ledger: batch ids 0..n-1 once each, offsets growing, ending at the topic's end.
    after = ledger(stack, schema, "r1")
    assert after[:len(before)] == before
    assert [b for b, _ in after] == list(range(len(after)))
    ends = replay.topic_end_offsets(stack.kafka_bootstrap, topic)
    totals = [sum(int(v) for v in offsets.get(topic, {}).values()) for _, offsets in after]
    assert totals == sorted(totals) and len(set(totals)) == len(totals)
    assert {int(p): int(o) for p, o in after[-1][1][topic].items()} == ends
    # The index: every event counted exactly once.
    expected: dict[str, tuple[int, float]] = {}
    for e in events:
        orders, revenue = expected.get(e["customer_id"], (0, 0.0))
        expected[e["customer_id"]] = (orders + 1, revenue + e["amount"])
    with psycopg.connect(stack.pg_dsn) as conn:
        got = {c: (int(n), float(r)) for c, n, r in conn.execute(sql.SQL(
            "SELECT customer_id, orders, revenue FROM {}").format(
            sql.Identifier(schema, "orders__r1"))).fetchall()}
    assert got == expected
    assert sum(n for n, _ in got.values()) == EVENTS
    results = Path(stack.state_dir) / "results"
    results.mkdir(exist_ok=True)
    (results / "s3_checkpoint_restart.json").write_text(json.dumps({
        "events": EVENTS, "batches": len(after), "ledger_batches_when_killed": len(before),
        "restart_first_batch": resumed[0]["batch"],
        "restart_skipped_batches": [p["batch"] for p in resumed if p["status"] == "skipped"],
        "checkpoint_objects_when_killed": len(keys)}, indent=2))
