"""The local SparkApplication executor (stand-in for the Spark Operator) against the real API server.

Each test runs a tiny Python application through the real spark-submit and
checks the status fields the real Spark Operator maintains.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from kubernetes import client

from dvstack.waiting import wait_for

APP = Path(__file__).parent / "apps" / "report_env_and_wait.py"
G, V, P = "sparkoperator.k8s.io", "v1beta2", "sparkapplications"


def _app(name: str, args: list[str], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"{G}/{V}", "kind": "SparkApplication", "metadata": {"name": name},
            "spec": {"type": "Python", "mode": "cluster", "sparkVersion": "4.0.0",
                     "mainApplicationFile": f"local://{APP}", "arguments": args, **spec}}


def _status(custom: client.CustomObjectsApi, ns: str, name: str) -> dict[str, Any]:
    return dict(custom.get_namespaced_custom_object(G, V, ns, P, name).get("status") or {})


def _state(custom: client.CustomObjectsApi, ns: str, name: str) -> str:
    return str((_status(custom, ns, name).get("applicationState") or {}).get("state", ""))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().split()[2] != "Z"


def test_env_from_secret_and_kill_on_delete(kube_api_client: Any, namespace: str,
                                            tmp_path: Path) -> None:
    core, custom = client.CoreV1Api(kube_api_client), client.CustomObjectsApi(kube_api_client)
    core.create_namespaced_secret(namespace, {"metadata": {"name": "db"},
                                              "stringData": {"password": "s3cret-value"}})
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "cm"},
                                                  "data": {"k": "from-configmap"}})
    out = tmp_path / "report.json"
    env = [{"name": "PGPASSWORD", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}},
           {"name": "PLAIN", "value": "plain-value"},
           {"name": "FROM_CM", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "k"}}}]
    custom.create_namespaced_custom_object(G, V, namespace, P, _app(
        "waiter", [str(out), "wait"], driver={"env": env}))
    wait_for(out.is_file, timeout=120, what="the application to start and report")
    report = json.loads(out.read_text())
    assert report["PGPASSWORD"] == "s3cret-value"
    assert report["PLAIN"] == "plain-value"
    assert report["FROM_CM"] == "from-configmap"
    assert _state(custom, namespace, "waiter") == "RUNNING"
    status = _status(custom, namespace, "waiter")
    assert status["submissionAttempts"] == 1 and status["executionAttempts"] == 1
    assert "s3cret-value" not in json.dumps(custom.get_namespaced_custom_object(
        G, V, namespace, P, "waiter"))

    custom.delete_namespaced_custom_object(G, V, namespace, P, "waiter")
    wait_for(lambda: not _alive(report["pid"]), timeout=60,
             what="the driver to be killed after its SparkApplication was deleted")


def test_failure_retries_then_failed_with_error_message(kube_api_client: Any, namespace: str,
                                                        tmp_path: Path) -> None:
    custom = client.CustomObjectsApi(kube_api_client)
    out = tmp_path / "report.json"
    custom.create_namespaced_custom_object(G, V, namespace, P, _app(
        "failer", [str(out), "fail", "the transform is broken"],
        restartPolicy={"type": "OnFailure", "onFailureRetries": 2, "onFailureRetryInterval": 1}))
    wait_for(lambda: _state(custom, namespace, "failer") == "FAILED", timeout=240,
             what="the application to fail after its retries")
    status = _status(custom, namespace, "failer")
    assert status["executionAttempts"] == 3  # first run + 2 retries
    assert len(Path(str(out) + ".attempts").read_text().split()) == 3
    assert "the transform is broken" in status["applicationState"]["errorMessage"]
    assert status.get("terminationTime")


def test_completed_and_missing_secret_is_a_submission_failure(
        kube_api_client: Any, namespace: str, tmp_path: Path) -> None:
    custom = client.CustomObjectsApi(kube_api_client)
    custom.create_namespaced_custom_object(G, V, namespace, P, _app(
        "done", [str(tmp_path / "ok.json"), "ok"]))
    env = [{"name": "PGPASSWORD", "valueFrom": {"secretKeyRef": {"name": "absent", "key": "x"}}}]
    custom.create_namespaced_custom_object(G, V, namespace, P, _app(
        "nosecret", [str(tmp_path / "never.json"), "ok"], driver={"env": env}))
    wait_for(lambda: _state(custom, namespace, "done") == "COMPLETED", timeout=120,
             what="the application to complete")
    wait_for(lambda: _state(custom, namespace, "nosecret") == "SUBMISSION_FAILED", timeout=60,
             what="a missing secret to fail the submission")
    message = _status(custom, namespace, "nosecret")["applicationState"]["errorMessage"]
    assert "absent" in message
    assert not (tmp_path / "never.json").exists()


def test_spec_edit_kills_and_resubmits(kube_api_client: Any, namespace: str,
                                       tmp_path: Path) -> None:
    custom = client.CustomObjectsApi(kube_api_client)
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    custom.create_namespaced_custom_object(G, V, namespace, P, _app("edited", [str(first), "wait"]))
    wait_for(first.is_file, timeout=120, what="the first submission to start")
    pid = json.loads(first.read_text())["pid"]
    custom.patch_namespaced_custom_object(G, V, namespace, P, "edited",
                                          {"spec": {"arguments": [str(second), "wait"]}})
    wait_for(second.is_file, timeout=120, what="the edited application to be resubmitted")
    assert not _alive(pid)
    assert _status(custom, namespace, "edited")["submissionAttempts"] == 2
    custom.delete_namespaced_custom_object(G, V, namespace, P, "edited")
    new_pid = json.loads(second.read_text())["pid"]
    wait_for(lambda: not _alive(new_pid), timeout=60, what="the resubmitted driver to stop")
