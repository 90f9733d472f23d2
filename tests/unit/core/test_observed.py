"""Turning API objects into observations, and what the shell is told to look up."""

from __future__ import annotations

import datetime as dt

from derived_views.api.status import DerivedViewStatus
from derived_views.core.observed import (
    DriverObserved,
    awaits_volumes,
    driver_from_pod,
    drivers_by_revision,
    index_tables_to_observe,
    mount_failure_of,
    revisions_to_observe,
    spark_application_from_object,
    status_from_object,
    topics_to_observe,
    view_from_object,
    with_drivers,
)
from support.world.samples import SQL_V1, SQL_V2, make_spec


def test_view_from_object() -> None:
    view = view_from_object({"metadata": {
        "name": "orders", "namespace": "shop", "uid": "u-1", "generation": 7,
        "annotations": {"derivedviews.io/paused": "true"}, "finalizers": ["derivedviews.io/cleanup"],
        "deletionTimestamp": "2026-03-01T12:00:00Z"}})
    assert (view.name, view.namespace, view.uid, view.generation) == ("orders", "shop", "u-1", 7)
    assert view.annotations == {"derivedviews.io/paused": "true"}
    assert view.finalizers == ("derivedviews.io/cleanup",)
    assert view.deletion_timestamp == dt.datetime(2026, 3, 1, 12, tzinfo=dt.UTC)


def test_spark_application_from_object() -> None:
    app = spark_application_from_object({
        "metadata": {"name": "orders-abc", "labels": {"derivedviews.io/revision": "abc"},
                     "deletionTimestamp": "2026-03-01T12:00:00Z"},
        "status": {"applicationState": {"state": "FAILED", "errorMessage": "boom"},
                   "executionAttempts": 4, "submissionAttempts": 1}})
    assert app is not None
    assert (app.name, app.revision, app.state, app.error_message) == (
        "orders-abc", "abc", "FAILED", "boom")
    assert (app.execution_attempts, app.submission_attempts, app.deleting) == (4, 1, True)
    assert app.stopped and not app.running


def test_a_new_spark_application_has_no_state_yet() -> None:
    app = spark_application_from_object({"metadata": {
        "name": "x", "labels": {"derivedviews.io/revision": "r"}}})
    assert app is not None and app.state == "" and not app.stopped and not app.deleting


def test_objects_without_the_revision_label_are_not_ours() -> None:
    assert spark_application_from_object({"metadata": {"name": "x"}}) is None


def test_status_from_object_ignores_unknown_fields() -> None:
    status = status_from_object({"status": {"observedGeneration": 3, "somethingNew": 1}})
    assert status.observed_generation == 3
    assert status_from_object({}) == DerivedViewStatus()


def test_what_to_observe_covers_the_spec_and_tracked_revisions() -> None:
    status = DerivedViewStatus.model_validate({"revisions": [{
        "revision": "5d31ce3608", "index": "orders_by_customer__5d31ce3608", "phase": "Active",
        "since": "2026-03-01T12:00:00Z", "sparkApplication": "a", "checkpointLocation": "c",
        "startedAt": "2026-03-01T12:00:00Z",
        "content": {"topics": ["payments"], "format": "json", "schema": "a INT",
                    "sql": SQL_V2, "primaryKey": ["a"]}}]})
    spec = make_spec(SQL_V1)
    assert revisions_to_observe(spec, status) == {"71250ff800", "5d31ce3608"}
    assert index_tables_to_observe(spec, status) == {"orders_by_customer__71250ff800",
                                                     "orders_by_customer__5d31ce3608"}
    assert topics_to_observe(spec, status) == {"orders", "payments"}


# Driver pods ---------------------------------------------------------------------------------


def kubelet_pod(name: str, status: dict[str, object], **meta: object) -> dict[str, object]:
    return {"metadata": {"name": name, **meta}, "status": status}


def test_a_pending_driver_says_why_its_container_waits() -> None:
    pod = kubelet_pod("v-abc-driver", {"phase": "Pending", "containerStatuses": [
        {"name": "spark-kubernetes-driver", "state": {"waiting": {
            "reason": "CreateContainerConfigError", "message": 'secret "views-db" not found'}},
         "lastState": {}}]})
    assert driver_from_pod(pod) == DriverObserved(
        name="v-abc-driver", phase="Pending", waiting_reason="CreateContainerConfigError",
        waiting_message='secret "views-db" not found')


def test_a_terminated_driver_gives_its_termination_message_current_before_last() -> None:
    def container(state: dict[str, object], last: dict[str, object]) -> dict[str, object]:
        return {"phase": "Failed", "containerStatuses": [
            {"name": "istio-proxy", "state": {"running": {}}},
            {"name": "spark-kubernetes-driver", "state": state, "lastState": last}]}
    now = {"terminated": {"exitCode": 1, "reason": "Error", "message": "batch 3: boom\n"}}
    before = {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}
    seen = driver_from_pod(kubelet_pod("d", container(now, before),
                                       deletionTimestamp="2026-03-01T12:00:00Z"))
    assert (seen.exit_code, seen.terminated_reason, seen.terminated_message, seen.deleting) == (
        1, "Error", "batch 3: boom", True)
    seen = driver_from_pod(kubelet_pod("d", container({"waiting": {"reason": "x"}}, before)))
    assert (seen.exit_code, seen.terminated_reason, seen.terminated_message) == (
        137, "OOMKilled", "")


def _mount_event(uid: str, message: str, last: str, reason: str = "FailedMount"
                 ) -> dict[str, object]:
    """A core/v1 Event as a kubelet records it on a pod (pkg/kubelet/volumemanager)."""
    return {"metadata": {"name": f"d.{last}", "creationTimestamp": last},
            "involvedObject": {"kind": "Pod", "name": "d", "uid": uid}, "reason": reason,
            "type": "Warning", "message": message, "lastTimestamp": last}


def test_the_newest_failed_mount_of_this_pod_is_the_cause() -> None:
    older = 'MountVolume.SetUp failed for volume "a-volume" : secret "a" not found'
    newer = 'MountVolume.SetUp failed for volume "b-volume" : secret "b" not found'
    events = [_mount_event("u1", newer, "2026-03-01T12:00:09Z"),
              _mount_event("u1", older, "2026-03-01T12:00:01Z"),
              _mount_event("u0", "an earlier pod of the same name", "2026-03-01T12:00:30Z"),
              _mount_event("u1", "Successfully assigned", "2026-03-01T12:00:40Z",
                           reason="Scheduled")]
    assert mount_failure_of(events, "u1") == newer
    assert mount_failure_of(events, "u2") == ""
    assert mount_failure_of([], "u1") == ""


def test_only_a_container_waiting_for_its_volumes_has_its_events_read() -> None:
    def pod(phase: str, reason: str | None, **meta: str) -> DriverObserved:
        state = {"waiting": {"reason": reason}} if reason else {"running": {}}
        return driver_from_pod({"metadata": {"name": "d", "uid": "u1", **meta}, "status": {
            "phase": phase, "containerStatuses": [
                {"name": "spark-kubernetes-driver", "state": state}]}})
    assert pod("Pending", "ContainerCreating").uid == "u1"
    assert awaits_volumes(pod("Pending", "ContainerCreating"))
    assert not awaits_volumes(pod("Pending", "CreateContainerConfigError"))
    assert not awaits_volumes(pod("Running", None))
    assert not awaits_volumes(pod("Pending", "ContainerCreating",
                                  deletionTimestamp="2026-03-01T12:00:00Z"))


def test_a_pod_without_statuses_yet() -> None:
    assert driver_from_pod({"metadata": {"name": "d"}}) == DriverObserved(name="d")


def test_driver_pods_are_matched_by_name_to_revisions_with_or_without_their_app() -> None:
    app = spark_application_from_object({
        "metadata": {"name": "orders-r1", "labels": {"derivedviews.io/revision": "r1"}},
        "status": {"driverInfo": {"podName": "custom-driver"}}})
    assert app is not None
    pods = [kubelet_pod(n, {"phase": "Running"})
            for n in ("custom-driver", "orders-r2-driver", "orders-r1-driver", "other-driver")]
    found = drivers_by_revision(pods, "orders", {"r1": app}, ["r1", "r2"])
    assert {r: d.name for r, d in found.items()} == {"r1": "custom-driver",
                                                      "r2": "orders-r2-driver"}
    attached = with_drivers({"r1": app}, found)
    assert attached["r1"].driver == found["r1"]
    assert app.driver is None and app.driver_pod_name == "custom-driver"


def test_a_job_started_when_its_newest_driver_was_created() -> None:
    """A resubmission keeps the object and creates a new driver pod: the later of the two."""
    app = spark_application_from_object({"metadata": {
        "name": "orders-r1", "labels": {"derivedviews.io/revision": "r1"},
        "creationTimestamp": "2026-03-01T12:00:00Z"}})
    assert app is not None and app.started_at == dt.datetime(2026, 3, 1, 12, tzinfo=dt.UTC)
    rerun = driver_from_pod({"metadata": {"name": "orders-r1-driver",
                                          "creationTimestamp": "2026-03-01T12:07:30Z"}})
    assert with_drivers({"r1": app}, {"r1": rerun})["r1"].started_at == dt.datetime(
        2026, 3, 1, 12, 7, 30, tzinfo=dt.UTC)
    first = driver_from_pod({"metadata": {"name": "orders-r1-driver",
                                          "creationTimestamp": "2026-03-01T11:59:59Z"}})
    assert with_drivers({"r1": app}, {"r1": first})["r1"].started_at == app.created_at
    unknown = spark_application_from_object({"metadata": {
        "name": "x", "labels": {"derivedviews.io/revision": "r"}}})
    assert unknown is not None and unknown.started_at is None


def test_the_driver_pod_name_defaults_like_the_spark_operators() -> None:
    app = spark_application_from_object({
        "metadata": {"name": "orders-r1", "labels": {"derivedviews.io/revision": "r1"}}})
    assert app is not None and app.driver_pod_name == "orders-r1-driver"


def test_a_failed_submission_is_stopped_unless_the_spark_operator_retries_it() -> None:
    def submission_failed(policy: dict[str, object], attempts: int) -> bool:
        app = spark_application_from_object({
            "metadata": {"name": "x", "labels": {"derivedviews.io/revision": "r"}},
            "spec": {"restartPolicy": policy},
            "status": {"applicationState": {"state": "SUBMISSION_FAILED"},
                       "submissionAttempts": attempts}})
        assert app is not None
        return app.stopped

    assert submission_failed({"type": "Never"}, 1)
    assert submission_failed({"type": "OnFailure", "onFailureRetries": 3}, 1)
    assert not submission_failed({"type": "OnFailure", "onSubmissionFailureRetries": 1}, 1)
    assert submission_failed({"type": "OnFailure", "onSubmissionFailureRetries": 1}, 2)
    assert not submission_failed({"type": "Always"}, 9)
