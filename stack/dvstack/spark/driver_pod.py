"""The driver Pod of a SparkApplication, as spark-submit and the operator's webhook shape it.

On a cluster the Spark Operator runs spark-submit, which creates the pod
`<app>-driver` with container `spark-kubernetes-driver` and Spark's labels;
the operator's mutating webhook then adds, in the namespaces it serves
(`spark.jobNamespaces`), the ownerReference to the application and the
fields spark-submit cannot express: `driver.env`, `driver.envFrom`,
`terminationGracePeriodSeconds`, ...  Outside them the pod keeps only what
spark-submit gave it: no ownerReference, no `env`/`envFrom` (upstream v2.5.2:
internal/controller/sparkapplication/submission.go driverConfOption,
internal/webhook/sparkpod_defaulter.go mutateSparkPod, pkg/util
GetOwnerReference).

spark-submit also mounts `driver.secrets`, with or without the webhook: Spark's
MountSecretsFeatureStep adds a volume `<name>-volume` of the Secret and mounts
it at the entry's `path` (resource-managers/kubernetes).

Here the container's command is the local spark-submit the stand-in kubelet
runs (see `spark_local_command`); everything else has the cluster's shape.
"""

from __future__ import annotations

import re
from typing import Any

from dvstack.spark.app_states import DRIVER_CONTAINER, intended_driver_pod_name

GROUP_VERSION = "sparkoperator.k8s.io/v1beta2"
LABEL_APP_NAME = "sparkoperator.k8s.io/app-name"
LABEL_SUBMISSION_ID = "sparkoperator.k8s.io/submission-id"
LABEL_LAUNCHED = "sparkoperator.k8s.io/launched-by-spark-operator"
LABEL_MUTATED = "sparkoperator.k8s.io/mutated-by-spark-operator"
LABEL_APP_SELECTOR = "spark-app-selector"
LABEL_ROLE = "spark-role"
# Kueue's labels are not copied to the driver (upstream issue 2669).
_KUEUE_PREFIX = "kueue.x-k8s.io/"


def in_scope(namespace: str, namespaces: frozenset[str]) -> bool:
    """The operator's namespace list: empty (or containing "") means every namespace."""
    return not namespaces or "" in namespaces or namespace in namespaces


def driver_pod(app: dict[str, Any], *, submission_id: str, app_id: str, node_name: str,
               command: list[str], mutated: bool) -> dict[str, Any]:
    """The Pod to create for one submission; `mutated`: the webhook serves its namespace."""
    meta, spec = app["metadata"], app.get("spec") or {}
    driver = spec.get("driver") or {}
    name = intended_driver_pod_name(meta["name"], spec)
    labels = {k: str(v) for k, v in (meta.get("labels") or {}).items()
              if not k.startswith(_KUEUE_PREFIX)}
    labels.update({str(k): str(v) for k, v in (driver.get("labels") or {}).items()})
    labels.update({
        LABEL_APP_NAME: meta["name"],
        LABEL_LAUNCHED: "true",
        LABEL_SUBMISSION_ID: submission_id,
        LABEL_APP_SELECTOR: app_id,
        LABEL_ROLE: "driver",
        "spark-version": str(spec.get("sparkVersion", "")),
        "spark-app-name": _label_value(meta["name"]),
    })
    if not driver.get("template"):
        labels[LABEL_MUTATED] = "true"
    # What Spark itself puts in the environment, with or without the webhook.
    env: list[dict[str, Any]] = [{"name": str(k), "value": str(v)}
                                 for k, v in (driver.get("envVars") or {}).items()]
    env += [{"name": str(k), "valueFrom": {"secretKeyRef": {"name": ref["name"], "key": ref["key"]}}}
            for k, ref in (driver.get("envSecretKeyRefs") or {}).items()]
    container: dict[str, Any] = {
        "name": DRIVER_CONTAINER,
        "image": str(driver.get("image") or spec.get("image") or f"spark:{spec.get('sparkVersion')}"),
        "command": command[:1],
        "args": command[1:],
        "env": env,
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }
    pod_spec: dict[str, Any] = {
        "nodeName": node_name,
        "restartPolicy": "Never",
        "containers": [container],
    }
    volumes, mounts = secret_volumes(driver.get("secrets") or [])
    if volumes:
        pod_spec["volumes"] = volumes
        container["volumeMounts"] = mounts
    if driver.get("serviceAccount"):
        pod_spec["serviceAccountName"] = str(driver["serviceAccount"])
    pod_meta: dict[str, Any] = {"name": name, "namespace": meta["namespace"], "labels": labels}
    if driver.get("annotations"):
        pod_meta["annotations"] = {str(k): str(v) for k, v in driver["annotations"].items()}
    if mutated:
        pod_meta["ownerReferences"] = [owner_reference(app)]
        container["env"] = env + list(driver.get("env") or [])
        if driver.get("envFrom"):
            container["envFrom"] = list(driver["envFrom"])
        if driver.get("terminationGracePeriodSeconds") is not None:
            pod_spec["terminationGracePeriodSeconds"] = int(driver["terminationGracePeriodSeconds"])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": pod_spec}


def secret_volumes(secrets: list[dict[str, Any]]) -> tuple[list[dict[str, Any]],
                                                             list[dict[str, Any]]]:
    """The volumes and the container's volumeMounts Spark's MountSecretsFeatureStep makes of
    `spark.kubernetes.driver.secrets.<name>=<path>`: volume `<name>-volume` of the Secret,
    mounted at `<path>`.  One per name: a later entry's path wins, as a later --conf does."""
    paths = {str(s["name"]): str(s["path"]) for s in secrets}
    volumes = [{"name": f"{name}-volume", "secret": {"secretName": name}} for name in paths]
    mounts = [{"name": f"{name}-volume", "mountPath": path} for name, path in paths.items()]
    return volumes, mounts


def owner_reference(app: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": GROUP_VERSION, "kind": "SparkApplication",
            "name": app["metadata"]["name"], "uid": app["metadata"]["uid"],
            "controller": True, "blockOwnerDeletion": True}


def _label_value(name: str) -> str:
    """Spark's spark-app-name label: the name made a valid label value (63 chars at most)."""
    value = re.sub(r"[^a-z0-9.\-]", "-", name.lower())[:63]
    return value.strip("-.") or "spark"
