"""The stand-in kubelet's Secret volumes against a fake API: written before the process
starts, waited for while missing, and gone from disk once the pod is done with."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from kubernetes.client.exceptions import ApiException

from dvstack.spark.local_kubelet import LocalKubelet
from dvstack.spark.secret_volumes import secret_dir
from dvstack.testing.waiting import wait_for

# Copies what the job would read from the mount (entries not starting with a dot) to argv[2].
COPY = ("import json, os, sys; d = sys.argv[1]; json.dump({n: open(os.path.join(d, n)).read() "
        "for n in os.listdir(d) if not n.startswith('.')}, open(sys.argv[2], 'w'))")


class FakeCore:
    """The calls the kubelet makes, over Secrets held in a dict."""

    def __init__(self) -> None:
        self.secrets: dict[str, dict[str, str]] = {}
        self.events: list[dict[str, Any]] = []

    def read_namespaced_secret(self, name: str, namespace: str, **_: Any) -> Any:
        if name not in self.secrets:
            raise ApiException(status=404, reason="Not Found")
        data = {k: base64.b64encode(v.encode()).decode() for k, v in self.secrets[name].items()}
        return SimpleNamespace(data=json.dumps({"data": data}).encode())

    def patch_namespaced_pod_status(self, *_: Any, **__: Any) -> None:
        pass

    def create_namespaced_event(self, namespace: str, body: dict[str, Any]) -> None:
        self.events.append(body)


def kubelet(tmp_path: Path) -> tuple[LocalKubelet, FakeCore]:
    k = LocalKubelet(None, node_name="n1", logs_dir=tmp_path / "logs", work_dir=tmp_path / "work",
                     python=sys.executable)
    core = FakeCore()
    k.core = core
    return k, core


def pod(args: list[str], **container: Any) -> dict[str, Any]:
    return {"metadata": {"name": "app-driver", "namespace": "shop", "uid": "u-1",
                         "labels": {"spark-app-selector": "spark-1"}},
            "spec": {"volumes": [{"name": "db-volume", "secret": {"secretName": "db"}}],
                     "containers": [{"name": "spark-kubernetes-driver",
                                     "command": [sys.executable], "args": args,
                                     "volumeMounts": [{"name": "db-volume",
                                                       "mountPath": "/mnt/db"}],
                                     **container}]}}


def state(p: dict[str, Any]) -> dict[str, Any]:
    return dict(p["status"]["containerStatuses"][0]["state"])


def test_the_process_starts_once_the_secret_exists_and_its_files_go_when_it_ends(
        tmp_path: Path) -> None:
    k, core = kubelet(tmp_path)
    mount, out = secret_dir(k.work_dir, "shop", "spark-1", "db"), tmp_path / "seen.json"
    p = pod(["-c", COPY, str(mount), str(out)])
    k.sync([p])
    k.sync([p])  # a retry, still missing
    failed = 'MountVolume.SetUp failed for volume "db-volume" : secret "db" not found'
    assert state(p) == {"waiting": {"reason": "ContainerCreating"}}  # the why: the Event
    assert p["status"]["phase"] == "Pending" and not mount.exists()
    assert [(e["reason"], e["type"], e["message"], e["involvedObject"]["uid"])
            for e in core.events] == [("FailedMount", "Warning", failed, "u-1")]

    core.secrets["db"] = {"password": "pw", "user": "u"}

    def done() -> bool:
        k.sync([p])
        return bool(p["status"]["phase"] == "Succeeded")

    wait_for(done, timeout=30, what="the process to run to completion")
    assert json.loads(out.read_text()) == {"password": "pw", "user": "u"}
    assert not mount.parent.exists(), "the Secret's files outlived the process"


def test_a_pod_gone_before_its_container_started_leaves_no_secret_files(tmp_path: Path) -> None:
    k, core = kubelet(tmp_path)
    core.secrets["db"] = {"password": "pw"}
    env = [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "db", "key": "token"}}}]
    p = pod(["-c", "pass"], env=env)
    k.sync([p])
    assert state(p)["waiting"]["reason"] == "CreateContainerConfigError"
    mount = secret_dir(k.work_dir, "shop", "spark-1", "db")
    assert (mount / "password").read_text() == "pw"  # mounted before env, as a kubelet does
    k.sync([])
    assert not mount.parent.exists()
