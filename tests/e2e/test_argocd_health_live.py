"""Argo CD's health for real views: the Lua 5.1 script over objects the operator wrote.

A view is walked through what Argo CD would see — created but not yet observed, replaying,
serving, migrating to v2 while a producer writes, paused, edited while the operator is
stopped, and a second view whose Secret is missing — and at each point the script's verdict
on the live object is checked. With DV_CAPTURE_ARGOCD_TESTDATA=1 the objects are written to
gitops/argocd/resource_customizations/derivedviews.io/DerivedView/testdata/, the inputs of
health_test.yaml (Argo CD's own test format, run by tests/unit/gitops).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from dvstack.cli import apply_crds
from dvstack.testing import replay
from dvstack.testing.traffic import LiveProducer
from dvstack.testing.waiting import wait_for
from support.argocd_lua import CUSTOMIZATION, health
from support.e2e.operator import operator_env, watched
from support.e2e.views import G, P, V, ViewHandle, wait_alias_equals
from support.paths import REPO

CAPTURE = os.environ.get("DV_CAPTURE_ARGOCD_TESTDATA") == "1"
SQL_V2 = ("SELECT customer_id, count(*) AS orders, sum(amount) AS revenue, "
          "max(amount) AS biggest FROM events GROUP BY customer_id")

class Operator:
    """The operator as its own process, which the test can freeze (SIGSTOP) and thaw."""

    def __init__(self, stack: Any, namespace: str, log_path: Path, prefix: str) -> None:
        self.log = open(log_path, "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "derived_views.main", *watched(namespace)],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=operator_env(stack, prefix))

    def freeze(self) -> None:
        self.proc.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        self.thaw()
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.log.close()


@pytest.fixture()
def operator(stack: Any, kube_api_client: Any, tmp_path: Path, namespace: str,
             checkpoint_secret: str) -> Iterator[Operator]:
    apply_crds(kube_api_client, [REPO / "crds" / "derivedviews.io_derivedviews.yaml"])
    op = Operator(stack, namespace, Path(stack.logs_dir) / f"operator-e2e-{tmp_path.name}.log",
                  f"e2e/{tmp_path.name}")
    yield op
    op.stop()


def captured(obj: dict[str, Any]) -> dict[str, Any]:
    """The object as Argo CD receives it, minus server bookkeeping and Kopf's own annotations."""
    meta = obj["metadata"]
    kept_meta = {k: meta[k] for k in ("name", "namespace", "generation", "creationTimestamp",
                                      "finalizers") if k in meta}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items()
                   if k.startswith("derivedviews.io/")}
    if annotations:
        kept_meta["annotations"] = annotations
    out = {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "metadata": kept_meta,
           "spec": obj["spec"]}
    if "status" in obj:
        out["status"] = obj["status"]
    return out


def check(handle: ViewHandle, name: str, status: str, message_part: str) -> None:
    obj = handle.get()
    got_status, got_message = health(obj)
    assert (got_status, message_part in got_message) == (status, True), (
        f"{name}: Argo CD would show {got_status}: {got_message!r}; expected {status} "
        f"with {message_part!r}")
    if CAPTURE:
        path = CUSTOMIZATION / "testdata" / f"{name}.yaml"
        path.write_text(yaml.safe_dump(captured(obj), sort_keys=False, width=100))


def view_body(namespace: str, name: str, bootstrap: str, topic: str, table: str,
              secret: str) -> dict[str, Any]:
    return {"apiVersion": f"{G}/{V}", "kind": "DerivedView",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"source": {"kafka": {"bootstrapServers": bootstrap},
                                "topics": [topic], "schema": replay.ORDER_SCHEMA},
                     "transform": {"sql": replay.ORDERS_BY_CUSTOMER_SQL},
                     "sink": {"postgres": {"secretRef": {"name": secret}, "table": table},
                              "primaryKey": ["customer_id"]},
                     # The default gate (10 s) is not under test; on a loaded machine batches
                     # take longer than that.
                     "cutover": {"maxLagSeconds": 60},
                     "deletionPolicy": "Delete"}}


def test_argo_cd_health_of_real_views(stack: Any, kube_api_client: Any, namespace: str,
                                      operator: Operator) -> None:
    core, custom = client.CoreV1Api(kube_api_client), client.CustomObjectsApi(kube_api_client)
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    replay.create_topic(stack.kafka_bootstrap, topic, 2)
    backlog = replay.make_orders(20_000, seed=41)
    replay.produce(stack.kafka_bootstrap, topic, backlog)
    replay.ensure_namespace_and_sink_secret(core, namespace, "views-db", stack.pg)
    table = f"argo_{uuid.uuid4().hex[:8]}"
    handle = ViewHandle(custom, namespace, "orders")
    producer = LiveProducer(stack.kafka_bootstrap, topic, rate=50).start()
    try:
        # Created while the operator is frozen: nothing observed yet.
        operator.freeze()
        custom.create_namespaced_custom_object(G, V, namespace, P, view_body(
            namespace, "orders", stack.kafka_bootstrap, topic, table, "views-db"))
        check(handle, "new", "Progressing", "Waiting for the operator to observe the view")
        operator.thaw()

        wait_for(lambda: (handle.status().get("candidate") or {}).get("revision") is not None,
                 timeout=180, interval=0.5, what="the first replay to start")
        check(handle, "replaying", "Progressing", "")
        v1 = handle.wait_serving_new(None, "v1 to serve", timeout=600)
        check(handle, "healthy", "Healthy", "")

        handle.patch({"spec": {"transform": {"sql": SQL_V2}}})
        assert handle.get()["metadata"]["generation"] == 2, "v2 must change the spec"
        wait_for(lambda: (handle.status().get("candidate") or {}).get("revision") not in (
            None, v1) and handle.status().get("observedGeneration") == handle.get()[
            "metadata"]["generation"], timeout=180, interval=0.5, what="v2's candidate",
            on_timeout=lambda: str(handle.status()))
        check(handle, "migrating", "Progressing", "")
        v2 = handle.wait_serving_new(v1, "v2 to cut over", timeout=600)
        check(handle, "migrated", "Healthy", "")

        handle.patch({"metadata": {"annotations": {"derivedviews.io/paused": "true"}}})
        check(handle, "paused", "Suspended", "Paused")
        handle.patch({"metadata": {"annotations": {"derivedviews.io/paused": None}}})

        # Edited while the operator is frozen: Argo CD must not trust the old Ready.
        operator.freeze()
        handle.patch({"spec": {"cutover": {"retainPreviousSeconds": 120}}})
        check(handle, "stale-generation", "Progressing", "Waiting for the operator to observe "
              "generation")
        operator.thaw()
        wait_for(lambda: handle.ready() and handle.status().get("observedGeneration") ==
                 handle.get()["metadata"]["generation"], timeout=60, interval=0.5,
                 what="the policy change to be observed")
        assert handle.active() == v2

        # A second view whose Secret does not exist.
        custom.create_namespaced_custom_object(G, V, namespace, P, view_body(
            namespace, "no-secret", stack.kafka_bootstrap, topic, f"{table}_b", "missing-db"))
        broken = ViewHandle(custom, namespace, "no-secret")
        wait_for(lambda: broken.condition("Degraded").get("reason") == "SecretMissing",
                 timeout=30, interval=0.5, what="SecretMissing")
        check(broken, "degraded-secret-missing", "Degraded", "missing-db")
    finally:
        operator.thaw()
        live = producer.stop()
    assert producer.failures == []
    wait_alias_equals(stack.pg_dsn, table, backlog + live, ["orders", "revenue"],
                      "the alias to equal the recomputation of every record")
