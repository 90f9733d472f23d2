"""The product as a platform installs it, on the real node, and every pod it depends on lost
in turn: `helm install` of the chart runs the operator as pods of its own image, its jobs
run as pods on the real Spark Operator, under a live producer.

Two replicas (Kopf peering: the highest ordinal works, the other stands by), the chart's
security defaults (non-root, read-only root filesystem, no capabilities). One view serves
every check:

0. it is applied in a namespace that lacks the installation's checkpoint Secret, which its
   jobs mount (the operator checks the view's own Secrets first, not this one): the kubelet
   says so only in a FailedMount Event, and the view's status must carry the kubelet's
   words (Degraded, SecretMissing) until the Secret is created;
1. v1's executor pod is force-deleted mid-batch: while its driver counts tasks running on
   it, of a batch the job has begun and not committed (the kubelet kills the container at
   once); Spark's driver asks for a new executor and the lost tasks run again there;
2. v1's driver pod is force-deleted mid-replay: the Spark Operator reruns the application
   (the view's restart policy) and the new driver resumes from its `s3a://` checkpoint,
   the batch numbers carrying on; v1's index must then equal the test's recomputation;
3. v2 migrates under a live producer with a reader on the alias, and the working operator
   pod is deleted mid-migration: the standby takes over, the StatefulSet replaces the pod,
   and the migration completes with no reader error and the index equal to the
   recomputation of every event. v2 (and v1's job, restarted) runs with the default
   placement, its tasks in its driver pod: no executor pod;
4. `helm upgrade` runs the chart's CRD upgrade hook, a Job of the operator's image, on the
   node, and Helm succeeds only if it did; the view goes on serving v2.

(One scene for what were two files: each cost an operator, a first replay and a
convergence on the node.)
"""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from dvstack.chart import Helm, short_id, unique_name
from dvstack.helm import helm_binary
from dvstack.settings import load
from dvstack.testing import replay
from dvstack.testing.traffic import AliasReader, LiveProducer
from dvstack.testing.waiting import wait_for
from support.e2e.checkpoints import checkpoint_env
from support.e2e.operator import GATE_SECONDS, TRIGGER_SECONDS
from support.e2e.views import (
    G,
    P,
    V,
    ViewHandle,
    ledger_batch_ids,
    newest_batch,
    orders_backlog,
    running_batch,
    view_body,
    wait_alias_equals,
)

pytestmark = pytest.mark.real_node

EVENTS = 120_000
PER_BATCH = 8_000
"""Fifteen batches of the backlog at least: the pod faults land mid-replay, not after it.
The executor is deleted when a poll catches it running tasks; asked first (before the job's
progress report), a poll every 0.1 s caught it in the first batch it could (batch 2) where
the other order once took 23 batches."""
V2_PER_BATCH = 40_000
"""v2 is not under fault: it replays in a few batches."""
SPARK_UI_PORT = 4040
"""Spark's default UI port: the job template leaves the UI on in the driver pod."""
SQL_V2 = ("SELECT customer_id, count(*) AS orders, sum(amount) AS revenue, max(amount) AS biggest "
          "FROM events GROUP BY customer_id")


def chart_values(stack: Any, namespace: str) -> dict[str, Any]:
    """The chart's values for the local stack: our image, never pulled; the stack's Kafka,
    S3 store and job template; the tests' trigger interval; jobs in the view's namespace
    (the one the stack labels for the real Spark Operator): this file holds the real node and
    Spark Operator to the stand-in, where jobs run is test_two_namespaces' and the chart
    tests'. Everything else is a default."""
    repository, tag = stack.images["operator"].rsplit(":", 1)
    checkpoints = checkpoint_env(stack, f"chart/{namespace}")
    host = stack.kafka_bootstrap.rsplit(":", 1)[0]
    return {
        "image": {"repository": repository, "tag": tag, "pullPolicy": "Never"},
        "watch": {"mode": "namespaces", "namespaces": [namespace]},
        "jobs": {"namespace": ""},
        "operator": {"lagPollSeconds": 1},
        "spark": {"image": stack.images["spark"], "triggerSeconds": int(TRIGGER_SECONDS),
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


def _pods(core: client.CoreV1Api, namespace: str, role: str) -> list[Any]:
    return [p for p in core.list_namespaced_pod(
        namespace, label_selector=f"spark-role={role}").items
        if p.metadata.deletion_timestamp is None]


def _running(core: client.CoreV1Api, namespace: str, role: str) -> list[Any]:
    return [p for p in _pods(core, namespace, role) if p.status.phase == "Running"]


def active_tasks(driver: Any, executor: Any) -> int:
    """Tasks `executor` runs now, as its driver counts them (Spark's monitoring REST API on
    the driver pod's UI port, which pods and this host reach); 0 when the driver does not
    answer yet."""
    base = f"http://{driver.status.pod_ip}:{SPARK_UI_PORT}/api/v1/applications"
    try:
        with urllib.request.urlopen(base, timeout=2) as answer:
            (application,) = json.load(answer)
        with urllib.request.urlopen(f"{base}/{application['id']}/executors",
                                    timeout=2) as answer:
            executors = json.load(answer)
    except (OSError, ValueError):
        return 0
    return sum(int(e.get("activeTasks", 0)) for e in executors
               if e.get("id") != "driver"
               and str(e.get("hostPort", "")).split(":")[0] == executor.status.pod_ip)


def _hook_pods_scheduled(core: client.CoreV1Api, namespace: str, job: str) -> dict[str, str]:
    """The hook Job's pods and the node the scheduler gave each, from their Scheduled Events
    (the Job and its pods are deleted once it succeeds: `hook-succeeded`)."""
    events = core.list_namespaced_event(namespace, field_selector="reason=Scheduled").items
    return {e.involved_object.name: e.message.rsplit(" to ", 1)[-1] for e in events
            if e.involved_object.kind == "Pod" and e.involved_object.name.startswith(f"{job}-")}


def _force_delete(core: client.CoreV1Api, pod: Any) -> None:
    core.delete_namespaced_pod(pod.metadata.name, pod.metadata.namespace,
                               grace_period_seconds=0)


def _secret_missing_then_created(core: client.CoreV1Api, stack: Any, handle: ViewHandle,
                                 namespace: str, secret: str, applied: float,
                                 results: dict[str, Any]) -> None:
    """Step 0: the kubelet's FailedMount in the view's status, then the driver once the
    Secret exists."""
    def blocked() -> bool:
        degraded = handle.condition("Degraded")
        return degraded.get("reason") == "SecretMissing" and (
            f'FailedMount: MountVolume.SetUp failed for volume "{secret}-volume"'
            f' : secret "{secret}" not found') in degraded.get("message", "")

    wait_for(blocked, timeout=300, interval=0.5, on_timeout=handle.brief,
             what="the view to show the kubelet's FailedMount for the missing Secret")
    results["secret_missing_shown_s"] = round(time.monotonic() - applied, 1)
    results["secret_missing_message"] = handle.condition("Degraded")["message"]
    replay.ensure_checkpoint_secret(core, namespace, stack.s3)
    restored = time.monotonic()
    wait_for(lambda: _running(core, namespace, "driver"), timeout=300, interval=0.5,
             what="the driver to run once its Secret exists", on_timeout=handle.brief)
    results["driver_running_after_secret_s"] = round(time.monotonic() - restored, 1)


def _executor_then_driver_deleted(core: client.CoreV1Api, stack: Any, handle: ViewHandle,
                                  namespace: str, revision: str,
                                  results: dict[str, Any]) -> None:
    """Steps 1 and 2, mid-replay: the executor while it runs tasks of a batch not yet
    committed (its driver's own count of the executor's active tasks, and the job's report
    of the batch it has begun), then the driver; the batch numbers must carry on from the
    checkpoint, the interrupted batch committed once."""
    def mid_batch() -> tuple[Any, int, tuple[int, int]] | None:
        executors, drivers = (_running(core, namespace, r) for r in ("executor", "driver"))
        if not (executors and drivers):
            return None
        # the fleeting condition first: a batch's tasks run for a fraction of a second
        tasks = active_tasks(drivers[0], executors[0])
        if not tasks:
            return None
        batch = running_batch(stack.pg_dsn, revision)  # stays until the batch commits
        return (executors[0], tasks, batch) if batch and batch[0] >= 2 else None

    victim, tasks, interrupted = wait_for(
        mid_batch, timeout=600, interval=0.1, on_timeout=handle.brief,
        what="two committed batches and the executor running tasks of a third")
    _force_delete(core, victim)
    deleted = time.monotonic()
    results["executor_deleted_in_batch"] = {"batch": interrupted[0],
                                            "records_read": interrupted[1],
                                            "active_tasks": tasks}
    wait_for(lambda: [p for p in _running(core, namespace, "executor")
                      if p.metadata.uid != victim.metadata.uid],
             timeout=180, interval=0.5, what="Spark's driver to start a new executor pod")
    results["executor_replaced_s"] = round(time.monotonic() - deleted, 1)
    # By batch number, not by count: the operator prunes the ledger as batches commit
    # (adapters.postgres.sink.prune_ledger keeps the newest 20 at least).
    wait_for(lambda: newest_batch(stack.pg_dsn, revision) >= interrupted[0] + 1,
             timeout=300, interval=0.5, what="two more batches on the new executor",
             on_timeout=handle.brief)
    results["executor_to_next_batch_s"] = round(time.monotonic() - deleted, 1)
    # the batch the executor was reading was written on the new one (once: the ledger's
    # key is the revision and the batch; the index's equality below says its rows too)
    assert interrupted[0] in ledger_batch_ids(stack.pg_dsn, revision)

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
    wait_for(lambda: newest_batch(stack.pg_dsn, revision) > max(before),
             timeout=300, interval=0.5, what="a batch from the rerun driver",
             on_timeout=handle.brief)
    results["driver_to_next_batch_s"] = round(time.monotonic() - deleted, 1)
    committed_since = set(ledger_batch_ids(stack.pg_dsn, revision)) - set(before)
    # resumed from its checkpoint: the batch numbers carry on, none ran from offset 0
    # (batch 0 again would be a row the pruned ledger no longer holds)
    assert committed_since and min(committed_since) > max(before), sorted(committed_since)


def test_the_charts_operator_pods_and_the_jobs_pods_each_deleted_cost_nothing(
        stack: Any, real_node: None, kube_api_client: Any, namespace: str,
        checkpoint_secret: str) -> None:  # the Secret the chart's values name
    core, custom = client.CoreV1Api(kube_api_client), client.CustomObjectsApi(kube_api_client)
    helm = Helm(helm_binary(load()), stack.kubeconfig)
    release = f"dv-{short_id()}"
    results: dict[str, Any] = {}
    installed = time.monotonic()
    helm.install(release, namespace, chart_values(stack, namespace))
    handle = ViewHandle(custom, namespace, "orders")
    reader: AliasReader | None = None
    live: LiveProducer | None = None
    try:
        # history older than the gate: v1 must still be replaying at step 2
        topic, events = orders_backlog(stack, core, namespace, EVENTS, seed=29, age_seconds=3600)
        table = f"chart_{topic.split('-')[1]}"
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

        view = view_body(namespace, "orders", stack.kafka_bootstrap, topic, table)
        view["spec"]["source"]["maxOffsetsPerTrigger"] = PER_BATCH
        view["spec"]["spark"] = {"executor": {"instances": 1}}  # step 1 deletes its pod
        view["spec"]["cutover"] = {"stableForSeconds": 2, "retainPreviousSeconds": 5,
                                   "maxLagSeconds": GATE_SECONDS}
        live = LiveProducer(stack.kafka_bootstrap, topic, rate=40, seed=331).start()
        core.delete_namespaced_secret(checkpoint_secret, namespace)  # step 0
        custom.create_namespaced_custom_object(G, V, namespace, P, view)
        applied = time.monotonic()
        wait_for(lambda: (handle.status().get("candidate") or {}).get("revision"),
                 timeout=120, interval=0.5, what="the view's first revision")
        v1 = handle.status()["candidate"]["revision"]
        _secret_missing_then_created(core, stack, handle, namespace, checkpoint_secret,
                                     applied, results)
        _executor_then_driver_deleted(core, stack, handle, namespace, v1, results)
        assert handle.wait_serving_new(None, "v1 to serve after its pods' deletions",
                                       timeout=900) == v1
        events += live.stop()
        assert live.failures == []
        live = None
        wait_alias_equals(stack.pg_dsn, table, events, ["orders", "revenue"],
                          "v1's alias to equal the recomputation of every event", timeout=300)
        batches = ledger_batch_ids(stack.pg_dsn, v1)
        assert batches == sorted(set(batches))  # each batch once
        results.update(v1_events=len(events), v1_batches=len(batches))

        # 3. v2 under traffic, the working operator pod deleted mid-migration
        reader = AliasReader(stack.pg_dsn, table).start()
        live = LiveProducer(stack.kafka_bootstrap, topic, rate=40, seed=211).start()
        # v2 with the default placement: no executors, its tasks in its driver (v1's job
        # restarts so too, from its checkpoint, while it serves)
        handle.patch({"spec": {"transform": {"sql": SQL_V2},
                               "source": {"maxOffsetsPerTrigger": V2_PER_BATCH},
                               "spark": {"executor": {"instances": 0}}}})
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
        reader.stop()
        live_v2 = live.stop()
        assert live.failures == []
        live = None
        events += live_v2
        assert reader.errors == []
        assert v2 != v1
        wait_alias_equals(stack.pg_dsn, table, events, ["orders", "revenue", "biggest"],
                          "v2's alias to equal the recomputation of every event")
        results.update(events=len(events), v2_live_events=len(live_v2),
                       reader_queries=reader.queries,
                       reader_worst_stall_ms=round(reader.worst_stall * 1000, 1))
        jobs = core.list_namespaced_pod(namespace, label_selector="spark-role").items
        assert jobs and {p.spec.node_name for p in jobs} == {"dv-node"}
        v2_pods = [p.metadata.labels["spark-role"] for p in jobs
                   if p.metadata.labels.get("derivedviews.io/revision") == v2
                   and p.status.phase == "Running"]
        assert v2_pods == ["driver"], v2_pods  # v2's records counted by its driver alone

        # 4. `helm upgrade` as a platform runs it: the chart's pre-upgrade hook, a Job of
        # the operator's image under its own short-lived RBAC, applies the CRD on the node
        upgraded = time.monotonic()
        helm.upgrade(release, namespace, chart_values(stack, namespace), hooks=True)
        results["upgrade_with_crd_hook_s"] = round(time.monotonic() - upgraded, 1)
        hook_job = f"{unique_name(namespace, release)}-crds"[:63].rstrip("-")  # the template's
        hook_pods = _hook_pods_scheduled(core, namespace, hook_job)
        assert hook_pods and set(hook_pods.values()) == {"dv-node"}, hook_pods
        assert handle.active() == v2 and handle.ready()  # the upgrade changed nothing served
    finally:
        if reader is not None:
            reader.stop()
        if live is not None:
            live.stop()
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
