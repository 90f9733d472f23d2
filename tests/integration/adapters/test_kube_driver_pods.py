"""The Kubernetes adapter against the real API server: driver pods and foreground deletion.

Pods are plain API objects here (no kubelet in this test): the test creates them and writes
their status as a kubelet would, with the status subresource.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from derived_views.adapters.kube.client import SPARK_GROUP, SPARK_PLURAL, SPARK_VERSION, Kube
from derived_views.api.spec import DerivedViewSpec
from derived_views.core.job.sparkapplication import load_template, render_spark_application
from derived_views.core.observed import (
    FAILED_MOUNT,
    DriverObserved,
    awaits_volumes,
    driver_from_pod,
    drivers_by_revision,
    mount_failure_of,
    spark_application_from_object,
)
from derived_views.core.revision import revision_of
from derived_views.core.settings import CheckpointSettings, Settings, SparkSettings
from dvstack.testing.waiting import wait_for

VIEW = "orders-by-customer"
R1, R2 = "71250ff800", "5d31ce3608"
APP1, APP2 = f"{VIEW}-{R1}", f"{VIEW}-{R2}"
SECRET = 'secret "views-db" not found'
CAUSE = "batch 18: a row has NULL in primary-key column 'account_id'"
HOLD = "test.derivedviews.io/hold"
TIMEOUT = 60


def pod_body(name: str, labels: dict[str, str], owner: dict[str, Any] | None = None,
             finalizers: list[str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": labels}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    if finalizers:
        meta["finalizers"] = finalizers
    # a scheduler nobody runs: beside the real node the kube-scheduler would bind these pods
    # and the kubelet would write its own status (ContainerCreating) over the test's
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {
        "schedulerName": "dv-test-unscheduled",
        "automountServiceAccountToken": False, "restartPolicy": "Never",
        "containers": [{"name": "spark-kubernetes-driver", "image": "dv-job:1"}]}}


def create_pod(core: client.CoreV1Api, namespace: str, body: dict[str, Any]) -> None:
    # A fresh namespace gets its default ServiceAccount from the controller manager shortly
    # after creation; until then admission refuses pods.
    wait_for(lambda: core.create_namespaced_pod(namespace, body) is not None, timeout=TIMEOUT,
             what=f"pod {body['metadata']['name']} to be created")


def kubelet_status(core: client.CoreV1Api, namespace: str, name: str, phase: str,
                   state: dict[str, Any], last: dict[str, Any] | None = None) -> None:
    core.patch_namespaced_pod_status(name, namespace, {"status": {
        "phase": phase, "containerStatuses": [{
            "name": "spark-kubernetes-driver", "image": "dv-job:1", "imageID": "", "ready": False,
            "restartCount": 0, "state": state, "lastState": last or {}}]}})


@pytest.fixture()
def kube(kube_api_client: Any) -> Kube:
    return Kube(kube_api_client)


def test_driver_pods_are_listed_once_per_view_and_read_like_the_kubelet_wrote_them(
        kube: Kube, kube_api_client: Any, namespace: str) -> None:
    core = client.CoreV1Api(kube_api_client)
    view_labels = {"derivedviews.io/view": VIEW}
    create_pod(core, namespace, pod_body(f"{APP1}-driver", {
        **view_labels, "derivedviews.io/revision": R1, "spark-role": "driver"}))
    create_pod(core, namespace, pod_body(f"{APP2}-driver", {
        **view_labels, "derivedviews.io/revision": R2}))  # a stand-in may set no spark-role
    create_pod(core, namespace, pod_body(f"{APP1}-exec-1", {**view_labels, "spark-role": "executor"}))
    create_pod(core, namespace, pod_body("other-view-driver", {"derivedviews.io/view": "other"}))
    kubelet_status(core, namespace, f"{APP1}-driver", "Pending", {"waiting": {
        "reason": "CreateContainerConfigError", "message": SECRET}})
    kubelet_status(core, namespace, f"{APP2}-driver", "Failed", {"terminated": {
        "exitCode": 1, "reason": "Error", "message": CAUSE + "\n"}})

    pods = kube.driver_pods(namespace, VIEW)
    assert sorted(p["metadata"]["name"] for p in pods) == [f"{APP2}-driver", f"{APP1}-driver"]
    uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods}
    # when each driver attempt was created, as the typed client reads the API server's stamp
    created = {name: core.read_namespaced_pod(name, namespace).metadata.creation_timestamp
               for name in uids}
    by_revision = drivers_by_revision(pods, VIEW, {}, [R1, R2])
    assert by_revision == {
        R1: DriverObserved(name=f"{APP1}-driver", phase="Pending",
                           waiting_reason="CreateContainerConfigError", waiting_message=SECRET,
                           uid=uids[f"{APP1}-driver"], created_at=created[f"{APP1}-driver"]),
        R2: DriverObserved(name=f"{APP2}-driver", phase="Failed", exit_code=1,
                           terminated_reason="Error", terminated_message=CAUSE,
                           uid=uids[f"{APP2}-driver"], created_at=created[f"{APP2}-driver"])}


def kubelet_event(core: client.CoreV1Api, pod: dict[str, Any], reason: str, message: str,
                  at: str) -> None:
    """An Event as a kubelet records one about a pod (core/v1, involvedObject with its uid)."""
    meta = pod["metadata"]
    core.create_namespaced_event(meta["namespace"], {
        "metadata": {"name": f"{meta['name']}.{reason.lower()}.{at[-3:-1]}"},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": meta["name"],
                           "namespace": meta["namespace"], "uid": meta["uid"]},
        "reason": reason, "message": message, "type": "Warning",
        "source": {"component": "kubelet"}, "firstTimestamp": at, "lastTimestamp": at,
        "count": 1})


def test_a_driver_waiting_for_a_secret_volume_is_explained_by_its_failed_mount_event(
        kube: Kube, kube_api_client: Any, namespace: str) -> None:
    """The API server's own field selector picks this pod's FailedMount Events: not another
    pod's (an earlier driver of the same name has another uid), not other reasons."""
    core = client.CoreV1Api(kube_api_client)
    create_pod(core, namespace, pod_body(f"{APP1}-driver", {"derivedviews.io/view": VIEW}))
    create_pod(core, namespace, pod_body(f"{APP2}-driver", {"derivedviews.io/view": VIEW}))
    kubelet_status(core, namespace, f"{APP1}-driver", "Pending",
                   {"waiting": {"reason": "ContainerCreating"}})
    pods = {p["metadata"]["name"]: p for p in kube.driver_pods(namespace, VIEW)}
    waiting, other = pods[f"{APP1}-driver"], pods[f"{APP2}-driver"]
    missing = 'MountVolume.SetUp failed for volume "views-db-volume" : secret "views-db" not found'
    kubelet_event(core, waiting, "FailedMount", "an older failure", "2026-03-01T12:00:01Z")
    kubelet_event(core, waiting, "FailedMount", missing, "2026-03-01T12:00:09Z")
    kubelet_event(core, waiting, "Scheduled", "Successfully assigned", "2026-03-01T12:00:30Z")
    kubelet_event(core, other, "FailedMount", "another pod's failure", "2026-03-01T12:00:40Z")

    driver = driver_from_pod(waiting)
    assert awaits_volumes(driver)
    events = kube.pod_events(namespace, driver.uid, FAILED_MOUNT)
    assert sorted(e["message"] for e in events) == sorted(["an older failure", missing])
    assert mount_failure_of(events, driver.uid) == missing


def test_a_restarted_drivers_previous_termination_message_is_read(
        kube: Kube, kube_api_client: Any, namespace: str) -> None:
    core = client.CoreV1Api(kube_api_client)
    create_pod(core, namespace, pod_body(f"{APP1}-driver", {"derivedviews.io/view": VIEW}))
    kubelet_status(core, namespace, f"{APP1}-driver", "Running",
                   {"running": {"startedAt": "2026-03-01T12:00:00Z"}},
                   last={"terminated": {"exitCode": 137, "reason": "OOMKilled",
                                        "message": "java.lang.OutOfMemoryError"}})
    (pod,) = kube.driver_pods(namespace, VIEW)
    seen = driver_from_pod(pod)
    assert (seen.phase, seen.exit_code, seen.terminated_reason, seen.terminated_message) == (
        "Running", 137, "OOMKilled", "java.lang.OutOfMemoryError")


def rendered_application(namespace: str) -> dict[str, Any]:
    """A SparkApplication as the operator writes it (valid for the installed CRD)."""
    spec = DerivedViewSpec.model_validate({
        "source": {"kafka": {"bootstrapServers": "kafka:9092"}, "topics": ["orders"],
                   "schema": "order_id STRING, customer_id STRING"},
        "transform": {"sql": "SELECT customer_id, count(*) AS n FROM events GROUP BY 1"},
        "sink": {"postgres": {"secretRef": {"name": "views-db"}, "table": "orders_by_customer"},
                 "primaryKey": ["customer_id"]}})
    config = Settings(spark=SparkSettings(template=load_template(), image="dv-job:1"), checkpoints=CheckpointSettings(base="/tmp/dv-test-checkpoints"))
    revision = revision_of(spec)
    manifest = render_spark_application(
        config.spark.template, settings=config, namespace=namespace, view=VIEW, uid="unused",
        spec=spec, revision=revision, checkpoint_location=f"/tmp/dv-test-checkpoints/{revision}")
    manifest["metadata"].pop("ownerReferences")  # no DerivedView owns it in this test
    return manifest


def test_deleting_an_application_waits_for_its_driver_pod(
        kube: Kube, kube_api_client: Any, namespace: str) -> None:
    custom = client.CustomObjectsApi(kube_api_client)
    core = client.CoreV1Api(kube_api_client)
    manifest = rendered_application(namespace)
    name = manifest["metadata"]["name"]
    kube.create_spark_application(namespace, manifest)
    app = custom.get_namespaced_custom_object(SPARK_GROUP, SPARK_VERSION, namespace,
                                              SPARK_PLURAL, name)
    owner = {"apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "SparkApplication",
             "name": name, "uid": app["metadata"]["uid"], "controller": True,
             "blockOwnerDeletion": True}
    # A dependent that stays until the test lets it go (a driver the kubelet is still killing).
    held = f"{name}-held-driver"
    create_pod(core, namespace, pod_body(held, {"derivedviews.io/view": VIEW},
                                         owner=copy.deepcopy(owner), finalizers=[HOLD]))

    kube.delete_spark_application(namespace, name)

    def deleting() -> dict[str, Any] | None:
        obj: dict[str, Any] = custom.get_namespaced_custom_object(
            SPARK_GROUP, SPARK_VERSION, namespace, SPARK_PLURAL, name)
        return obj if obj["metadata"].get("deletionTimestamp") else None

    obj = wait_for(deleting, timeout=TIMEOUT, what=f"{name} to be marked for deletion")
    assert "foregroundDeletion" in obj["metadata"]["finalizers"]
    seen = spark_application_from_object(obj)
    assert seen is not None and seen.deleting
    # The garbage collector deletes the dependent but the application waits for it.
    wait_for(lambda: core.read_namespaced_pod(held, namespace).metadata.deletion_timestamp,
             timeout=TIMEOUT, what=f"pod {held} to be marked for deletion by the collector")
    assert deleting() is not None
    kube.delete_spark_application(namespace, name)  # deleting again is harmless

    core.patch_namespaced_pod(held, namespace, {"metadata": {"finalizers": None}})

    def gone() -> bool:
        try:
            custom.get_namespaced_custom_object(SPARK_GROUP, SPARK_VERSION, namespace,
                                                SPARK_PLURAL, name)
        except ApiException as exc:
            return exc.status == 404
        return False

    wait_for(gone, timeout=TIMEOUT, what=f"{name} to be gone once its driver pod is")
    kube.delete_spark_application(namespace, name)  # 404 counts as done
