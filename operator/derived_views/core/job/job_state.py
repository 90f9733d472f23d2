"""What a revision's job is doing: the SparkApplication's state read together with its driver pod.

The Spark Operator's `applicationState` alone does not say enough: a driver that
cannot start (a missing Secret) leaves the application SUBMITTED indefinitely,
and a failed job's errorMessage only names the exit code. The driver pod says
why (the kubelet's waiting reason, the job's termination message). Every state
of kubeflow/spark-operator v2.5.2 (api/v1beta2/sparkapplication_types.go) has
a meaning here; a state this table does not know is "not running", never a crash.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from derived_views.core import reasons
from derived_views.core.observed import (
    FAILED_MOUNT,
    SUBMISSION_FAILED,
    DriverObserved,
    SparkApplicationObserved,
)


class JobState(StrEnum):
    RUNNING = "Running"
    STARTING = "Starting"
    """Not running yet or any more, not failed either: the Spark Operator is moving it on."""
    BLOCKED = "Blocked"
    """The driver pod cannot start until someone acts (a Secret, an image); nothing is torn down."""
    SUSPENDED = "Suspended"
    """Someone suspended the job (spec.suspend); derived views never does."""
    FAILED = "Failed"
    COMPLETED = "Completed"
    """Ended without failing; a view's streaming job is meant to run until deleted."""


@dataclass(frozen=True)
class Judgement:
    kind: JobState
    reason: str = ""
    """CamelCase reason for a condition, for BLOCKED, SUSPENDED, FAILED and COMPLETED."""
    message: str = ""
    """The cause, in one line, for people."""
    known_state: bool = True
    """False for a state this module does not know (a newer Spark Operator): log it."""


TRANSITIONAL: dict[str, str] = {
    "": "not yet picked up by the Spark Operator",
    "SUBMITTED": "submitted; its driver is starting",
    "PENDING_RERUN": "waiting to be resubmitted by the Spark Operator",
    "INVALIDATING": "being resubmitted by the Spark Operator after a change",
    "FAILING": "its driver failed; the Spark Operator retries it or marks it failed",
    "SUCCEEDING": "its driver ended; the Spark Operator restarts it or marks it completed",
    "UNKNOWN": "the Spark Operator cannot tell the state of its driver pod",
    "RESUMING": "being resumed after a suspension",
    SUBMISSION_FAILED: "its submission failed; the Spark Operator retries it",
}
SUSPENDED_STATES = frozenset({"SUSPENDING", "SUSPENDED"})
TERMINAL_STATES = frozenset({"FAILED", "COMPLETED", SUBMISSION_FAILED})
KNOWN_STATES = frozenset({"RUNNING", *TRANSITIONAL, *SUSPENDED_STATES, *TERMINAL_STATES})

BLOCKING_WAIT_REASONS = frozenset({"CreateContainerConfigError", "CreateContainerError",
                                   "ImagePullBackOff", "ErrImagePull", "InvalidImageName"})
"""Kubelet waiting reasons of a driver container that no retry fixes by itself."""
_IMAGE_REASONS = frozenset({"ImagePullBackOff", "ErrImagePull", "InvalidImageName"})
SPARKS_OWN_CONFIG_MAP = re.compile(
    r'configmap "(spark-drv-[0-9a-z]+|[0-9a-z.-]+-driver-podspec)-conf-map" not found')
"""spark-submit creates the driver's ConfigMaps (its Spark conf, its pod template) just after
its pod, owner-referenced to it (KubernetesClientApplication), so a kubelet fast enough fails
those mounts once or twice at every start: not a block. Seen on the real node at every
driver start; any other missing ConfigMap is one."""
_CONFIG_REASONS = frozenset({"CreateContainerConfigError", FAILED_MOUNT})
"""Where a missing Secret or ConfigMap (or a key of one) shows: an `env` reference the kubelet
cannot resolve, or a volume it cannot mount (`secret "x" not found`, pkg/volume/secret)."""


def judge_job(app: SparkApplicationObserved) -> Judgement:
    """The job's situation, from the application state and its driver pod."""
    state = app.state
    if app.stopped:
        cause = failure_cause(app)
        if state == "COMPLETED":
            return Judgement(JobState.COMPLETED, reasons.JOB_COMPLETED, cause)
        return Judgement(JobState.FAILED, reasons.JOB_FAILED, cause)
    if state in SUSPENDED_STATES:
        return Judgement(JobState.SUSPENDED, reasons.JOB_SUSPENDED,
                         f"SparkApplication {app.name} is {state.lower()} (its spec.suspend is "
                         "set); derived views never suspends a job: unset spec.suspend, or "
                         "delete the SparkApplication so the operator recreates it")
    blocked = blocked_driver(app.driver)
    if blocked is not None:
        return blocked
    if state == "RUNNING":
        return Judgement(JobState.RUNNING)
    if state in TRANSITIONAL:
        detail = TRANSITIONAL[state]
        if state == SUBMISSION_FAILED and app.error_message:
            detail = f"{detail}: {app.error_message}"
        return Judgement(JobState.STARTING, message=detail)
    return Judgement(JobState.STARTING, message=f"in state {state!r}, which this operator does not "
                                            "know; treated as not running", known_state=False)


def failure_cause(app: SparkApplicationObserved) -> str:
    """The job's own one-line cause (the driver's termination message) when there is one, else
    the Spark Operator's errorMessage (which only names the exit code)."""
    driver = app.driver
    if driver is not None and driver.terminated_message:
        return driver.terminated_message
    return app.error_message or f"the job ended in state {app.state}"


def blocked_driver(driver: DriverObserved | None) -> Judgement | None:
    """A pending driver whose container the kubelet cannot create or pull, or whose volumes
    it cannot mount (a Secret the job mounts is missing), else None."""
    if driver is None or driver.deleting or driver.phase not in ("", "Pending"):
        return None
    if driver.waiting_reason in BLOCKING_WAIT_REASONS:
        reason, message = driver.waiting_reason, driver.waiting_message
    elif (driver.waiting_reason == "ContainerCreating" and driver.mount_failure
          and not SPARKS_OWN_CONFIG_MAP.search(driver.mount_failure)):
        reason, message = FAILED_MOUNT, driver.mount_failure
    else:
        return None
    lowered = message.lower()
    if reason in _IMAGE_REASONS:
        kind = reasons.IMAGE_PULL_FAILED
    elif reason in _CONFIG_REASONS and "secret" in lowered:
        kind = reasons.SECRET_MISSING
    elif reason in _CONFIG_REASONS and "configmap" in lowered:
        kind = reasons.CONFIG_MAP_MISSING
    else:
        kind = reasons.DRIVER_PENDING
    detail = f": {message}" if message else ""
    return Judgement(JobState.BLOCKED, kind,
                     f"driver pod {driver.name} cannot start ({reason}{detail}); it starts once "
                     "that is fixed")
