"""Every SparkApplication state, read with its driver pod, has one meaning (core.job.job_state).

The state list is kubeflow/spark-operator v2.5.2's (api/v1beta2/sparkapplication_types.go),
written out here by hand; the messages are the kubelet's and the Spark Operator's wording.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from derived_views.core.job.job_state import KNOWN_STATES, JobState, judge_job
from derived_views.core.observed import (
    SparkApplicationObserved,
    driver_from_pod,
    spark_application_from_object,
)
from support.world.world import driver_pod

UPSTREAM_STATES = {"", "SUBMITTED", "RUNNING", "COMPLETED", "FAILED", "SUBMISSION_FAILED",
                   "PENDING_RERUN", "INVALIDATING", "SUCCEEDING", "FAILING", "SUSPENDING",
                   "SUSPENDED", "RESUMING", "UNKNOWN"}
EXIT_MESSAGE = "driver container failed with ExitCode: 1, Reason: Error"
CAUSE = ("batch 18: a row has NULL in primary-key column 'account_id'; fix the transform or "
         "filter such rows")
SECRET = 'secret "views-db" not found'
APP = "orders-by-customer-71250ff800"
POD = f"{APP}-driver"


def app(state: str, *, error: str = "", pod: dict[str, object] | None = None,
        policy: dict[str, object] | None = None, submissions: int = 1) -> SparkApplicationObserved:
    seen = spark_application_from_object({
        "metadata": {"name": APP, "labels": {"derivedviews.io/revision": "71250ff800"}},
        "spec": {"restartPolicy": policy or {"type": "OnFailure", "onFailureRetries": 3}},
        "status": {"applicationState": {"state": state, "errorMessage": error},
                   "submissionAttempts": submissions, "driverInfo": {"podName": POD}}})
    assert seen is not None
    if pod is None:
        return seen
    return replace(seen, driver=driver_from_pod(pod))


def test_the_table_knows_exactly_the_upstream_states() -> None:
    assert KNOWN_STATES == UPSTREAM_STATES


STATE_TABLE = [
    ("", JobState.STARTING, ""),
    ("SUBMITTED", JobState.STARTING, ""),
    ("RUNNING", JobState.RUNNING, ""),
    ("COMPLETED", JobState.COMPLETED, "JobCompleted"),
    ("FAILED", JobState.FAILED, "JobFailed"),
    ("SUBMISSION_FAILED", JobState.FAILED, "JobFailed"),
    ("PENDING_RERUN", JobState.STARTING, ""),
    ("INVALIDATING", JobState.STARTING, ""),
    ("SUCCEEDING", JobState.STARTING, ""),
    ("FAILING", JobState.STARTING, ""),
    ("SUSPENDING", JobState.SUSPENDED, "JobSuspended"),
    ("SUSPENDED", JobState.SUSPENDED, "JobSuspended"),
    ("RESUMING", JobState.STARTING, ""),
    ("UNKNOWN", JobState.STARTING, ""),
]


def test_the_table_covers_every_upstream_state() -> None:
    assert {state for state, _, _ in STATE_TABLE} == UPSTREAM_STATES


@pytest.mark.parametrize(("state", "kind", "reason"), STATE_TABLE)
def test_every_state_has_a_meaning(state: str, kind: JobState, reason: str) -> None:
    judgement = judge_job(app(state))
    assert (judgement.kind, judgement.reason, judgement.known_state) == (kind, reason, True)
    assert judgement.kind == JobState.RUNNING or judgement.message


def test_a_state_from_a_newer_spark_operator_is_not_running_and_flagged() -> None:
    judgement = judge_job(app("HIBERNATING"))
    assert judgement.kind == JobState.STARTING and not judgement.known_state
    assert "HIBERNATING" in judgement.message


def test_a_failed_job_says_the_drivers_termination_message() -> None:
    pod = driver_pod(POD, "Failed", terminated=(1, "Error", CAUSE + "\n"))
    judgement = judge_job(app("FAILED", error=EXIT_MESSAGE, pod=pod))
    assert (judgement.kind, judgement.reason, judgement.message) == (JobState.FAILED, "JobFailed", CAUSE)


def test_the_previous_attempts_termination_message_counts_too() -> None:
    pod = driver_pod(POD, "Pending", terminated=(1, "Error", CAUSE), last=True,
                     waiting=("ContainerCreating", ""))
    assert judge_job(app("FAILED", error=EXIT_MESSAGE, pod=pod)).message == CAUSE


def test_without_a_termination_message_the_error_message_is_the_cause() -> None:
    pod = driver_pod(POD, "Failed", terminated=(137, "OOMKilled", ""))
    assert judge_job(app("FAILED", error=EXIT_MESSAGE, pod=pod)).message == EXIT_MESSAGE
    assert judge_job(app("FAILED", error=EXIT_MESSAGE)).message == EXIT_MESSAGE
    assert judge_job(app("FAILED")).message == "the job ended in state FAILED"


@pytest.mark.parametrize(("waiting", "reason"), [
    (("CreateContainerConfigError", SECRET), "SecretMissing"),
    (("CreateContainerConfigError", "couldn't find key password in Secret shop/views-db"),
     "SecretMissing"),
    (("CreateContainerConfigError", 'configmap "spark-conf" not found'), "ConfigMapMissing"),
    (("CreateContainerError", "context deadline exceeded"), "DriverPending"),
    (("ErrImagePull", "pull access denied for dv-job"), "ImagePullFailed"),
    (("ImagePullBackOff", 'Back-off pulling image "dv-job:9"'), "ImagePullFailed"),
    (("InvalidImageName", 'Failed to apply default image tag "dv job"'), "ImagePullFailed"),
])
@pytest.mark.parametrize("state", ["SUBMITTED", "", "PENDING_RERUN", "UNKNOWN"])
def test_a_driver_that_cannot_start_blocks_the_job(state: str, waiting: tuple[str, str],
                                                   reason: str) -> None:
    judgement = judge_job(app(state, pod=driver_pod(POD, "Pending", waiting=waiting)))
    assert (judgement.kind, judgement.reason) == (JobState.BLOCKED, reason)
    assert waiting[0] in judgement.message and waiting[1] in judgement.message
    assert POD in judgement.message


@pytest.mark.parametrize("pod", [
    driver_pod(POD, "Pending", waiting=("ContainerCreating", "")),
    driver_pod(POD, "Pending", waiting=("CreateContainerConfigError", SECRET), deleting=True),
    driver_pod(POD, "Running"),
], ids=["creating", "deleting", "running"])
def test_a_driver_on_its_way_does_not_block(pod: dict[str, object]) -> None:
    assert judge_job(app("SUBMITTED", pod=pod)).kind == JobState.STARTING


MOUNT = 'MountVolume.SetUp failed for volume "dv-checkpoint-volume" : secret "dv-checkpoint" not found'


@pytest.mark.parametrize(("failure", "reason"), [
    (MOUNT, "SecretMissing"),
    ('MountVolume.SetUp failed for volume "conf" : configmap "spark-conf" not found',
     "ConfigMapMissing"),
    ('MountVolume.SetUp failed for volume "data" : mount failed: exit status 32',
     "DriverPending"),
])
def test_a_volume_the_kubelet_cannot_mount_blocks_the_job(failure: str, reason: str) -> None:
    """A real kubelet keeps the container ContainerCreating with no message: the cause is in
    its FailedMount Event, which the shell reads into `mount_failure`."""
    seen = app("SUBMITTED", pod=driver_pod(POD, "Pending", waiting=("ContainerCreating", "")))
    assert seen.driver is not None
    judgement = judge_job(replace(seen, driver=replace(seen.driver, mount_failure=failure)))
    assert (judgement.kind, judgement.reason) == (JobState.BLOCKED, reason)
    assert f"FailedMount: {failure}" in judgement.message and POD in judgement.message


def test_sparks_own_config_map_racing_its_driver_pod_is_not_a_block() -> None:
    seen = app("SUBMITTED", pod=driver_pod(POD, "Pending", waiting=("ContainerCreating", "")))
    assert seen.driver is not None
    for racing in ('MountVolume.SetUp failed for volume "spark-conf-volume-driver" : configmap '
                   '"spark-drv-5f2e1c9a7b3d4e60-conf-map" not found',
                   'MountVolume.SetUp failed for volume "pod-template-volume" : configmap '
                   '"orders-58f778f0a5-37bfeea2228938ff-driver-podspec-conf-map" not found'):
        assert judge_job(replace(seen, driver=replace(seen.driver, mount_failure=racing))).kind == (
            JobState.STARTING), racing
    theirs = ('MountVolume.SetUp failed for volume "extra" : configmap "team-podspec" not found')
    assert judge_job(replace(seen, driver=replace(seen.driver, mount_failure=theirs))).reason == (
        "ConfigMapMissing")


def test_a_mount_failure_no_longer_counts_once_the_container_exists() -> None:
    seen = app("RUNNING", pod=driver_pod(POD, "Running"))
    assert seen.driver is not None
    assert judge_job(replace(seen, driver=replace(seen.driver, mount_failure=MOUNT))).kind == (
        JobState.RUNNING)


def test_a_stopped_job_is_failed_even_if_its_pod_still_waits() -> None:
    pod = driver_pod(POD, "Pending", waiting=("CreateContainerConfigError", SECRET))
    assert judge_job(app("FAILED", error="driver pod not found", pod=pod)).kind == JobState.FAILED


@pytest.mark.parametrize(("policy", "submissions", "kind"), [
    ({"type": "Always", "onSubmissionFailureRetryInterval": 5}, 7, JobState.STARTING),
    ({"type": "OnFailure", "onSubmissionFailureRetries": 2}, 2, JobState.STARTING),
    ({"type": "OnFailure", "onSubmissionFailureRetries": 2}, 3, JobState.FAILED),
    ({"type": "OnFailure", "onFailureRetries": 3}, 1, JobState.FAILED),
    ({"type": "Never"}, 1, JobState.FAILED),
])
def test_a_failed_submission_is_final_only_when_the_spark_operator_will_not_retry(
        policy: dict[str, object], submissions: int, kind: JobState) -> None:
    judgement = judge_job(app("SUBMISSION_FAILED", error="failed to run spark-submit: boom",
                          policy=policy, submissions=submissions))
    assert judgement.kind == kind
    assert "failed to run spark-submit: boom" in judgement.message
