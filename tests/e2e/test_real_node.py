"""The real node: the Kubeflow Spark Operator submits the project's job, and its driver and
executor run as pods of the project's own Spark image on the stack's kubelet.

Runs where the stack has the node (`make stack-up` starts it wherever the machine can run
it). The same job on the same topic then runs on the stand-in, for the two rates.
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
from e2e_replay import app_status, orders_by_customer, wait_caught_up
from kubernetes import client

from dvstack import replay
from dvstack.waiting import wait_for

EVENTS = 100_000
PARTITIONS = 3
NODE = "dv-node"
APP = "orders-replay"


pytestmark = pytest.mark.real_node



def _seconds(start: datetime, end: datetime) -> float:
    return round((end - start).total_seconds(), 1)


def _replay(stack: Any, core: client.CoreV1Api, custom: client.CustomObjectsApi, namespace: str,
            topic: str, expected: dict[str, Any], ends: dict[int, int], *,
            image: str | None) -> float:
    """The replay job on `topic` in `namespace` until caught up; its seconds. The index must
    equal the recomputation; the application is left running."""
    revision = f"r{uuid.uuid4().hex[:10]}"
    table = f"orders_by_customer__{revision}"
    core.create_namespaced_secret(namespace, replay.sink_secret("views-db", stack.pg))
    app = replay.spark_application(
        name=APP, namespace=namespace, revision=revision, view=f"{namespace}/orders",
        bootstrap=stack.kafka_bootstrap, topics=[topic], sql=replay.ORDERS_BY_CUSTOMER_SQL,
        table=table, primary_key=["customer_id"], secret="views-db",
        checkpoint=f"/tmp/checkpoints/{revision}", image_app_root=stack.image_app_root,
        max_offsets_per_trigger=40_000, image=image, core_request="250m",
        service_account=replay.SPARK_JOB_ACCOUNT)
    created = time.monotonic()
    custom.create_namespaced_custom_object("sparkoperator.k8s.io", "v1beta2", namespace,
                                           "sparkapplications", app)
    wait_caught_up(custom, namespace, APP, dsn=stack.pg_dsn, revision=revision, topic=topic,
                   ends=ends)
    elapsed = time.monotonic() - created
    status = app_status(custom, namespace, APP)
    assert status["applicationState"]["state"] == "RUNNING"
    with psycopg.connect(stack.pg_dsn) as conn:
        rows = conn.execute(f'SELECT customer_id, orders, revenue FROM "{table}"').fetchall()
    assert {r[0]: (r[1], r[2]) for r in rows} == expected
    return elapsed


def _delete_app(core: client.CoreV1Api, custom: client.CustomObjectsApi, namespace: str) -> None:
    custom.delete_namespaced_custom_object("sparkoperator.k8s.io", "v1beta2", namespace,
                                           "sparkapplications", APP)
    wait_for(lambda: not core.list_namespaced_pod(namespace, label_selector="spark-role").items,
             timeout=120, what="the driver and executor pods to go with their SparkApplication")


def test_the_spark_operator_runs_the_job_as_pods_on_the_node_and_it_replays_exactly(
        stack: Any, real_node: None, kube_api_client: Any, namespace: str) -> None:
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    replay.create_topic(stack.kafka_bootstrap, topic, PARTITIONS)
    events = replay.make_orders(EVENTS)
    replay.produce(stack.kafka_bootstrap, topic, events)
    expected = orders_by_customer(events)
    ends = replay.topic_end_offsets(stack.kafka_bootstrap, topic)
    core = client.CoreV1Api(kube_api_client)
    custom = client.CustomObjectsApi(kube_api_client)

    elapsed = _replay(stack, core, custom, namespace, topic, expected, ends,
                      image=stack.images["spark"])
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

    # The same job on the same topic, run by the stand-in (a namespace without the label),
    # once the node's pods are gone: the rate the two give on this machine.
    twin = f"t-{uuid.uuid4().hex[:10]}"
    core.create_namespace({"metadata": {"name": twin}})
    try:
        wait_for(lambda: core.list_namespaced_service_account(
            twin, field_selector="metadata.name=default").items, timeout=120,
            what=f"the default ServiceAccount of namespace {twin}")
        replay.spark_job_account(kube_api_client, twin)  # the same spec, to the letter
        stand_in = _replay(stack, core, custom, twin, topic, expected, ends, image=None)
        assert not [p for p in core.list_namespaced_pod(
            twin, label_selector="spark-role").items if p.spec.node_name == NODE]
        _delete_app(core, custom, twin)
    finally:
        core.delete_namespace(twin)
    results = Path(stack.state_dir) / "results"
    results.mkdir(exist_ok=True)
    (results / "real_node_replay.json").write_text(json.dumps({
        "events": EVENTS, "seconds_create_to_caught_up": round(elapsed, 1),
        "replay_events_per_s": round(EVENTS / elapsed),
        "stand_in_seconds_create_to_caught_up": round(stand_in, 1),
        "stand_in_replay_events_per_s": round(EVENTS / stand_in),
        "pod_created_to_running_seconds": starts}, indent=2))
    replay.delete_topic(stack.kafka_bootstrap, topic)
