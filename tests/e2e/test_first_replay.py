"""The first real replay: Kafka -> SparkApplication (local executor) -> PostgreSQL.

Produces 100k order events into a 3-partition topic, creates a
SparkApplication running the project's PySpark job, waits until the ledger's
committed offsets equal the topic's end offsets, and checks the index table
against an aggregation this test computes itself from the events it produced.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
from e2e_replay import app_status, orders_by_customer, wait_caught_up
from kubernetes import client

from dvstack import replay
from dvstack.waiting import wait_for

EVENTS = 100_000
PARTITIONS = 3


def _driver_running(app_name: str) -> bool:
    """Is a spark-submit with this application name still alive on this machine?"""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if app_name.encode() in cmdline and any(b"spark" in part for part in cmdline):
            return True
    return False


def test_replay_from_genesis_matches_independent_recomputation(
        stack: Any, kube_api_client: Any, namespace: str, tmp_path: Path) -> None:
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    revision = f"r{uuid.uuid4().hex[:10]}"
    table = f"orders_by_customer__{revision}"
    replay.create_topic(stack.kafka_bootstrap, topic, PARTITIONS)
    events = replay.make_orders(EVENTS)
    replay.produce(stack.kafka_bootstrap, topic, events)

    expected = orders_by_customer(events)

    ends = replay.topic_end_offsets(stack.kafka_bootstrap, topic)
    assert sum(ends.values()) == EVENTS and len(ends) == PARTITIONS

    core = client.CoreV1Api(kube_api_client)
    custom = client.CustomObjectsApi(kube_api_client)
    core.create_namespaced_secret(namespace, replay.sink_secret("views-db", stack.pg))
    name = "orders-replay"
    app = replay.spark_application(
        name=name, namespace=namespace, revision=revision, view=f"{namespace}/orders",
        bootstrap=stack.kafka_bootstrap, topics=[topic], sql=replay.ORDERS_BY_CUSTOMER_SQL,
        table=table, primary_key=["customer_id"], secret="views-db",
        checkpoint=str(tmp_path / "checkpoint"), image_app_root=stack.image_app_root,
        max_offsets_per_trigger=40_000)
    created = time.monotonic()
    custom.create_namespaced_custom_object("sparkoperator.k8s.io", "v1beta2", namespace,
                                           "sparkapplications", app)

    wait_caught_up(custom, namespace, name, dsn=stack.pg_dsn, revision=revision, topic=topic,
                   ends=ends)
    elapsed = time.monotonic() - created

    status = app_status(custom, namespace, name)
    assert status["applicationState"]["state"] == "RUNNING"
    assert status["submissionAttempts"] == 1 and status["executionAttempts"] == 1

    with psycopg.connect(stack.pg_dsn) as conn:
        rows = conn.execute(f'SELECT customer_id, orders, revenue FROM "{table}"').fetchall()
        batches = conn.execute(f"SELECT count(*) FROM {replay.LEDGER} WHERE revision = %s",
                               (revision,)).fetchone()
    actual = {r[0]: (r[1], r[2]) for r in rows}
    assert actual == expected
    assert batches is not None and batches[0] >= 3  # maxOffsetsPerTrigger forced several batches

    # Deleting the SparkApplication stops its driver.
    custom.delete_namespaced_custom_object("sparkoperator.k8s.io", "v1beta2", namespace,
                                           "sparkapplications", name)
    wait_for(lambda: not _driver_running(f"{namespace}-{name}"), timeout=60,
             what="the driver process to stop after the SparkApplication was deleted")

    raw_rate = replay.raw_consume_rate(stack.kafka_bootstrap, topic, EVENTS)
    results = Path(stack.state_dir) / "results"
    results.mkdir(exist_ok=True)
    (results / "first_replay.json").write_text(json.dumps({
        "events": EVENTS, "seconds_create_to_caught_up": round(elapsed, 1),
        "replay_events_per_s": round(EVENTS / elapsed), "raw_consume_events_per_s": round(raw_rate),
    }, indent=2))
    replay.delete_topic(stack.kafka_bootstrap, topic)
