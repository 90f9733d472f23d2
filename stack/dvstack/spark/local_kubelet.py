"""The stand-in kubelet: runs the pods bound to its Node as local processes.

It registers a Node and acts only on pods whose `spec.nodeName` is that node
(the stand-in's driver pods).  Being bound to a node is also what makes the
API server delete such a pod gracefully: a deleted pod keeps existing, with a
deletionTimestamp, until this kubelet has stopped its process (SIGTERM, then
SIGKILL after the grace period) and removed it with grace period 0, as a real
kubelet does.  See `kubelet_model` for the status it reports.

Secret volumes are written, before the container starts, to the directory
`secret_volumes.secret_dir` names for the pod's submission (its
`spark-app-selector` label), which is where the container's spark-submit line
points the job.  A missing Secret keeps the container ContainerCreating, with
the kubelet's FailedMount Warning Event on the pod.  The files are removed
once the process has exited or the pod is
gone, so Secret values do not pile up on disk.  They are written when the
container starts; unlike a kubelet's, they are not refreshed while it runs.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import json
import logging
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from derived_views.core.patch import merge_patch
from dvstack.spark import kubelet_model as km
from dvstack.spark import secret_volumes
from dvstack.spark.driver_pod import LABEL_APP_SELECTOR

log = logging.getLogger("spark-executor.kubelet")

# What the "image" gives every process besides the pod's env: the machine's tools.
_BASE_ENV = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR")
_BASE_PREFIXES = ("JAVA_", "SPARK_", "HADOOP_")
STAND_IN_TAINT = "derivedviews.io/local-stand-in"
LEASE_NAMESPACE = "kube-node-lease"
LEASE_SECONDS = 40
"""A kubelet's default `nodeLeaseDurationSeconds`; it renews every quarter of it."""
LEASE_RENEW_SECONDS = 10.0
# A process that outlives its pod (force-deleted) gets this long after SIGTERM.
_ORPHAN_GRACE_SECONDS = 10.0


def now_text() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Container:
    """A started container: its process and where its log and termination message go."""

    namespace: str
    pod: str
    uid: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    message_path: Path
    started_at: str
    kill_deadline: float | None = None
    killed: bool = False
    result: dict[str, Any] | None = None
    """The container's `terminated` state once its process has exited."""

    @property
    def container_id(self) -> str:
        return f"local://{self.proc.pid}"


class LocalKubelet:
    def __init__(self, api_client: Any, *, node_name: str, logs_dir: Path, work_dir: Path,
                 python: str) -> None:
        self.core = client.CoreV1Api(api_client)
        self.coordination = client.CoordinationV1Api(api_client)
        self.next_heartbeat = 0.0
        self.node_name = node_name
        self.logs_dir = logs_dir
        self.work_dir = work_dir
        self.python = python
        self.containers: dict[str, Container] = {}
        self.volume_dirs: dict[str, Path] = {}
        """Pod uid -> the directory of the Secret volumes written for it."""
        self.mount_failures: dict[str, str] = {}
        """Pod uid -> the FailedMount message last recorded as an Event for it."""

    # ---- node ---------------------------------------------------------------
    def register_node(self, *, taint: bool = False) -> None:
        """Create the Node the driver pods are bound to, Ready, as a kubelet registers itself.

        Beside a real node (`taint`) it carries a NoSchedule taint: the scheduler must never
        bind a pod to it, as only pods the stand-in creates bound already are its own.
        A kubelet starting runs no pods yet: Secret volumes a previous run left are stale."""
        secret_volumes.remove_all(self.work_dir)
        body = {"metadata": {"name": self.node_name, "labels": {
            "kubernetes.io/hostname": self.node_name, "kubernetes.io/os": "linux",
            "derivedviews.io/local-stand-in": "true"}}}
        with contextlib.suppress(ApiException):
            self.core.create_node(body)
        self.core.patch_node(self.node_name, {"spec": {"taints": [
            {"key": STAND_IN_TAINT, "value": "true", "effect": "NoSchedule"}] if taint else None}})
        stamp = now_text()
        self.core.patch_node_status(self.node_name, {"status": {
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "the local stand-in kubelet is running",
                            "lastHeartbeatTime": stamp, "lastTransitionTime": stamp}],
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"},
                          {"type": "Hostname", "address": self.node_name}]}})
        self.heartbeat()

    def heartbeat(self) -> None:
        """Renew the node's Lease, as a kubelet does every 10 s: beside the real node the
        node lifecycle controller runs, and would mark a silent node unreachable and evict
        its pods."""
        if time.monotonic() < self.next_heartbeat:
            return
        body = {"metadata": {"name": self.node_name, "namespace": LEASE_NAMESPACE},
                "spec": {"holderIdentity": self.node_name,
                         "leaseDurationSeconds": LEASE_SECONDS,
                         "renewTime": dt.datetime.now(dt.UTC).strftime(
                             "%Y-%m-%dT%H:%M:%S.%fZ")}}
        try:
            self.coordination.patch_namespaced_lease(self.node_name, LEASE_NAMESPACE, body)
        except ApiException as exc:
            if exc.status != 404:
                raise
            self.coordination.create_namespaced_lease(LEASE_NAMESPACE, body)
        self.next_heartbeat = time.monotonic() + LEASE_RENEW_SECONDS

    # ---- sync -------------------------------------------------------------------
    def sync(self, pods: list[dict[str, Any]]) -> None:
        """One pass over the pods bound to this node (and processes whose pod is gone)."""
        present = set()
        for pod in pods:
            uid = pod["metadata"]["uid"]
            present.add(uid)
            try:
                self._sync_pod(pod)
            except ApiException as exc:
                log.warning("pod %s/%s: %s %s", pod["metadata"]["namespace"],
                            pod["metadata"]["name"], exc.status, exc.reason)
        for uid in [u for u in self.containers if u not in present]:
            container = self.containers[uid]
            if self._stop(container, _ORPHAN_GRACE_SECONDS):
                self._forget(uid)
        for uid in {*self.volume_dirs, *self.mount_failures} - present - self.containers.keys():
            self._unmount(uid)  # a pod gone before its container started

    def shutdown(self, grace: float = 10.0) -> None:
        """Stop every process and report its pod terminated (a node going down)."""
        deadline = time.monotonic() + grace
        for container in self.containers.values():
            _signal(container.proc, signal.SIGTERM)
        for uid, container in self.containers.items():
            try:
                container.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal(container.proc, signal.SIGKILL)
                container.proc.wait(timeout=10)
            self._reap(container)
            with contextlib.suppress(ApiException):
                pod = _json(self.core.read_namespaced_pod(container.pod, container.namespace,
                                                          _preload_content=False))
                if pod["metadata"]["uid"] == uid:
                    self._write_status(pod, self._terminated_state(container))
        for uid in list(self.volume_dirs):
            self._unmount(uid)

    # ---- one pod ----------------------------------------------------------------
    def _sync_pod(self, pod: dict[str, Any]) -> None:
        meta, status = pod["metadata"], pod.get("status") or {}
        uid, phase = meta["uid"], status.get("phase", "Pending")
        container = self.containers.get(uid)
        if container is not None:
            self._reap(container)
        if meta.get("deletionTimestamp"):
            self._sync_deleted_pod(pod, container)
            return
        if phase in ("Succeeded", "Failed"):
            self._forget(uid)
            return
        if container is None:
            if phase == "Running":
                self._write_status(pod, _lost_state(status))
                return
            self._start(pod)
            return
        state = self._terminated_state(container) if container.result is not None \
            else km.running_state(container.started_at)
        self._write_status(pod, state, container.container_id)

    def _sync_deleted_pod(self, pod: dict[str, Any], container: Container | None) -> None:
        meta = pod["metadata"]
        if container is None and meta.get("deletionGracePeriodSeconds") == 0:
            return  # already removed by us; someone else's finalizer keeps it
        if container is not None:
            grace = float(meta.get("deletionGracePeriodSeconds") or 0)
            if not self._stop(container, grace):
                return
            if (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                self._write_status(pod, self._terminated_state(container),
                                   container.container_id)
        try:
            self.core.delete_namespaced_pod(
                meta["name"], meta["namespace"],
                body=client.V1DeleteOptions(grace_period_seconds=0,
                                            preconditions=client.V1Preconditions(uid=meta["uid"])))
        except ApiException as exc:
            if exc.status not in (404, 409):
                raise
        self._forget(meta["uid"])
        log.info("pod %s/%s: removed after its process stopped", meta["namespace"], meta["name"])

    def _forget(self, uid: str) -> None:
        """The pod is done with: drop its process record, its termination-message file and its
        Secret volumes."""
        container = self.containers.pop(uid, None)
        if container is not None:
            container.message_path.unlink(missing_ok=True)
        self._unmount(uid)

    def _unmount(self, uid: str) -> None:
        self.mount_failures.pop(uid, None)
        directory = self.volume_dirs.pop(uid, None)
        if directory is not None:
            secret_volumes.remove(directory)

    def _stop(self, container: Container, grace: float) -> bool:
        """Signal the process towards an exit; True once it has exited."""
        self._reap(container)
        if container.result is not None:
            return True
        if container.kill_deadline is None:
            _signal(container.proc, signal.SIGTERM)
            container.kill_deadline = time.monotonic() + grace
        elif not container.killed and time.monotonic() >= container.kill_deadline:
            _signal(container.proc, signal.SIGKILL)
            container.killed = True
        self._reap(container)
        return container.result is not None

    def _start(self, pod: dict[str, Any]) -> None:
        meta, spec = pod["metadata"], pod["spec"]
        spec_container = spec["containers"][0]
        try:
            self._mount_secrets(pod)
        except km.VolumeMountError as exc:
            self._failed_mount(pod, str(exc))
            self._write_status(pod, km.waiting("ContainerCreating"))  # the why: only the Event
            return
        self.mount_failures.pop(meta["uid"], None)
        try:
            env = km.resolve_env(meta["namespace"], meta["name"], spec_container,
                                 lambda kind, name: self._lookup(meta["namespace"], kind, name),
                                 node_name=self.node_name,
                                 service_account=spec.get("serviceAccountName", ""))
        except km.ContainerConfigError as exc:
            self._write_status(pod, km.waiting("CreateContainerConfigError", str(exc)))
            return
        argv = [*spec_container.get("command", []), *spec_container.get("args", [])]
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        (self.work_dir / "termination").mkdir(parents=True, exist_ok=True)
        (self.work_dir / "tmp").mkdir(parents=True, exist_ok=True)
        log_path = self.logs_dir / f"{meta['namespace']}_{meta['name']}_{meta['uid'][:8]}.log"
        message_path = self.work_dir / "termination" / meta["uid"]
        message_path.write_bytes(b"")
        process_env = {k: v for k, v in os.environ.items()
                       if k in _BASE_ENV or k.startswith(_BASE_PREFIXES)}
        process_env.update({"PYSPARK_PYTHON": self.python, "PYSPARK_DRIVER_PYTHON": self.python})
        process_env.update(env)
        process_env["DV_TERMINATION_MESSAGE_PATH"] = str(message_path)
        started_at = now_text()
        with open(log_path, "wb") as out:
            try:
                proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, env=process_env,
                                        cwd=self.work_dir, start_new_session=True)
            except OSError as exc:
                self._unmount(meta["uid"])
                self._write_status(pod, {"terminated": {
                    "exitCode": 128, "reason": "StartError", "message": str(exc),
                    "startedAt": started_at, "finishedAt": now_text()}})
                return
        container = Container(namespace=meta["namespace"], pod=meta["name"], uid=meta["uid"],
                              proc=proc, log_path=log_path, message_path=message_path,
                              started_at=started_at)
        self.containers[meta["uid"]] = container
        log.info("pod %s/%s: started pid %d, log %s", meta["namespace"], meta["name"], proc.pid,
                 log_path.name)
        self._write_status(pod, km.running_state(started_at), container.container_id)

    def _mount_secrets(self, pod: dict[str, Any]) -> None:
        """Write the files of every Secret volume the container mounts (all, or none when one
        is missing: VolumeMountError)."""
        meta, spec = pod["metadata"], pod["spec"]
        mounts = km.secret_mounts(spec, spec["containers"][0])
        if not mounts:
            return
        namespace = meta["namespace"]
        files: dict[str, dict[str, bytes]] = {}
        for mount in mounts:
            try:
                files[mount.secret] = km.secret_volume_files(
                    mount, lambda name: self._secret_files(namespace, name))
            except ApiException as exc:
                raise km.VolumeMountError(km.mount_failed(
                    mount.volume, f"couldn't get secret {namespace}/{mount.secret}: "
                                  f"{exc.reason}")) from None
        app_id = (meta.get("labels") or {}).get(LABEL_APP_SELECTOR) or meta["uid"]
        for secret, data in files.items():
            try:
                directory = secret_volumes.secret_dir(self.work_dir, namespace, app_id, secret)
                self.volume_dirs[meta["uid"]] = directory.parent
                secret_volumes.write(directory, data)
            except (ValueError, OSError) as exc:
                volume = next(m.volume for m in mounts if m.secret == secret)
                raise km.VolumeMountError(km.mount_failed(volume, str(exc))) from None

    def _failed_mount(self, pod: dict[str, Any], message: str) -> None:
        """The kubelet's Warning Event FailedMount on the pod, once per pod and message (a
        kubelet repeats it with a count on its retries)."""
        meta = pod["metadata"]
        if self.mount_failures.get(meta["uid"]) == message:
            return
        self.mount_failures[meta["uid"]] = message
        stamp = now_text()
        with contextlib.suppress(ApiException):
            self.core.create_namespaced_event(meta["namespace"], {
                "metadata": {"name": f"{meta['name']}.{time.time_ns():x}"},
                "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": meta["name"],
                                   "namespace": meta["namespace"], "uid": meta["uid"]},
                "reason": "FailedMount", "message": message, "type": "Warning",
                "source": {"component": "kubelet", "host": self.node_name},
                "reportingComponent": "kubelet", "reportingInstance": self.node_name,
                "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1})

    def _secret_files(self, namespace: str, name: str) -> dict[str, bytes] | None:
        """A Secret's data as the bytes a volume's files hold; None when it does not exist."""
        obj = self._read("secret", namespace, name)
        if obj is None:
            return None
        return {k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()}

    def _read(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        read = (self.core.read_namespaced_secret if kind == "secret"
                else self.core.read_namespaced_config_map)
        try:
            return _json(read(name, namespace, _preload_content=False))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def _lookup(self, namespace: str, kind: str, name: str) -> dict[str, str] | None:
        try:
            obj = self._read(kind, namespace, name)
        except ApiException as exc:
            raise km.ContainerConfigError(f"couldn't get {kind} {namespace}/{name}: "
                                          f"{exc.reason}") from None
        if obj is None:
            return None
        if kind == "secret":
            return {k: base64.b64decode(v).decode(errors="replace")
                    for k, v in (obj.get("data") or {}).items()}
        return {k: str(v) for k, v in (obj.get("data") or {}).items()}

    # ---- status -------------------------------------------------------------------
    def _reap(self, container: Container) -> None:
        if container.result is not None:
            return
        code = container.proc.poll()
        if code is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(container.proc.pid, signal.SIGKILL)  # children that outlived it
        self._unmount(container.uid)  # as a kubelet tears down a terminated pod's volumes
        exit_code = km.exit_code(code)
        try:
            with open(container.message_path, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                fh.seek(max(0, fh.tell() - km.MAX_TERMINATION_MESSAGE_BYTES))
                tail: bytes | None = fh.read()
        except OSError:
            tail = None
        message = km.termination_message(
            tail, policy="File", code=exit_code,
            log_tail=lambda: km.tail_of_log(container.log_path.read_text(errors="replace")))
        container.result = km.terminated(code=exit_code, message=message,
                                         started_at=container.started_at,
                                         finished_at=now_text(),
                                         container_id=container.container_id)["terminated"]
        log.info("pod %s/%s: process exited with %d", container.namespace, container.pod,
                 exit_code)

    def _terminated_state(self, container: Container) -> dict[str, Any]:
        assert container.result is not None
        return {"terminated": container.result}

    def _write_status(self, pod: dict[str, Any], state: dict[str, Any],
                      container_id: str = "") -> None:
        old = pod.get("status") or {}
        old_state = ((old.get("containerStatuses") or [{}])[0]).get("state")
        if old_state == state:
            return
        new = km.pod_status(pod, state, now=now_text(), container_id=container_id)
        patch = merge_patch(old, new)
        if patch:
            meta = pod["metadata"]
            self.core.patch_namespaced_pod_status(meta["name"], meta["namespace"],
                                                  {"status": patch},
                                                  _content_type="application/merge-patch+json")
            pod["status"] = new


def _lost_state(status: dict[str, Any]) -> dict[str, Any]:
    """A Running pod this kubelet has no process for: it restarted and lost it (a node reboot)."""
    started = (((status.get("containerStatuses") or [{}])[0].get("state") or {})
               .get("running") or {}).get("startedAt") or now_text()
    return {"terminated": {"exitCode": 137, "reason": "Error", "startedAt": started,
                           "finishedAt": now_text()}}


def _signal(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def _json(response: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(response.data)
    return data
