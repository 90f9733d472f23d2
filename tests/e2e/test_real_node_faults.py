"""Faults on the real node: an executor pod and then the driver pod deleted mid-replay.

The view's job runs as pods of the project's Spark image, submitted by the real Spark
Operator, under a live producer. Its executor pod is force-deleted (the kubelet kills
the container at once) with a batch under way: Spark's driver asks the API server for a
new executor and the batch's tasks run again there. Then its driver pod is
force-deleted: the Spark Operator sees the driver gone, reruns the application (the
view's restart policy), and the new driver resumes from the `s3a://` checkpoint, the
batch numbers carrying on.

Before all that, the view is applied in a namespace that lacks the checkpoint Secret its
jobs mount (the operator checks the view's own Secrets first, not the installation's):
the kubelet cannot mount it and says so only in a FailedMount Event, and the view's
status must carry the kubelet's words (Degraded, SecretMissing) until it is created. The index must equal the test's recomputation of every event,
and a reader on the alias sees no error. One view's replay serves every check.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from e2e_operator import GATE_SECONDS
from e2e_views import (
    G,
    P,
    V,
    ViewHandle,
    ledger_batch_ids,
    orders_backlog,
    view_body,
    wait_alias_equals,
)
from kubernetes import client

from dvstack import replay
from dvstack.traffic import AliasReader, LiveProducer
from dvstack.waiting import wait_for

pytestmark = pytest.mark.real_node

EVENTS = 120_000
PER_BATCH = 8_000
"""Fifteen batches of the backlog at least: the faults land mid-replay, not after it."""
COLUMNS = ["orders", "revenue"]



def _pods(core: client.CoreV1Api, namespace: str, role: str) -> list[Any]:
    return [p for p in core.list_namespaced_pod(
        namespace, label_selector=f"spark-role={role}").items
        if p.metadata.deletion_timestamp is None]


def _running(core: client.CoreV1Api, namespace: str, role: str) -> list[Any]:
    return [p for p in _pods(core, namespace, role) if p.status.phase == "Running"]


def _force_delete(core: client.CoreV1Api, pod: Any) -> None:
    core.delete_namespaced_pod(pod.metadata.name, pod.metadata.namespace,
                               grace_period_seconds=0)


def test_executor_and_driver_pods_deleted_mid_replay_lose_and_duplicate_nothing(
        stack: Any, real_node: None, kube_api_client: Any, namespace: str,
        operator_process: Path, checkpoint_secret: str) -> None:
    core, custom = client.CoreV1Api(kube_api_client), client.CustomObjectsApi(kube_api_client)
    # history older than the gate: the first revision must still be replaying at step 2
    topic, events = orders_backlog(stack, core, namespace, EVENTS, seed=29, age_seconds=3600)
    table = f"faults_{topic.split('-')[1]}"
    view = view_body(namespace, "orders", stack.kafka_bootstrap, topic, table,
                     max_lag_seconds=GATE_SECONDS)
    view["spec"]["source"]["maxOffsetsPerTrigger"] = PER_BATCH
    live = LiveProducer(stack.kafka_bootstrap, topic, rate=40, seed=331).start()
    reader: AliasReader | None = None
    results: dict[str, Any] = {}
    try:
        # 0. the checkpoint Secret missing: the first driver waits for its volume
        core.delete_namespaced_secret(checkpoint_secret, namespace)
        custom.create_namespaced_custom_object(G, V, namespace, P, view)
        applied = time.monotonic()
        handle = ViewHandle(custom, namespace, "orders")
        wait_for(lambda: (handle.status().get("candidate") or {}).get("revision"),
                 timeout=120, interval=0.5, what="the view's first revision")
        revision = handle.status()["candidate"]["revision"]

        def blocked() -> bool:
            degraded = handle.condition("Degraded")
            return degraded.get("reason") == "SecretMissing" and (
                f'FailedMount: MountVolume.SetUp failed for volume "{checkpoint_secret}-volume"'
                f' : secret "{checkpoint_secret}" not found') in degraded.get("message", "")

        wait_for(blocked, timeout=300, interval=0.5, on_timeout=handle.brief,
                 what="the view to show the kubelet's FailedMount for the missing Secret")
        results["secret_missing_shown_s"] = round(time.monotonic() - applied, 1)
        results["secret_missing_message"] = handle.condition("Degraded")["message"]
        replay.ensure_checkpoint_secret(core, namespace, stack.s3)
        restored = time.monotonic()
        wait_for(lambda: _running(core, namespace, "driver"), timeout=300, interval=0.5,
                 what="the driver to run once its Secret exists", on_timeout=handle.brief)
        results["driver_running_after_secret_s"] = round(time.monotonic() - restored, 1)

        # 1. the executor pod, with batches committed and more to come
        wait_for(lambda: len(ledger_batch_ids(stack.pg_dsn, revision)) >= 2
                 and _running(core, namespace, "executor"), timeout=600, interval=0.5,
                 what="two committed batches and a running executor pod",
                 on_timeout=handle.brief)
        victim = _running(core, namespace, "executor")[0]
        before = ledger_batch_ids(stack.pg_dsn, revision)
        _force_delete(core, victim)
        deleted = time.monotonic()
        wait_for(lambda: [p for p in _running(core, namespace, "executor")
                          if p.metadata.uid != victim.metadata.uid],
                 timeout=180, interval=0.5, what="Spark's driver to start a new executor pod")
        results["executor_replaced_s"] = round(time.monotonic() - deleted, 1)
        wait_for(lambda: len(ledger_batch_ids(stack.pg_dsn, revision)) >= len(before) + 2,
                 timeout=300, interval=0.5, what="two more batches on the new executor",
                 on_timeout=handle.brief)
        results["executor_to_next_batch_s"] = round(time.monotonic() - deleted, 1)

        # 2. the driver pod, mid-replay: the Spark Operator reruns the application
        driver = _running(core, namespace, "driver")[0]
        assert handle.active() is None, "the replay ended before the driver could be deleted"
        before = ledger_batch_ids(stack.pg_dsn, revision)
        _force_delete(core, driver)
        deleted = time.monotonic()
        wait_for(lambda: [p for p in _running(core, namespace, "driver")
                          if p.metadata.uid != driver.metadata.uid],
                 timeout=300, interval=0.5, what="the Spark Operator to rerun the driver",
                 on_timeout=handle.brief)
        results["driver_rerun_running_s"] = round(time.monotonic() - deleted, 1)
        wait_for(lambda: len(ledger_batch_ids(stack.pg_dsn, revision)) > len(before),
                 timeout=300, interval=0.5, what="a batch from the rerun driver",
                 on_timeout=handle.brief)
        results["driver_to_next_batch_s"] = round(time.monotonic() - deleted, 1)
        after = ledger_batch_ids(stack.pg_dsn, revision)
        # resumed from its checkpoint: the batch numbers carry on, none ran from offset 0
        assert after[:len(before)] == before and min(after[len(before):]) > max(before)

        assert handle.wait_serving_new(None, "the view to serve after both faults",
                                       timeout=900) == revision
        reader = AliasReader(stack.pg_dsn, table).start()
        wait_for(lambda: reader is not None and reader.queries >= 200, timeout=60,
                 interval=0.5, what="the reader to query the alias")
    finally:
        if reader is not None:
            reader.stop()
        events += live.stop()
    assert live.failures == []
    assert reader is not None and reader.errors == []
    wait_alias_equals(stack.pg_dsn, table, events, COLUMNS,
                      "the alias to equal the recomputation of every event", timeout=300)
    batches = ledger_batch_ids(stack.pg_dsn, revision)
    assert batches == sorted(set(batches))
    results.update(events=len(events), batches=len(batches),
                   reader_queries=reader.queries,
                   reader_worst_stall_ms=round(reader.worst_stall * 1000, 1))
    out = Path(stack.state_dir) / "results"
    out.mkdir(exist_ok=True)
    (out / "real_node_faults.json").write_text(json.dumps(results, indent=2))

    custom.delete_namespaced_custom_object(G, V, namespace, P, "orders")
    wait_for(handle.gone, timeout=120, interval=1, what="the view to be deleted")
