"""The stand-in follows the Spark Operator v2.5.2 state machine, transition by transition.

Expected values are written out from upstream's controller.go and
pkg/util/sparkapplication.go, not derived from the module under test.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from dvstack.spark import app_states as s

NOW = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
T0 = "2026-01-02T03:04:05Z"
EARLIER = "2026-01-02T03:03:00Z"  # 65 s before NOW
SPEC: dict[str, Any] = {"type": "Python", "mainApplicationFile": "local:///app.py"}
ON_FAILURE = {**SPEC, "restartPolicy": {"type": "OnFailure", "onFailureRetries": 2,
                                         "onFailureRetryInterval": 10,
                                         "onSubmissionFailureRetries": 1,
                                         "onSubmissionFailureRetryInterval": 20}}


def step(status: dict[str, Any], pod: s.DriverPod | None = None, spec: dict[str, Any] = SPEC,
         now: dt.datetime = NOW, deleting: bool = False) -> s.Step:
    return s.reconcile("app", spec, status, deleting=deleting, pod=pod, now=now,
                       submission_id="sub-2")


def running(**extra: Any) -> dict[str, Any]:
    return {"applicationState": {"state": "RUNNING"}, "driverInfo": {"podName": "app-driver"},
            "submissionAttempts": 1, "executionAttempts": 1, "submissionID": "sub-1",
            "lastSubmissionAttemptTime": EARLIER, **extra}


def test_a_new_application_is_submitted_with_fresh_submission_fields() -> None:
    result = step({})
    assert result.submit and not result.delete_driver_pod
    assert result.status == {"applicationState": {"state": ""}, "submissionID": "sub-2",
                             "driverInfo": {"podName": "app-driver"},
                             "lastSubmissionAttemptTime": T0, "submissionAttempts": 1}
    assert s.after_submission(result.status, None) == {
        "applicationState": {"state": "SUBMITTED"}, "submissionID": "sub-2",
        "driverInfo": {"podName": "app-driver"}, "lastSubmissionAttemptTime": T0,
        "submissionAttempts": 1, "executionAttempts": 1}


def test_a_refused_submission_keeps_the_cause_and_fails_without_retries() -> None:
    submitted = step({}).status
    failed = s.after_submission(submitted, s.DRIVER_POD_EXISTS)
    assert failed["applicationState"] == {
        "state": "SUBMISSION_FAILED",
        "errorMessage": "failed to submit spark application: failed to run spark-submit: "
                        "driver pod already exist"}
    assert "executionAttempts" not in failed
    final = step(failed)
    assert final.status["applicationState"] == {
        "state": "FAILED", "errorMessage": failed["applicationState"]["errorMessage"]}
    assert final.status["terminationTime"] == T0 and not final.submit


def test_submission_failure_retries_after_interval_times_attempts() -> None:
    status = {"applicationState": {"state": "SUBMISSION_FAILED", "errorMessage": "x"},
              "driverInfo": {"podName": "app-driver"}, "submissionAttempts": 1,
              "lastSubmissionAttemptTime": "2026-01-02T03:03:50Z"}  # 15 s ago; due after 20 s
    assert step(status, spec=ON_FAILURE).status == status
    later = step(status, spec=ON_FAILURE, now=NOW + dt.timedelta(seconds=6))
    assert later.submit and later.status["submissionAttempts"] == 2
    blocked = step(status, pod=s.DriverPod("Running"), spec=ON_FAILURE,
                   now=NOW + dt.timedelta(seconds=6))
    assert blocked.delete_driver_pod and not blocked.submit
    exhausted = {**status, "submissionAttempts": 2}
    assert step(exhausted, spec=ON_FAILURE).status["applicationState"]["state"] == "FAILED"


@pytest.mark.parametrize(("phase", "state"), [("Pending", "SUBMITTED"), ("Running", "RUNNING"),
                                              ("Unknown", "UNKNOWN")])
def test_the_driver_pod_phase_drives_the_state(phase: str, state: str) -> None:
    status = running(applicationState={"state": "SUBMITTED"})
    result = step(status, pod=s.DriverPod(phase, app_id="spark-abc"))
    assert result.status["applicationState"] == {"state": state}
    assert result.status["sparkApplicationId"] == "spark-abc"


def test_a_failed_driver_gives_upstreams_message_not_the_cause() -> None:
    pod = s.DriverPod("Failed", exit_code=1, reason="Error", app_id="spark-abc")
    result = step(running(), pod=pod)
    assert result.status["applicationState"] == {
        "state": "FAILING", "errorMessage": "driver container failed with ExitCode: 1, Reason: Error"}
    assert result.status["terminationTime"] == T0
    final = step(result.status, pod=pod)
    assert final.status["applicationState"]["state"] == "FAILED"
    assert final.status["applicationState"]["errorMessage"] == \
        "driver container failed with ExitCode: 1, Reason: Error"
    assert not final.delete_driver_pod


def test_a_failed_pod_without_container_status_says_so() -> None:
    result = step(running(), pod=s.DriverPod("Failed"))
    assert result.status["applicationState"] == {
        "state": "FAILING", "errorMessage": "driver container status missing"}


def test_a_running_pod_with_a_terminated_driver_container_counts_as_terminated() -> None:
    assert step(running(), pod=s.DriverPod("Running", exit_code=0, reason="Completed")) \
        .status["applicationState"] == {"state": "SUCCEEDING"}


def test_failing_with_retries_left_waits_then_reruns_with_a_reset_status() -> None:
    failing = running(applicationState={"state": "FAILING", "errorMessage": "driver container "
                                        "failed with ExitCode: 1, Reason: Error"},
                      terminationTime=T0, sparkApplicationId="spark-abc",
                      lastSubmissionAttemptTime="2026-01-02T03:04:00Z")  # 5 s ago; due after 10
    pod = s.DriverPod("Failed", exit_code=1, reason="Error")
    assert step(failing, pod=pod, spec=ON_FAILURE).status == failing
    due = step(failing, pod=pod, spec=ON_FAILURE, now=NOW + dt.timedelta(seconds=5))
    assert due.delete_driver_pod and not due.submit
    assert due.status == {"applicationState": {"state": "PENDING_RERUN"}, "driverInfo": {},
                          "submissionAttempts": 1, "executionAttempts": 1,
                          "submissionID": "sub-1",
                          "lastSubmissionAttemptTime": "2026-01-02T03:04:00Z",
                          "terminationTime": None}
    assert not step(due.status, pod=pod, spec=ON_FAILURE).submit  # old pod still there
    rerun = step(due.status, pod=None, spec=ON_FAILURE)
    assert rerun.submit and rerun.status["submissionAttempts"] == 2


def test_on_failure_retries_count_execution_attempts() -> None:
    pod = s.DriverPod("Failed", exit_code=1, reason="Error")
    third = running(applicationState={"state": "FAILING"}, executionAttempts=3)
    assert step(third, pod=pod, spec=ON_FAILURE).status["applicationState"]["state"] == "FAILED"
    second = running(applicationState={"state": "FAILING"}, executionAttempts=2)
    assert step(second, pod=pod, spec=ON_FAILURE).delete_driver_pod


def test_on_failure_without_a_retry_count_never_retries() -> None:
    spec = {**SPEC, "restartPolicy": {"type": "OnFailure"}}
    failing = running(applicationState={"state": "FAILING"})
    assert step(failing, spec=spec).status["applicationState"]["state"] == "FAILED"


def test_succeeding_completes_unless_always() -> None:
    succeeding = running(applicationState={"state": "SUCCEEDING"}, terminationTime=T0)
    pod = s.DriverPod("Succeeded", exit_code=0, reason="Completed")
    assert step(succeeding, pod=pod).status["applicationState"] == {"state": "COMPLETED"}
    always = {**SPEC, "restartPolicy": {"type": "Always"}}
    again = step(succeeding, pod=pod, spec=always)
    assert again.status["applicationState"] == {"state": "PENDING_RERUN"}
    assert again.delete_driver_pod


def test_no_driver_pod_fails_after_the_creation_grace_period() -> None:
    fresh = running(applicationState={"state": "SUBMITTED"},
                    lastSubmissionAttemptTime="2026-01-02T03:04:00Z")
    assert step(fresh).status == fresh
    gone = step(running())
    assert gone.status["applicationState"] == {"state": "FAILING",
                                               "errorMessage": "driver pod not found"}


def test_invalidation_resets_counters_and_reruns_once_the_pod_is_gone() -> None:
    assert s.spec_change_invalidates(SPEC, {**SPEC, "arguments": ["x"]})
    assert not s.spec_change_invalidates(SPEC, {**SPEC, "suspend": True,
                                                "timeToLiveSeconds": 60})
    invalid = s.invalidated(running(terminationTime=T0))
    assert invalid["applicationState"] == {"state": "INVALIDATING"}
    result = step(invalid, pod=s.DriverPod("Running"))
    assert result.delete_driver_pod
    assert result.status == {"applicationState": {"state": "PENDING_RERUN"}, "driverInfo": {},
                             "submissionID": "sub-1", "lastSubmissionAttemptTime": None,
                             "terminationTime": None}
    resubmitted = step(result.status)
    assert resubmitted.submit and resubmitted.status["submissionAttempts"] == 1


def test_suspend_and_resume() -> None:
    suspend = {**SPEC, "suspend": True}
    suspending = step(running(), pod=s.DriverPod("Running"), spec=suspend)
    assert suspending.status["applicationState"] == {"state": "SUSPENDING"}
    suspended = step(suspending.status, pod=s.DriverPod("Running"), spec=suspend)
    assert suspended.delete_driver_pod
    assert suspended.status == {"applicationState": {"state": "SUSPENDED"}, "driverInfo": {},
                                "submissionAttempts": 1, "executionAttempts": 1,
                                "submissionID": "sub-1", "lastSubmissionAttemptTime": EARLIER}
    assert step(suspended.status, spec=suspend).status["applicationState"] == \
        {"state": "SUSPENDED"}
    assert not step(suspended.status, pod=s.DriverPod("Failed"), spec=SPEC).submit
    resuming = step(suspended.status, spec=SPEC)
    assert resuming.status["applicationState"] == {"state": "RESUMING"}
    submitted = step(resuming.status, spec=SPEC)
    assert submitted.submit and submitted.status["submissionAttempts"] == 2


def test_terminated_applications_are_not_suspended_and_expire_after_their_ttl() -> None:
    done = running(applicationState={"state": "COMPLETED"}, terminationTime=EARLIER)
    assert step(done, spec={**SPEC, "suspend": True}).status == done
    assert not step(done, spec={**SPEC, "timeToLiveSeconds": 120}).delete_application
    assert step(done, spec={**SPEC, "timeToLiveSeconds": 60}).delete_application


def test_a_deleted_application_only_loses_its_driver_pod() -> None:
    result = step(running(), pod=s.DriverPod("Running"), deleting=True)
    assert result.delete_driver_pod and not result.submit and result.status == running()


def test_every_upstream_state_is_handled() -> None:
    assert set(s.STATES) == {"", "SUBMITTED", "RUNNING", "COMPLETED", "FAILED",
                             "SUBMISSION_FAILED", "PENDING_RERUN", "INVALIDATING", "SUCCEEDING",
                             "FAILING", "SUSPENDING", "SUSPENDED", "RESUMING", "UNKNOWN"}
    for state in s.STATES:
        status = running(applicationState={"state": state})
        assert isinstance(step(status, pod=s.DriverPod("Running")), s.Step)


def test_driver_pod_name_rules() -> None:
    assert s.intended_driver_pod_name("a", {}) == "a-driver"
    assert s.intended_driver_pod_name("a", {"sparkConf": {
        "spark.kubernetes.driver.pod.name": "conf-name"}}) == "conf-name"
    assert s.intended_driver_pod_name("a", {"driver": {"podName": "given"}, "sparkConf": {
        "spark.kubernetes.driver.pod.name": "conf-name"}}) == "given"
    assert s.driver_pod_name("a", {}, {"driverInfo": {"podName": "recorded"}}) == "recorded"
