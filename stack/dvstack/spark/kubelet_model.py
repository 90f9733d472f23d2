"""What a kubelet makes of one single-container pod, as pure functions.

The stand-in kubelet resolves the container's environment and reports its
state exactly where and how a kubelet (Kubernetes v1.34) does, because our
operator reads those fields on a cluster:

- a Secret, ConfigMap or key that `env`/`envFrom` needs and that is missing
  keeps the pod Pending with `state.waiting.reason: CreateContainerConfigError`
  and the kubelet's message (`secret "views-db" not found`, `couldn't find key
  password in Secret shop/views-db`), retried until it heals
  (pkg/kubelet/kubelet_pods.go makeEnvironmentVariables,
  pkg/kubelet/util/manager/watch_based_manager.go);
- a Secret volume whose Secret is missing keeps it Pending with
  `state.waiting.reason: ContainerCreating` and no message, retried until it
  heals; the cause is only in the kubelet's FailedMount Warning Event on the pod
  (`MountVolume.SetUp failed for volume "views-db-volume" : secret "views-db"
  not found`, pkg/kubelet/volumemanager, pkg/volume/secret/secret.go), which is
  where the operator reads it;
- an exited container is `state.terminated` with exitCode, reason `Completed`
  or `Error`, and `message` = the last 4 KiB of its termination-message file
  (or, with `FallbackToLogsOnError` and an empty file after a failure, the
  last 80 log lines within 2 KiB) (pkg/kubelet/kuberuntime/kuberuntime_container.go
  getTerminationMessage, pkg/kubelet/container/runtime.go).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dvstack.spark.secret_volumes import conf_prefix

MAX_TERMINATION_MESSAGE_BYTES = 4 * 1024
MAX_FALLBACK_LOG_BYTES = 2 * 1024
MAX_FALLBACK_LOG_LINES = 80

# (kind, name) -> the object's data (Secret values decoded), or None when it does not exist.
Lookup = Callable[[str, str], "dict[str, str] | None"]


class ContainerConfigError(Exception):
    """The container cannot be configured yet; the message is the kubelet's."""


class VolumeMountError(Exception):
    """A volume of the container cannot be mounted yet; the message is the kubelet's."""


@dataclass(frozen=True)
class SecretMount:
    """A Secret volume the container mounts: the volume, its Secret, whether it may be absent."""

    volume: str
    secret: str
    optional: bool = False


EXECUTOR_SECRETS_PREFIX = conf_prefix("executor")


def secret_mounts(pod_spec: dict[str, Any], container: dict[str, Any]) -> list[SecretMount]:
    """The Secret volumes `container` mounts, in the order of its volumeMounts, each once.

    Then the executors': they are threads of this container here, so the Secrets that
    `spark.kubernetes.executor.secrets.<name>` on its command line would mount in executor
    pods (volume `<name>-volume`, as Spark names it) are mounted for it too."""
    volumes = {v.get("name"): v["secret"] for v in pod_spec.get("volumes") or []
               if v.get("secret")}
    mounts: dict[str, SecretMount] = {}
    for mount in container.get("volumeMounts") or []:
        source = volumes.get(mount.get("name"))
        if source is not None and mount["name"] not in mounts:
            mounts[mount["name"]] = SecretMount(mount["name"], str(source.get("secretName", "")),
                                                bool(source.get("optional")))
    secrets = {m.secret for m in mounts.values()}
    argv = [*(container.get("command") or []), *(container.get("args") or [])]
    for flag, setting in itertools.pairwise(argv):
        key = setting.split("=", 1)[0]
        if flag == "--conf" and key.startswith(EXECUTOR_SECRETS_PREFIX):
            name = key.removeprefix(EXECUTOR_SECRETS_PREFIX)
            if name not in secrets:
                secrets.add(name)
                mounts[f"{name}-volume"] = SecretMount(f"{name}-volume", name)
    return list(mounts.values())


def secret_volume_files(mount: SecretMount,
                        read: Callable[[str], dict[str, bytes] | None]) -> dict[str, bytes]:
    """The files of one Secret volume (key -> content); `read(name)` is the Secret's data or
    None when it does not exist.  VolumeMountError when it cannot be mounted yet."""
    data = read(mount.secret)
    if data is None:
        if mount.optional:
            return {}
        raise VolumeMountError(mount_failed(mount.volume, f'secret "{mount.secret}" not found'))
    return data


def mount_failed(volume: str, cause: str) -> str:
    """The kubelet's FailedMount message."""
    return f'MountVolume.SetUp failed for volume "{volume}" : {cause}'


def resolve_env(namespace: str, pod_name: str, container: dict[str, Any],
                lookup: Lookup, *, pod_ip: str = "127.0.0.1",
                node_name: str = "", service_account: str = "") -> dict[str, str]:
    """The container's environment: envFrom first, then env in order (which wins)."""
    env: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        kind, ref = (("configmap", source["configMapRef"]) if source.get("configMapRef")
                     else ("secret", source.get("secretRef") or {}))
        data = lookup(kind, ref["name"])
        if data is None:
            if ref.get("optional"):
                continue
            raise ContainerConfigError(f'{kind} "{ref["name"]}" not found')
        prefix = source.get("prefix") or ""
        env.update({prefix + k: v for k, v in data.items()})
    fields = {"metadata.name": pod_name, "metadata.namespace": namespace,
              "spec.nodeName": node_name, "spec.serviceAccountName": service_account,
              "status.podIP": pod_ip, "status.hostIP": pod_ip}
    for var in container.get("env") or []:
        value_from = var.get("valueFrom")
        if var.get("value") or not value_from:
            env[var["name"]] = expand(str(var.get("value") or ""), env)
            continue
        if value_from.get("fieldRef"):
            env[var["name"]] = fields.get(value_from["fieldRef"].get("fieldPath", ""), "")
            continue
        for key, kind, title in (("configMapKeyRef", "configmap", "ConfigMap"),
                                 ("secretKeyRef", "secret", "Secret")):
            ref = value_from.get(key)
            if not ref:
                continue
            data = lookup(kind, ref["name"])
            if data is None:
                if ref.get("optional"):
                    break
                raise ContainerConfigError(f'{kind} "{ref["name"]}" not found')
            if ref["key"] not in data:
                if ref.get("optional"):
                    break
                raise ContainerConfigError(f"couldn't find key {ref['key']} in {title} "
                                           f"{namespace}/{ref['name']}")
            env[var["name"]] = data[ref["key"]]
            break
    return env


_REFERENCE = re.compile(r"\$\$|\$\(([^)]*)\)")


def expand(value: str, env: dict[str, str]) -> str:
    """Kubernetes' `$(VAR)` expansion: defined variables substituted, `$$` escapes a `$`,
    an undefined reference left as written."""
    def one(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))
    return _REFERENCE.sub(one, value)


def exit_code(returncode: int) -> int:
    """A process's return code as a container runtime reports it: 128+N when killed by signal N."""
    return 128 - returncode if returncode < 0 else returncode


def termination_message(file_tail: bytes | None, *, policy: str, code: int,
                        log_tail: Callable[[], str]) -> str:
    """The container's `state.terminated.message` from the tail of its termination-message file
    (None: no file) and, when the policy allows, its log."""
    message = (file_tail or b"")[-MAX_TERMINATION_MESSAGE_BYTES:].decode(errors="replace")
    if not message and policy == "FallbackToLogsOnError" and code != 0:
        return log_tail()
    return message


def tail_of_log(text: str) -> str:
    """The last 80 lines of a log, within its last 2 KiB (FallbackToLogsOnError)."""
    lines = text.splitlines(keepends=True)[-MAX_FALLBACK_LOG_LINES:]
    data = "".join(lines).encode()[-MAX_FALLBACK_LOG_BYTES:]
    return data.decode(errors="replace")


def waiting(reason: str, message: str = "") -> dict[str, Any]:
    state: dict[str, Any] = {"reason": reason}
    if message:
        state["message"] = message
    return {"waiting": state}


def running_state(started_at: str) -> dict[str, Any]:
    return {"running": {"startedAt": started_at}}


def terminated(*, code: int, message: str, started_at: str, finished_at: str,
               container_id: str) -> dict[str, Any]:
    state: dict[str, Any] = {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                             "startedAt": started_at, "finishedAt": finished_at,
                             "containerID": container_id}
    if message:
        state["message"] = message
    return {"terminated": state}


def pod_status(pod: dict[str, Any], state: dict[str, Any], *, now: str, container_id: str = "",
               host_ip: str = "127.0.0.1") -> dict[str, Any]:
    """The pod's status for its one container in `state` (waiting, running or terminated)."""
    container = pod["spec"]["containers"][0]
    previous = pod.get("status") or {}
    if "running" in state:
        phase = "Running"
    elif "terminated" in state:
        phase = "Succeeded" if state["terminated"]["exitCode"] == 0 else "Failed"
    else:
        phase = "Pending"
    ready = phase == "Running"
    container_status: dict[str, Any] = {
        "name": container["name"], "image": container.get("image", ""), "imageID": "",
        "state": state, "lastState": {}, "ready": ready, "restartCount": 0,
        "started": ready,
    }
    if container_id:
        container_status["containerID"] = container_id
    conditions = []
    for kind, true in (("PodReadyToStartContainers", True), ("Initialized", True),
                       ("Ready", ready), ("ContainersReady", ready), ("PodScheduled", True)):
        old = next((c for c in previous.get("conditions") or [] if c.get("type") == kind), None)
        value = "True" if true else "False"
        since = now if old is None or old.get("status") != value \
            else old.get("lastTransitionTime", now)
        condition: dict[str, Any] = {"type": kind, "status": value, "lastTransitionTime": since}
        if not true:
            condition["reason"] = "PodCompleted" if phase in ("Succeeded", "Failed") \
                else "ContainersNotReady"
        conditions.append(condition)
    status: dict[str, Any] = {
        "phase": phase, "conditions": conditions, "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}], "startTime": previous.get("startTime") or now,
        "containerStatuses": [container_status], "qosClass": previous.get("qosClass", "BestEffort"),
    }
    if phase != "Pending":
        status["podIP"] = host_ip
        status["podIPs"] = [{"ip": host_ip}]
    return status
