"""The product as a platform installs it: `helm install` of the chart, the operator running as
pods of its own image on the real node, its jobs as pods on the real Spark Operator.

Two replicas (Kopf peering: the highest ordinal works, the other stands by), the chart's
security defaults (non-root, read-only root filesystem, no capabilities). A view is
applied and serves; its v2 migrates under a live producer with a reader on the alias,
and the working operator pod is deleted mid-migration: the standby takes over, the
StatefulSet replaces the pod, and the migration completes with no reader error and the
index equal to the test's recomputation of every event.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e_checkpoints import checkpoint_env
from e2e_operator import GATE_SECONDS
from e2e_views import G, P, V, ViewHandle, orders_backlog, view_body, wait_alias_equals
from kubernetes import client

from dvstack.chart import Helm, short_id
from dvstack.helm import helm_binary
from dvstack.settings import load
from dvstack.traffic import AliasReader, LiveProducer
from dvstack.waiting import wait_for

pytestmark = pytest.mark.real_node

SQL_V2 = ("SELECT customer_id, count(*) AS orders, sum(amount) AS revenue, max(amount) AS biggest "
          "FROM events GROUP BY customer_id")



def chart_values(stack: Any, namespace: str) -> dict[str, Any]:
    """The chart's values for the local stack: our image, never pulled; the stack's Kafka,
    S3 store and job template; the tests' trigger interval. Everything else is a default."""
    repository, tag = stack.images["operator"].rsplit(":", 1)
    checkpoints = checkpoint_env(stack, f"chart/{namespace}")
    host = stack.kafka_bootstrap.rsplit(":", 1)[0]
    return {
        "image": {"repository": repository, "tag": tag, "pullPolicy": "Never"},
        "watch": {"mode": "namespaces", "namespaces": [namespace]},
        "operator": {"lagPollSeconds": 1},
        "spark": {"image": stack.images["spark"], "triggerSeconds": 3,
                  "checkpointBase": checkpoints["DV_CHECKPOINT_BASE"],
                  "checkpointSecretName": checkpoints["DV_CHECKPOINT_SECRET"],
                  "checkpointS3Endpoint": checkpoints["DV_CHECKPOINT_S3_ENDPOINT"],
                  "checkpointS3Region": checkpoints["DV_CHECKPOINT_S3_REGION"],
                  "jobTemplate": yaml.safe_load(Path(stack.spark_template).read_text())},
        "tenancy": {"kafka": {"clusters": [{"namespaces": ["*"],
                                            "bootstrapServers": [f"{host}:*"]}]}},
    }


def operator_pods(core: client.CoreV1Api, namespace: str, release: str) -> dict[str, Any]:
    """The release's live operator pods that are Ready, by name."""
    pods = core.list_namespaced_pod(
        namespace, label_selector=f"app.kubernetes.io/instance={release}").items
    return {p.metadata.name: p for p in pods if p.metadata.deletion_timestamp is None
            and any(c.type == "Ready" and c.status == "True"
                    for c in p.status.conditions or [])}


def test_the_chart_runs_the_operator_as_pods_and_a_deleted_working_pod_costs_nothing(
        stack: Any, real_node: None, kube_api_client: Any, namespace: str,
        checkpoint_secret: str) -> None:  # the Secret the chart's values name
    core, custom = client.CoreV1Api(kube_api_client), client.CustomObjectsApi(kube_api_client)
    helm = Helm(helm_binary(load()), stack.kubeconfig)
    release = f"dv-{short_id()}"
    results: dict[str, Any] = {}
    installed = time.monotonic()
    helm.install(release, namespace, chart_values(stack, namespace))
    handle = ViewHandle(custom, namespace, "orders")
    try:
        wait_for(lambda: len(operator_pods(core, namespace, release)) == 2, timeout=300,
                 interval=0.5, what="both operator pods to be Ready")
        results["install_to_both_ready_s"] = round(time.monotonic() - installed, 1)
        pods = operator_pods(core, namespace, release)
        for pod in pods.values():
            assert pod.spec.node_name == "dv-node"
            security = pod.spec.containers[0].security_context
            assert security.read_only_root_filesystem and security.run_as_non_root
            assert security.capabilities.drop == ["ALL"]
        working = max(pods, key=lambda n: int(n.rsplit("-", 1)[1]))  # the highest ordinal

        topic, events = orders_backlog(stack, core, namespace, 30_000, seed=47)
        table = f"chart_{topic.split('-')[1]}"
        view = view_body(namespace, "orders", stack.kafka_bootstrap, topic, table)
        view["spec"]["cutover"] = {"stableForSeconds": 2, "retainPreviousSeconds": 5,
                                   "maxLagSeconds": GATE_SECONDS}
        custom.create_namespaced_custom_object(G, V, namespace, P, view)
        v1 = handle.wait_serving_new(None, "v1 to serve, built by the operator's pod",
                                     timeout=900)
        wait_alias_equals(stack.pg_dsn, table, events, ["orders", "revenue"],
                          "v1's alias to hold every event")

        reader = AliasReader(stack.pg_dsn, table).start()
        live = LiveProducer(stack.kafka_bootstrap, topic, rate=40, seed=211).start()
        try:
            handle.patch({"spec": {"transform": {"sql": SQL_V2}}})
            wait_for(lambda: (handle.status().get("candidate") or {}).get("phase")
                     in ("Backfilling", "CaughtUp"), timeout=300, interval=0.5,
                     what="v2 to start building", on_timeout=handle.brief)
            victim = pods[working]
            core.delete_namespaced_pod(working, namespace)  # as `kubectl delete pod` does
            deleted = time.monotonic()
            wait_for(lambda: working in operator_pods(core, namespace, release)
                     and operator_pods(core, namespace, release)[working].metadata.uid
                     != victim.metadata.uid, timeout=300, interval=0.5,
                     what="the StatefulSet to replace the deleted operator pod")
            results["deleted_to_replacement_ready_s"] = round(time.monotonic() - deleted, 1)
            v2 = handle.wait_serving_new(v1, "v2 to take over after the operator pod's loss",
                                         timeout=900)
            results["deleted_to_v2_serving_s"] = round(time.monotonic() - deleted, 1)
        finally:
            reader.stop()
            events += live.stop()
        assert live.failures == []
        assert reader.errors == []
        assert v2 != v1
        wait_alias_equals(stack.pg_dsn, table, events, ["orders", "revenue", "biggest"],
                          "v2's alias to equal the recomputation of every event")
        results.update(reader_queries=reader.queries,
                       reader_worst_stall_ms=round(reader.worst_stall * 1000, 1),
                       live_events=live.count())
        jobs = core.list_namespaced_pod(namespace, label_selector="spark-role").items
        assert jobs and {p.spec.node_name for p in jobs} == {"dv-node"}
    finally:
        # the views go while the operator runs (its finalizer), then the operator
        try:
            custom.delete_namespaced_custom_object(G, V, namespace, P, "orders")
        except client.exceptions.ApiException as exc:
            if exc.status != 404:
                raise
        wait_for(handle.gone, timeout=180, interval=1, what="the view to be deleted")
        helm.uninstall(release, namespace)
    out = Path(stack.state_dir) / "results"
    out.mkdir(exist_ok=True)
    (out / "chart_on_node.json").write_text(json.dumps(results, indent=2))
