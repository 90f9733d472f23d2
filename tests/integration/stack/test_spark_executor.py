"""The stand-in Spark Operator + kubelet against the real API server and the real CRD.

Each test runs a tiny Python application through the real spark-submit and
checks what the real operator and kubelet would show: the application's
status, and the driver pod `<app>-driver` with its container
`spark-kubernetes-driver`.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from dvstack.spark.local_command import LocalSpark
from dvstack.spark.local_kubelet import LocalKubelet
from dvstack.spark.stand_in import SparkOperator
from dvstack.testing.waiting import wait_for

APP = Path(__file__).parent / "apps" / "report_env_and_wait.py"
G, V, P = "sparkoperator.k8s.io", "v1beta2", "sparkapplications"
DRIVER = "spark-kubernetes-driver"


def _app(name: str, args: list[str], driver: dict[str, Any] | None = None,
         **spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"{G}/{V}", "kind": "SparkApplication", "metadata": {"name": name},
            "spec": {"type": "Python", "mode": "cluster", "sparkVersion": "4.0.0",
                     "image": "registry.example/dv-job:1.0",
                     "mainApplicationFile": f"local://{APP}", "arguments": args,
                     "driver": {"cores": 1, "memory": "512m", **(driver or {})},
                     "executor": {"instances": 1, "cores": 1}, **spec}}


class Cluster:
    """Reads the test needs, as plain JSON."""

    def __init__(self, api_client: Any, namespace: str) -> None:
        self.core = client.CoreV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self.ns = namespace

    def create(self, app: dict[str, Any]) -> None:
        self.custom.create_namespaced_custom_object(G, V, self.ns, P, app)

    def status(self, name: str) -> dict[str, Any]:
        return dict(self.custom.get_namespaced_custom_object(G, V, self.ns, P, name)
                    .get("status") or {})

    def state(self, name: str) -> str:
        return str((self.status(name).get("applicationState") or {}).get("state", ""))

    def pod(self, name: str) -> dict[str, Any] | None:
        try:
            resp = self.core.read_namespaced_pod(name, self.ns, _preload_content=False)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        pod: dict[str, Any] = json.loads(resp.data)
        return pod

    def container_state(self, pod_name: str) -> dict[str, Any]:
        pod = self.pod(pod_name) or {}
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            if status["name"] == DRIVER:
                return dict(status.get("state") or {})
        return {}


@pytest.fixture()
def cluster(kube_api_client: Any, namespace: str) -> Cluster:
    return Cluster(kube_api_client, namespace)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().split()[2] != "Z"


def _report(path: Path) -> dict[str, Any]:
    report: dict[str, Any] = json.loads(path.read_text())
    return report


def test_driver_pod_env_and_deletion_after_the_kill(cluster: Cluster, tmp_path: Path) -> None:
    ns = cluster.ns
    cluster.core.create_namespaced_secret(ns, {"metadata": {"name": "db"},
                                               "stringData": {"password": "s3cret-value"}})
    cluster.core.create_namespaced_config_map(ns, {"metadata": {"name": "cm"},
                                                   "data": {"k": "from-configmap"}})
    cluster.core.create_namespaced_secret(ns, {"metadata": {"name": "bulk"},
                                               "stringData": {"A": "1", "B": "2"}})
    out = tmp_path / "report.json"
    env = [{"name": "PGPASSWORD", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}},
           {"name": "PLAIN", "value": "plain-value"},
           {"name": "FROM_CM", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "k"}}},
           {"name": "B", "value": "env wins over envFrom"}]
    cluster.create(_app("waiter", [str(out), "wait"], driver={
        "env": env, "envFrom": [{"secretRef": {"name": "bulk"}, "prefix": "BULK_"},
                                {"secretRef": {"name": "bulk"}}],
        "labels": {"team": "views"}}))
    wait_for(out.is_file, timeout=120, what="the application to start and report")
    got = _report(out)["env"]
    assert (got["PGPASSWORD"], got["PLAIN"], got["FROM_CM"]) == \
        ("s3cret-value", "plain-value", "from-configmap")
    assert (got["BULK_A"], got["A"], got["B"]) == ("1", "1", "env wins over envFrom")

    wait_for(lambda: cluster.state("waiter") == "RUNNING", timeout=30, what="RUNNING")
    status = cluster.status("waiter")
    assert status["submissionAttempts"] == 1 and status["executionAttempts"] == 1
    assert status["driverInfo"]["podName"] == "waiter-driver"
    app = cluster.custom.get_namespaced_custom_object(G, V, ns, P, "waiter")
    assert "s3cret-value" not in json.dumps(app)
    pod = cluster.pod("waiter-driver")
    assert pod is not None
    assert pod["metadata"]["ownerReferences"] == [{
        "apiVersion": f"{G}/{V}", "kind": "SparkApplication", "name": "waiter",
        "uid": app["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]
    labels = pod["metadata"]["labels"]
    assert labels["sparkoperator.k8s.io/app-name"] == "waiter"
    assert labels["sparkoperator.k8s.io/submission-id"] == status["submissionID"]
    assert labels["spark-role"] == "driver" and labels["team"] == "views"
    assert labels["spark-app-selector"] == status["sparkApplicationId"]
    assert [c["name"] for c in pod["spec"]["containers"]] == [DRIVER]
    assert pod["status"]["phase"] == "Running"
    assert "s3cret-value" not in json.dumps(pod)

    pid = _report(out)["pid"]
    cluster.custom.delete_namespaced_custom_object(G, V, ns, P, "waiter")
    wait_for(lambda: cluster.pod("waiter-driver") is None, timeout=90,
             what="the garbage collector and the kubelet to remove the driver pod")
    assert not _alive(pid), "the driver pod was removed while its process still ran"


def test_missing_secret_keeps_the_driver_pending_until_it_appears(
        cluster: Cluster, tmp_path: Path) -> None:
    ns, out = cluster.ns, tmp_path / "report.json"
    env = [{"name": "PGPASSWORD",
            "valueFrom": {"secretKeyRef": {"name": "views-db", "key": "password"}}}]
    cluster.create(_app("nosecret", [str(out), "wait"], driver={"env": env}))
    wait_for(lambda: cluster.container_state("nosecret-driver").get("waiting"), timeout=60,
             what="the driver container to wait")
    assert cluster.container_state("nosecret-driver")["waiting"] == {
        "reason": "CreateContainerConfigError", "message": 'secret "views-db" not found'}
    pod = cluster.pod("nosecret-driver")
    assert pod is not None and pod["status"]["phase"] == "Pending"
    assert cluster.state("nosecret") == "SUBMITTED"

    cluster.core.create_namespaced_secret(ns, {"metadata": {"name": "views-db"},
                                               "stringData": {"user": "u"}})
    wait_for(lambda: "couldn't find key" in json.dumps(cluster.container_state("nosecret-driver")),
             timeout=60, what="the kubelet to retry and find the key missing")
    assert cluster.container_state("nosecret-driver")["waiting"]["message"] == \
        f"couldn't find key password in Secret {ns}/views-db"
    assert cluster.state("nosecret") == "SUBMITTED"

    cluster.core.patch_namespaced_secret("views-db", ns, {"stringData": {"password": "pw"}})
    wait_for(out.is_file, timeout=120, what="the healed driver to start")
    assert _report(out)["env"]["PGPASSWORD"] == "pw"
    wait_for(lambda: cluster.state("nosecret") == "RUNNING", timeout=30, what="RUNNING")


def test_mounted_secret_waits_for_the_secret_then_the_job_reads_its_files(
        cluster: Cluster, tmp_path: Path) -> None:
    """`driver.secrets`/`executor.secrets` as upstream mounts them: Spark's volume on the pod,
    the pod ContainerCreating while the Secret is missing, and the job finding the files under
    its SparkConf keys (a directory of this submission here; executors share the driver's)."""
    ns, out = cluster.ns, tmp_path / "report.json"
    mount = {"name": "job-creds", "path": "/mnt/secrets/job-creds", "secretType": "Generic"}
    cluster.create(_app("mounted", [str(out), "secrets"], driver={"secrets": [mount]},
                        executor={"instances": 1, "cores": 1, "secrets": [mount]}))
    wait_for(lambda: cluster.container_state("mounted-driver").get("waiting"), timeout=60,
             what="the driver container to wait for its volume")
    failed = 'MountVolume.SetUp failed for volume "job-creds-volume" : secret "job-creds" not found'
    # as a kubelet: no message on the state, the cause only in the FailedMount Event
    assert cluster.container_state("mounted-driver")["waiting"] == {
        "reason": "ContainerCreating"}
    events = cluster.core.list_namespaced_event(
        ns, field_selector="involvedObject.name=mounted-driver").items
    assert [(e.type, e.message) for e in events if e.reason == "FailedMount"] == \
        [("Warning", failed)]
    pod = cluster.pod("mounted-driver")
    assert pod is not None and pod["status"]["phase"] == "Pending"
    # Beside the API server's own (the ServiceAccount token's projected volume).
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes["job-creds-volume"]["secret"]["secretName"] == "job-creds"
    assert {"name": "job-creds-volume", "mountPath": "/mnt/secrets/job-creds"} in \
        pod["spec"]["containers"][0]["volumeMounts"]
    assert cluster.state("mounted") == "SUBMITTED" and not out.exists()

    values = {"username": "dv-reader", "password": "pa ss\nword-9f2"}
    cluster.core.create_namespaced_secret(ns, {"metadata": {"name": "job-creds"},
                                               "stringData": values})
    wait_for(out.is_file, timeout=120, what="the driver to start once its Secret exists")
    found = _report(out)["secrets"]
    driver = found["spark.kubernetes.driver.secrets.job-creds"]
    assert driver["files"] == values
    assert found["spark.kubernetes.executor.secrets.job-creds"] == driver
    app_id = pod["metadata"]["labels"]["spark-app-selector"]
    directory = Path(driver["dir"])
    assert directory.parts[-3:] == (ns, app_id, "job-creds")
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert stat.S_IMODE((directory / "password").stat().st_mode) == 0o600
    assert not any("word-9f2" in v for v in _report(out)["env"].values())  # files, not env
    wait_for(lambda: cluster.state("mounted") == "RUNNING", timeout=30, what="RUNNING")

    cluster.custom.delete_namespaced_custom_object(G, V, ns, P, "mounted")
    wait_for(lambda: cluster.pod("mounted-driver") is None, timeout=90,
             what="the driver pod to be removed")
    wait_for(lambda: not directory.parent.exists(), timeout=10,
             what="the kubelet to remove the submission's Secret files")


def test_failed_job_retries_then_fails_with_upstream_message_and_termination_message(
        cluster: Cluster, tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    cause = "batch 18: a row has NULL in primary-key column customer_id"
    cluster.create(_app("failer", [str(out), "fail", cause], restartPolicy={
        "type": "OnFailure", "onFailureRetries": 1, "onFailureRetryInterval": 1}))
    cluster.create(_app("done", [str(tmp_path / "ok.json"), "ok"]))
    wait_for(lambda: cluster.state("failer") == "FAILED", timeout=240,
             what="the application to fail after its retry")
    status = cluster.status("failer")
    assert status["applicationState"]["errorMessage"] == \
        "driver container failed with ExitCode: 1, Reason: Error"
    assert status["executionAttempts"] == 2 and status["submissionAttempts"] == 2
    assert len(Path(str(out) + ".attempts").read_text().split()) == 2
    assert status.get("terminationTime")
    terminated = cluster.container_state("failer-driver")["terminated"]
    assert (terminated["exitCode"], terminated["reason"], terminated["message"]) == \
        (1, "Error", cause)
    pod = cluster.pod("failer-driver")
    assert pod is not None and pod["status"]["phase"] == "Failed"

    wait_for(lambda: cluster.state("done") == "COMPLETED", timeout=120, what="COMPLETED")
    terminated = cluster.container_state("done-driver")["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (0, "Completed")
    assert "errorMessage" not in cluster.status("done")["applicationState"]


def test_the_replay_jobs_own_error_reaches_the_driver_pod(cluster: Cluster, stack: Any) -> None:
    job = f"local://{stack.image_app_root}/spark_templates/derived_view_job.py"
    app = _app("badconfig", ["--config-json", '{"view": "shop/v"}'], mainApplicationFile=job)
    cluster.create(app)
    wait_for(lambda: cluster.state("badconfig") == "FAILED", timeout=180,
             what="the job to refuse its configuration")
    terminated = cluster.container_state("badconfig-driver")["terminated"]
    assert terminated["exitCode"] == 2
    assert terminated["message"].startswith("invalid job config")
    assert "revision" in terminated["message"]
    assert cluster.status("badconfig")["applicationState"]["errorMessage"] == \
        "driver container failed with ExitCode: 2, Reason: Error"


def test_spec_edit_invalidates_and_resubmits(cluster: Cluster, tmp_path: Path) -> None:
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    cluster.create(_app("edited", [str(first), "wait"]))
    wait_for(first.is_file, timeout=120, what="the first submission to start")
    old_pod = cluster.pod("edited-driver")
    assert old_pod is not None
    cluster.custom.patch_namespaced_custom_object(
        G, V, cluster.ns, P, "edited", {"spec": {"arguments": [str(second), "wait"]}})
    wait_for(second.is_file, timeout=120, what="the edited application to be resubmitted")
    assert not _alive(_report(first)["pid"])
    new_pod = cluster.pod("edited-driver")
    assert new_pod is not None and new_pod["metadata"]["uid"] != old_pod["metadata"]["uid"]
    # INVALIDATING resets the counters; the resubmission is attempt 1 again.
    wait_for(lambda: cluster.state("edited") == "RUNNING", timeout=30, what="RUNNING")
    status = cluster.status("edited")
    assert (status["submissionAttempts"], status["executionAttempts"]) == (1, 1)


def test_recreating_while_the_old_driver_pod_terminates_is_refused(
        cluster: Cluster, tmp_path: Path) -> None:
    ns, out = cluster.ns, tmp_path / "report.json"
    cluster.create(_app("again", [str(out), "wait"]))
    wait_for(out.is_file, timeout=120, what="the first application to run")
    # A finalizer keeps the old pod terminating as long as the test needs.
    cluster.core.patch_namespaced_pod("again-driver", ns,
                                      {"metadata": {"finalizers": ["test.derivedviews.io/hold"]}},
                                      _content_type="application/merge-patch+json")
    cluster.custom.delete_namespaced_custom_object(G, V, ns, P, "again")
    wait_for(lambda: (cluster.pod("again-driver") or {}).get("metadata", {})
             .get("deletionTimestamp"), timeout=60, what="the old driver pod to terminate")
    wait_for(lambda: not _alive(_report(out)["pid"]), timeout=60,
             what="the kubelet to stop the old driver")

    cluster.create(_app("again", [str(tmp_path / "never.json"), "wait"]))
    wait_for(lambda: cluster.state("again") == "FAILED", timeout=60,
             what="the submission to fail on the existing driver pod")
    assert cluster.status("again")["applicationState"]["errorMessage"] == \
        "failed to submit spark application: failed to run spark-submit: driver pod already exist"
    assert not (tmp_path / "never.json").exists()
    cluster.core.patch_namespaced_pod("again-driver", ns, {"metadata": {"finalizers": None}},
                                      _content_type="application/merge-patch+json")
    wait_for(lambda: cluster.pod("again-driver") is None, timeout=30, what="the old pod to go")


def test_suspend_stops_the_driver_and_resume_submits_again(
        cluster: Cluster, tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    cluster.create(_app("pausable", [str(out), "wait"]))
    wait_for(out.is_file, timeout=120, what="the application to run")
    first_pid = _report(out)["pid"]
    cluster.custom.patch_namespaced_custom_object(G, V, cluster.ns, P, "pausable",
                                                  {"spec": {"suspend": True}})
    wait_for(lambda: cluster.state("pausable") == "SUSPENDED"
             and cluster.pod("pausable-driver") is None, timeout=60,
             what="SUSPENDED without a driver pod")
    assert not _alive(first_pid)
    status = cluster.status("pausable")
    assert status["driverInfo"] == {} and status["submissionAttempts"] == 1
    out.unlink()
    cluster.custom.patch_namespaced_custom_object(G, V, cluster.ns, P, "pausable",
                                                  {"spec": {"suspend": False}})
    wait_for(out.is_file, timeout=120, what="the resumed application to run")
    wait_for(lambda: cluster.state("pausable") == "RUNNING", timeout=30, what="RUNNING")
    # Resuming is a new submission of the same run, not a reset one.
    assert cluster.status("pausable")["submissionAttempts"] == 2
    assert len(Path(str(out) + ".attempts").read_text().split()) == 2


@pytest.fixture()
def other_node(kube_api_client: Any, tmp_path: Path) -> Iterator[LocalKubelet]:
    """A second stand-in kubelet on its own Node, driven by the test itself."""
    kubelet = LocalKubelet(kube_api_client, node_name=f"t-node-{uuid.uuid4().hex[:6]}",
                           logs_dir=tmp_path / "logs", work_dir=tmp_path / "work",
                           python=sys.executable)
    kubelet.register_node()
    yield kubelet
    kubelet.shutdown(grace=5)
    client.CoreV1Api(kube_api_client).delete_node(kubelet.node_name)


def test_outside_the_webhook_namespaces_env_and_owner_are_not_applied(
        cluster: Cluster, kube_api_client: Any, other_node: LocalKubelet, tmp_path: Path) -> None:
    ns, out = cluster.ns, tmp_path / "report.json"
    cluster.core.create_namespaced_secret(ns, {"metadata": {"name": "db"},
                                               "stringData": {"password": "pw"}})
    env = [{"name": "PGPASSWORD", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}]
    # Suspended, the stack's stand-in leaves it alone; this test submits it itself.
    cluster.create(_app("unmutated", [str(out), "ok"], driver={"env": env, "envVars": {"X": "1"}},
                        suspend=True))
    wait_for(lambda: cluster.state("unmutated") == "SUSPENDED", timeout=60, what="SUSPENDED")
    operator = SparkOperator(
        kube_api_client, node_name=other_node.node_name,
        spark=LocalSpark(spark_submit=str(Path(sys.executable).parent / "spark-submit"),
                         work_dir=str(tmp_path / "work"), max_cores=1),
        job_namespaces=frozenset({"somewhere-else"}), controller_namespaces=frozenset())
    app = cluster.custom.get_namespaced_custom_object(G, V, ns, P, "unmutated")
    assert operator.submit(app, {"submissionID": "test-submission"}) is None
    pod = cluster.pod("unmutated-driver")
    assert pod is not None
    assert "ownerReferences" not in pod["metadata"]
    assert [e["name"] for e in pod["spec"]["containers"][0]["env"]] == ["X"]

    def ran() -> bool:
        pods = [p for p in [cluster.pod("unmutated-driver")] if p]
        other_node.sync(pods)
        return bool(pods) and pods[0]["status"].get("phase") == "Succeeded"

    wait_for(ran, timeout=120, what="the second kubelet to run the pod to completion")
    got = _report(out)["env"]
    assert got["X"] == "1" and "PGPASSWORD" not in got
    cluster.core.delete_namespaced_pod("unmutated-driver", ns)
