"""The first real replay: Kafka -> SparkApplication -> PostgreSQL, on each runtime the
stack has, the same job on the same topic.

Produces 100k order events into a 3-partition topic, creates a SparkApplication running
the project's PySpark job, waits until the ledger's committed offsets equal the topic's
end offsets, and checks the index table against an aggregation this test computes itself
from the events it produced. Where the stack has the real node (marker `real_node`), the
Kubeflow Spark Operator, itself pods of its own chart, runs it first, its driver and
executor as pods of the project's Spark image on the stack's kubelet; then the stand-in
runs it in a namespace of its own (always), for the two rates.
"""

from __future__ import annotations

import json
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from kubernetes import client

from dvstack.spark import kubeflow_operator as spark_operator
from dvstack.testing import replay
from dvstack.testing.waiting import wait_for
from support.e2e.replay import app_status, orders_by_customer, wait_caught_up

EVENTS = 100_000
PARTITIONS = 3
NODE = "dv-node"
APP = "orders-replay"


def _seconds(start: datetime, end: datetime) -> float:
    return round((end - start).total_seconds(), 1)


def _replay(stack: Any, core: client.CoreV1Api, custom: client.CustomObjectsApi, namespace: str,
            topic: str, expected: dict[str, Any], ends: dict[int, int], *,
            image: str | None, checkpoint: str) -> tuple[float, str]:
    """The replay job on `topic` in `namespace` until caught up: its seconds and revision.
    The index must equal the recomputation; the application is left running."""
    revision = f"r{uuid.uuid4().hex[:10]}"
    table = f"orders_by_customer__{revision}"
    core.create_namespaced_secret(namespace, replay.sink_secret("views-db", stack.pg))
    app = replay.spark_application(
        name=APP, namespace=namespace, revision=revision, view=f"{namespace}/orders",
        bootstrap=stack.kafka_bootstrap, topics=[topic], sql=replay.ORDERS_BY_CUSTOMER_SQL,
        table=table, primary_key=["customer_id"], secret="views-db",
        checkpoint=checkpoint, image_app_root=stack.image_app_root,
        max_offsets_per_trigger=40_000, image=image,
        **({"core_request": "250m", "service_account": replay.SPARK_JOB_ACCOUNT}
           if image else {}))
    created = time.monotonic()
    custom.create_namespaced_custom_object("sparkoperator.k8s.io", "v1beta2", namespace,
                                           "sparkapplications", app)
    wait_caught_up(custom, namespace, APP, dsn=stack.pg_dsn, revision=revision, topic=topic,
                   ends=ends)
    elapsed = time.monotonic() - created
    status = app_status(custom, namespace, APP)
    assert status["applicationState"]["state"] == "RUNNING"
    assert status["submissionAttempts"] == 1 and status["executionAttempts"] == 1
    with psycopg.connect(stack.pg_dsn) as conn:
        rows = conn.execute(f'SELECT customer_id, orders, revenue FROM "{table}"').fetchall()
        batches = conn.execute(f"SELECT count(*) FROM {replay.LEDGER} WHERE revision = %s",
                               (revision,)).fetchone()
    assert {r[0]: (r[1], r[2]) for r in rows} == expected
    assert batches is not None and batches[0] >= 3  # maxOffsetsPerTrigger forced several batches
    return elapsed, revision


def _delete_app(core: client.CoreV1Api, custom: client.CustomObjectsApi, namespace: str) -> None:
    custom.delete_namespaced_custom_object("sparkoperator.k8s.io", "v1beta2", namespace,
                                           "sparkapplications", APP)


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


def _on_the_node(stack: Any, core: client.CoreV1Api, custom: client.CustomObjectsApi,
                 namespace: str, topic: str, expected: dict[str, Any],
                 ends: dict[int, int]) -> dict[str, Any]:
    """The replay as the real Spark Operator runs it: pods of our image on the node; gone
    with their application."""
    elapsed, _ = _replay(stack, core, custom, namespace, topic, expected, ends,
                         image=stack.images["spark"], checkpoint="/tmp/checkpoints/replay")
    pods = core.list_namespaced_pod(namespace, label_selector="spark-role").items
    roles = {p.metadata.labels["spark-role"]: p for p in pods}
    assert set(roles) == {"driver", "executor"}, [p.metadata.name for p in pods]
    starts = {}
    for role, pod in roles.items():
        assert pod.spec.node_name == NODE
        assert pod.spec.containers[0].image == stack.images["spark"]
        running = pod.status.container_statuses[0].state.running
        assert running is not None, pod.status.container_statuses[0].state
        starts[role] = _seconds(pod.metadata.creation_timestamp, running.started_at)
    _delete_app(core, custom, namespace)
    wait_for(lambda: not core.list_namespaced_pod(namespace, label_selector="spark-role").items,
             timeout=120, what="the driver and executor pods to go with their SparkApplication")
    _assert_spark_operator_runs_as_its_charts_pods(core, stack)
    return {"seconds_create_to_caught_up": round(elapsed, 1),
            "replay_events_per_s": round(EVENTS / elapsed),
            "pod_created_to_running_seconds": starts}


def _assert_spark_operator_runs_as_its_charts_pods(core: client.CoreV1Api, stack: Any) -> None:
    """Controller and webhook: pods of the stack's Spark Operator image on the node, under
    the chart's ServiceAccounts (spark-submit ran in the controller's pod, as its account)."""
    pods = core.list_namespaced_pod(spark_operator._NAMESPACE).items
    by_component = {p.metadata.labels.get("app.kubernetes.io/component"): p for p in pods
                    if p.status.phase == "Running"}
    assert set(by_component) >= {"controller", "webhook"}, [p.metadata.name for p in pods]
    for component, pod in by_component.items():
        assert pod.spec.node_name == NODE
        assert pod.spec.containers[0].image == stack.images[spark_operator.IMAGE]
        assert pod.spec.service_account_name == f"spark-operator-{component}"


def _on_the_stand_in(stack: Any, core: client.CoreV1Api, custom: client.CustomObjectsApi,
                     namespace: str, topic: str, expected: dict[str, Any],
                     ends: dict[int, int], checkpoint: Path) -> float:
    """The replay as the stand-in runs it: a local driver process, stopped with its
    application, never a pod on the node."""
    elapsed, _ = _replay(stack, core, custom, namespace, topic, expected, ends, image=None,
                         checkpoint=str(checkpoint))
    assert not [p for p in core.list_namespaced_pod(
        namespace, label_selector="spark-role").items if p.spec.node_name == NODE]
    _delete_app(core, custom, namespace)
    wait_for(lambda: not _driver_running(f"{namespace}-{APP}"), timeout=60,
             what="the driver process to stop after the SparkApplication was deleted")
    return elapsed


@pytest.mark.real_node
def test_replay_from_genesis_matches_independent_recomputation_on_each_runtime(
        stack: Any, kube_api_client: Any, namespace: str, jobs_on_node: bool,
        tmp_path: Path) -> None:
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    replay.create_topic(stack.kafka_bootstrap, topic, PARTITIONS)
    events = replay.make_orders(EVENTS)
    replay.produce(stack.kafka_bootstrap, topic, events)
    expected = orders_by_customer(events)
    ends = replay.topic_end_offsets(stack.kafka_bootstrap, topic)
    assert sum(ends.values()) == EVENTS and len(ends) == PARTITIONS
    core = client.CoreV1Api(kube_api_client)
    custom = client.CustomObjectsApi(kube_api_client)
    results = Path(stack.state_dir) / "results"
    results.mkdir(exist_ok=True)

    if not jobs_on_node:
        stand_in = _on_the_stand_in(stack, core, custom, namespace, topic, expected, ends,
                                    tmp_path / "checkpoint")
    else:
        on_node = _on_the_node(stack, core, custom, namespace, topic, expected, ends)
        # The stand-in's twin in a namespace without the node's label, once the node's pods
        # are gone: the rate the two give on this machine.
        twin = f"t-{uuid.uuid4().hex[:10]}"
        core.create_namespace({"metadata": {"name": twin}})
        try:
            wait_for(lambda: core.list_namespaced_service_account(
                twin, field_selector="metadata.name=default").items, timeout=120,
                what=f"the default ServiceAccount of namespace {twin}")
            stand_in = _on_the_stand_in(stack, core, custom, twin, topic, expected, ends,
                                        tmp_path / "checkpoint")
        finally:
            core.delete_namespace(twin)
        (results / "real_node_replay.json").write_text(json.dumps({
            "events": EVENTS, **on_node,
            "stand_in_seconds_create_to_caught_up": round(stand_in, 1),
            "stand_in_replay_events_per_s": round(EVENTS / stand_in)}, indent=2))

    raw_rate = replay.raw_consume_rate(stack.kafka_bootstrap, topic, EVENTS)
    (results / "first_replay.json").write_text(json.dumps({
        "events": EVENTS, "seconds_create_to_caught_up": round(stand_in, 1),
        "replay_events_per_s": round(EVENTS / stand_in),
        "raw_consume_events_per_s": round(raw_rate),
    }, indent=2))
    replay.delete_topic(stack.kafka_bootstrap, topic)
