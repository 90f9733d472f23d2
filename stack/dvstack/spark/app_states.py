"""The Kubeflow Spark Operator's SparkApplication state machine (v2.5.2), as pure functions.

Our operator's decisions depend on the states and status fields the real
operator writes, so the stand-in follows its reconciler step for step (our
own code, written from `internal/controller/sparkapplication/controller.go`,
`event_filter.go`, `pkg/util/sparkapplication.go` and `api/v1beta2/defaults.go`
of github.com/kubeflow/spark-operator v2.5.2):

    NEW -> SUBMITTED (driver pod created) | SUBMISSION_FAILED (creation refused)
    SUBMITTED --pod Pending--> SUBMITTED --pod Running--> RUNNING
    RUNNING/SUBMITTED --pod Succeeded--> SUCCEEDING -> COMPLETED (or PENDING_RERUN: Always)
    RUNNING/SUBMITTED --pod Failed--> FAILING -> FAILED, or (retries left, interval
        x submissionAttempts after the last submission) PENDING_RERUN
    SUBMISSION_FAILED -> FAILED, or (OnFailure with onSubmissionFailureRetries left) a new submission
    PENDING_RERUN --old driver pod gone--> a new submission
    any --spec changed--> INVALIDATING -> (pod deleted, counters reset) PENDING_RERUN
    any but COMPLETED/FAILED --spec.suspend--> SUSPENDING -> SUSPENDED --unsuspended--> RESUMING -> submit
    driver pod phase Unknown -> UNKNOWN

One call is one reconcile: it returns the new status and what to do (create the
driver pod, delete it, delete the application); the caller does it and calls
again on its next pass.  Status is the JSON of `SparkApplication.status`.
"""

from __future__ import annotations

import copy
import datetime as dt
from dataclasses import dataclass
from typing import Any

NEW = ""
SUBMITTED = "SUBMITTED"
RUNNING = "RUNNING"
COMPLETED = "COMPLETED"
FAILED = "FAILED"
SUBMISSION_FAILED = "SUBMISSION_FAILED"
PENDING_RERUN = "PENDING_RERUN"
INVALIDATING = "INVALIDATING"
SUCCEEDING = "SUCCEEDING"
FAILING = "FAILING"
SUSPENDING = "SUSPENDING"
SUSPENDED = "SUSPENDED"
RESUMING = "RESUMING"
UNKNOWN = "UNKNOWN"
STATES = (NEW, SUBMITTED, RUNNING, COMPLETED, FAILED, SUBMISSION_FAILED, PENDING_RERUN,
          INVALIDATING, SUCCEEDING, FAILING, SUSPENDING, SUSPENDED, RESUMING, UNKNOWN)
TERMINAL = (COMPLETED, FAILED)

# The controller's --driver-pod-creation-grace-period default.
DRIVER_POD_CREATION_GRACE = dt.timedelta(seconds=10)
# The application defaulting webhook's retry intervals when the policy is not Never.
DEFAULT_RETRY_INTERVAL_SECONDS = 5
# The container Spark names in the driver pod; the controller reads its terminated state.
DRIVER_CONTAINER = "spark-kubernetes-driver"


@dataclass(frozen=True)
class DriverPod:
    """What the controller reads from the driver pod."""

    phase: str
    """Pending, Running, Succeeded, Failed or Unknown."""
    exit_code: int | None = None
    """The driver container's `state.terminated.exitCode`; None while it has not terminated."""
    reason: str = ""
    """The driver container's `state.terminated.reason` (Completed, Error, OOMKilled...)."""
    app_id: str = ""
    """The pod's `spark-app-selector` label: Spark's application id."""


@dataclass(frozen=True)
class Step:
    """The outcome of one reconcile."""

    status: dict[str, Any]
    """The status to write (equal to the input when nothing changed)."""
    submit: bool = False
    """Create the driver pod, then write `after_submission(status, error)` instead of `status`."""
    delete_driver_pod: bool = False
    """Delete the driver pod (named by `driver_pod_name`) before writing the status."""
    delete_application: bool = False
    """The application outlived spec.timeToLiveSeconds: delete it."""


def state(status: dict[str, Any]) -> str:
    return str((status.get("applicationState") or {}).get("state") or NEW)


def driver_pod_name(name: str, spec: dict[str, Any], status: dict[str, Any]) -> str:
    """The name recorded at submission, else the one the next submission will use."""
    recorded = (status.get("driverInfo") or {}).get("podName")
    if recorded:
        return str(recorded)
    return intended_driver_pod_name(name, spec)


def intended_driver_pod_name(name: str, spec: dict[str, Any]) -> str:
    """driver.podName, else sparkConf spark.kubernetes.driver.pod.name, else `<app>-driver`."""
    given = (spec.get("driver") or {}).get("podName")
    if given:
        return str(given)
    conf = (spec.get("sparkConf") or {}).get("spark.kubernetes.driver.pod.name")
    return str(conf) if conf else f"{name}-driver"


def spec_change_invalidates(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """A spec edit reruns the application unless only `suspend` or `timeToLiveSeconds` changed."""
    ignored = ("suspend", "timeToLiveSeconds")
    return ({k: v for k, v in old.items() if k not in ignored}
            != {k: v for k, v in new.items() if k not in ignored})


def invalidated(status: dict[str, Any]) -> dict[str, Any]:
    """What the event filter writes on a spec change: only the state moves."""
    return _with_state(canonical(status), INVALIDATING)


def reconcile(name: str, spec: dict[str, Any], status: dict[str, Any], *,
              deleting: bool, pod: DriverPod | None, now: dt.datetime,
              submission_id: str) -> Step:
    """One pass of the controller over an application and its driver pod (None: no such pod).

    `submission_id` is used only when this pass submits.
    """
    if deleting:
        # No finalizer: the API server removes the application right away and the
        # garbage collector its owned driver pod; a lingering one loses its pod here.
        return Step(copy.deepcopy(status), delete_driver_pod=pod is not None)
    current = canonical(status)
    st = state(current)
    if spec.get("suspend") and st not in (*TERMINAL, SUSPENDED, SUSPENDING):
        step = Step(_with_state(current, SUSPENDING))
    elif st in _HANDLERS:
        step = _HANDLERS[st](_Ctx(name, spec, current, pod, now, submission_id))
    else:
        step = Step(current)
    return Step(canonical(step.status), submit=step.submit,
                delete_driver_pod=step.delete_driver_pod,
                delete_application=step.delete_application)


def canonical(status: dict[str, Any]) -> dict[str, Any]:
    """The status as upstream's Go types serialise it: empty strings and zero counts omitted
    (`omitempty`), cleared times as null, `driverInfo` and `applicationState.state` always."""
    out = copy.deepcopy(status)
    for key in ("sparkApplicationId", "submissionID", "executionAttempts", "submissionAttempts",
                "executorState"):
        if not out.get(key):
            out.pop(key, None)
    app_state = {"state": state(out)}
    error = (out.get("applicationState") or {}).get("errorMessage")
    if error:
        app_state["errorMessage"] = str(error)
    out["applicationState"] = app_state
    out["driverInfo"] = {k: v for k, v in (out.get("driverInfo") or {}).items() if v}
    return out


def after_submission(status: dict[str, Any], error: str | None) -> dict[str, Any]:
    """The result of creating the driver pod: SUBMITTED, or SUBMISSION_FAILED with the error."""
    out = canonical(status)
    if error is None:
        out["applicationState"] = {"state": SUBMITTED}
        out["executionAttempts"] = int(out.get("executionAttempts") or 0) + 1
    else:
        out["applicationState"] = {"state": SUBMISSION_FAILED, "errorMessage": error}
    return canonical(out)


def submission_error(reason: str) -> str:
    """The errorMessage upstream writes when spark-submit fails (its wrappers, verbatim)."""
    return f"failed to submit spark application: failed to run spark-submit: {reason}"


# spark-submit reports the driver pod's 409 Conflict; the operator says it like this.
DRIVER_POD_EXISTS = submission_error("driver pod already exist")


@dataclass(frozen=True)
class _Ctx:
    name: str
    spec: dict[str, Any]
    status: dict[str, Any]
    pod: DriverPod | None
    now: dt.datetime
    submission_id: str


def _with_state(status: dict[str, Any], new_state: str) -> dict[str, Any]:
    out = copy.deepcopy(status)
    out["applicationState"] = {**(out.get("applicationState") or {}), "state": new_state}
    return out


def _timestamp(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse(value: Any) -> dt.datetime | None:
    if not value:
        return None
    return dt.datetime.strptime(str(value), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)


def _submit(ctx: _Ctx) -> Step:
    out = copy.deepcopy(ctx.status)
    out["submissionID"] = ctx.submission_id
    out["driverInfo"] = {**out.get("driverInfo", {}),
                         "podName": intended_driver_pod_name(ctx.name, ctx.spec)}
    out["lastSubmissionAttemptTime"] = _timestamp(ctx.now)
    out["submissionAttempts"] = int(out.get("submissionAttempts") or 0) + 1
    return Step(out, submit=True)


def _restart_policy(spec: dict[str, Any]) -> dict[str, Any]:
    policy = dict(spec.get("restartPolicy") or {})
    policy.setdefault("type", "Never")
    if policy["type"] != "Never":
        policy.setdefault("onFailureRetryInterval", DEFAULT_RETRY_INTERVAL_SECONDS)
        policy.setdefault("onSubmissionFailureRetryInterval", DEFAULT_RETRY_INTERVAL_SECONDS)
    return policy


def should_retry(spec: dict[str, Any], status: dict[str, Any]) -> bool:
    policy = _restart_policy(spec)
    kind, st = policy["type"], state(status)
    if st == SUCCEEDING:
        return bool(kind == "Always")
    if st == FAILING:
        retries = policy.get("onFailureRetries")
        return kind == "Always" or (kind == "OnFailure" and retries is not None
                                    and int(status.get("executionAttempts") or 0) <= int(retries))
    if st == SUBMISSION_FAILED:
        retries = policy.get("onSubmissionFailureRetries")
        return kind == "Always" or (kind == "OnFailure" and retries is not None
                                    and int(status.get("submissionAttempts") or 0) <= int(retries))
    return False


def seconds_until_retry(spec: dict[str, Any], status: dict[str, Any],
                        now: dt.datetime) -> float | None:
    """Linear backoff: interval x submissionAttempts after the last submission; None if unknown."""
    policy = _restart_policy(spec)
    interval = policy.get("onSubmissionFailureRetryInterval" if state(status) == SUBMISSION_FAILED
                          else "onFailureRetryInterval")
    attempts = int(status.get("submissionAttempts") or 0)
    last = _parse(status.get("lastSubmissionAttemptTime"))
    if interval is None or last is None or attempts <= 0:
        return None
    return float(interval) * attempts - (now - last).total_seconds()


def _reset(status: dict[str, Any]) -> dict[str, Any]:
    """What a rerun, an invalidation or a suspension forgets (upstream resetSparkApplicationStatus)."""
    out = copy.deepcopy(status)
    st = state(out)
    if st not in (SUCCEEDING, FAILING, INVALIDATING, SUSPENDED):
        return out
    out["sparkApplicationId"] = ""
    out["applicationState"] = {**(out.get("applicationState") or {}), "errorMessage": ""}
    out["driverInfo"] = {}
    out.pop("executorState", None)
    if st != SUSPENDED:
        out["terminationTime"] = None
    if st == INVALIDATING:
        out["submissionAttempts"] = 0
        out["executionAttempts"] = 0
        out["lastSubmissionAttemptTime"] = None
    return out


def _update_driver_state(ctx: _Ctx) -> Step:
    out = copy.deepcopy(ctx.status)
    if not out["driverInfo"].get("podName"):
        return Step(out)  # upstream: an error, requeued; nothing to read yet
    pod, st = ctx.pod, state(out)
    if pod is None:
        last = _parse(out.get("lastSubmissionAttemptTime"))
        if st != SUBMITTED or last is None or ctx.now - last > DRIVER_POD_CREATION_GRACE:
            out["applicationState"] = {**out["applicationState"], "state": FAILING,
                                       "errorMessage": "driver pod not found"}
            out["terminationTime"] = _timestamp(ctx.now)
        return Step(out)
    out["sparkApplicationId"] = pod.app_id
    driver = _driver_state(pod)
    if driver in ("COMPLETED", "FAILED"):
        if not out.get("terminationTime"):
            out["terminationTime"] = _timestamp(ctx.now)
        if driver == "FAILED":
            app_state = out["applicationState"]
            if pod.exit_code is None:
                app_state["errorMessage"] = "driver container status missing"
            elif pod.exit_code != 0:
                app_state["errorMessage"] = (f"driver container failed with ExitCode: "
                                             f"{pod.exit_code}, Reason: {pod.reason}")
    out["applicationState"]["state"] = _APP_STATE_OF_DRIVER[driver]
    return Step(out)


def _driver_state(pod: DriverPod) -> str:
    if pod.phase == "Pending":
        return "PENDING"
    if pod.phase == "Running":
        if pod.exit_code is None:
            return "RUNNING"
        return "COMPLETED" if pod.exit_code == 0 else "FAILED"
    if pod.phase == "Succeeded":
        return "COMPLETED"
    if pod.phase == "Failed":
        return "COMPLETED" if pod.exit_code == 0 else "FAILED"
    return "UNKNOWN"


_APP_STATE_OF_DRIVER = {"PENDING": SUBMITTED, "RUNNING": RUNNING, "COMPLETED": SUCCEEDING,
                        "FAILED": FAILING, "UNKNOWN": UNKNOWN}


def _failed_submission(ctx: _Ctx) -> Step:
    if not should_retry(ctx.spec, ctx.status):
        out = _with_state(ctx.status, FAILED)
        out["terminationTime"] = _timestamp(ctx.now)
        return Step(out)
    wait = seconds_until_retry(ctx.spec, ctx.status, ctx.now)
    if wait is None or wait > 0:
        return Step(ctx.status)
    if ctx.pod is None:
        return _submit(ctx)
    return Step(ctx.status, delete_driver_pod=True)


def _pending_rerun(ctx: _Ctx) -> Step:
    return _submit(ctx) if ctx.pod is None else Step(ctx.status)


def _invalidating(ctx: _Ctx) -> Step:
    out = _with_state(_reset(ctx.status), PENDING_RERUN)
    return Step(out, delete_driver_pod=ctx.pod is not None)


def _succeeding(ctx: _Ctx) -> Step:
    if should_retry(ctx.spec, ctx.status):
        return Step(_with_state(_reset(ctx.status), PENDING_RERUN),
                    delete_driver_pod=ctx.pod is not None)
    return Step(_with_state(ctx.status, COMPLETED))


def _failing(ctx: _Ctx) -> Step:
    if not should_retry(ctx.spec, ctx.status):
        return Step(_with_state(ctx.status, FAILED))
    wait = seconds_until_retry(ctx.spec, ctx.status, ctx.now)
    if wait is None or wait > 0:
        return Step(ctx.status)
    return Step(_with_state(_reset(ctx.status), PENDING_RERUN),
                delete_driver_pod=ctx.pod is not None)


def _terminated(ctx: _Ctx) -> Step:
    ttl = ctx.spec.get("timeToLiveSeconds")
    ended = _parse(ctx.status.get("terminationTime"))
    if ttl is not None and ended is not None \
            and (ctx.now - ended).total_seconds() > float(ttl):
        return Step(ctx.status, delete_application=True)
    return Step(ctx.status)


def _suspending(ctx: _Ctx) -> Step:
    out = copy.deepcopy(ctx.status)
    out["applicationState"] = {"state": SUSPENDED}
    return Step(_reset(out), delete_driver_pod=ctx.pod is not None)


def _suspended(ctx: _Ctx) -> Step:
    if ctx.pod is not None:
        return Step(ctx.status)
    out = _reset(ctx.status)
    if not ctx.spec.get("suspend"):
        out["applicationState"] = {"state": RESUMING}
    return Step(out)


_HANDLERS = {
    NEW: _submit,
    SUBMITTED: _update_driver_state,
    RUNNING: _update_driver_state,
    UNKNOWN: _update_driver_state,
    SUBMISSION_FAILED: _failed_submission,
    PENDING_RERUN: _pending_rerun,
    INVALIDATING: _invalidating,
    SUCCEEDING: _succeeding,
    FAILING: _failing,
    COMPLETED: _terminated,
    FAILED: _terminated,
    SUSPENDING: _suspending,
    SUSPENDED: _suspended,
    RESUMING: _submit,
}
