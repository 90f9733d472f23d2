"""The planner and the jobs' real states: causes from the driver pod, blocked and suspended
jobs, states that are neither running nor failed, and recreating a job safely.

Scenarios in core_world; driver pods are what the kubelet would report on a cluster.
"""

from __future__ import annotations

import pytest

from derived_views.core import actions as A
from support.world.samples import SQL_V1, SQL_V2, spec_body
from support.world.world import World, driver_pod

R1, R2 = "71250ff800", "5d31ce3608"
I1, I2 = (f"orders_by_customer__{r}" for r in (R1, R2))
APP1, APP2 = (f"orders-by-customer-{r}" for r in (R1, R2))
POD1, POD2 = (f"{a}-driver" for a in (APP1, APP2))
EXIT_MESSAGE = "driver container failed with ExitCode: 1, Reason: Error"
CAUSE = "batch 18: a row has NULL in primary-key column 'account_id'; fix the transform"
SECRET = 'secret "views-db" not found'


def effects(actions: list[A.Action]) -> list[A.Action]:
    return [a for a in actions if isinstance(a, A.EFFECTS)]


def events(actions: list[A.Action]) -> list[A.EmitEvent]:
    return [a for a in actions if isinstance(a, A.EmitEvent)]


def served_world() -> World:
    world = World(spec_body(SQL_V1))
    world.settle(ticks=8)
    assert world.alias == I1
    return world


def condition(world: World, type_: str) -> tuple[str, str, str]:
    c = world.parsed_status().condition(type_)
    assert c is not None
    return c.status, c.reason, c.message


def building_candidate(world: World, ticks: int = 3) -> None:
    world.edit(spec_body(SQL_V2))
    for _ in range(ticks):
        world.reconcile()
        world.tick()
    assert APP2 in world.apps


# Causes ----------------------------------------------------------------------------------------


def test_a_failed_candidate_says_the_jobs_own_cause_from_the_driver_pod() -> None:
    world = served_world()
    building_candidate(world)
    assert world.fail_job(R2, EXIT_MESSAGE)
    world.pods[POD2] = driver_pod(POD2, "Failed", terminated=(1, "Error", CAUSE))
    actions = world.reconcile()
    assert A.EmitEvent("JobFailed", f"Stopped waiting for revision {R2}: its job ended (FAILED): "
                                    f"{CAUSE}", "Warning") in actions
    record = world.parsed_status().record(R2)
    assert record is not None and record.message == CAUSE
    status, reason, message = condition(world, "Degraded")
    assert (status, reason) == ("True", "JobFailed")
    assert CAUSE in message and EXIT_MESSAGE not in message
    assert world.alias == I1


def test_a_failed_active_job_says_the_cause_of_its_last_attempt() -> None:
    world = served_world()
    assert world.fail_job(R1, EXIT_MESSAGE)
    world.pods[POD1] = driver_pod(POD1, "Failed", terminated=(1, "Error", CAUSE), last=True)
    actions = world.reconcile()
    assert [e.reason for e in events(actions)] == ["JobFailed"]
    assert CAUSE in events(actions)[0].message
    assert condition(world, "Degraded")[:2] == ("True", "JobFailed")
    assert CAUSE in condition(world, "Ready")[2]


def test_without_a_driver_pod_the_error_message_is_the_cause() -> None:
    world = served_world()
    building_candidate(world)
    assert world.fail_job(R2, EXIT_MESSAGE)
    world.reconcile()
    record = world.parsed_status().record(R2)
    assert record is not None and record.message == EXIT_MESSAGE


# A driver that cannot start --------------------------------------------------------------------


def block(world: World, app: str, waiting: tuple[str, str]) -> None:
    """The Spark Operator submitted `app`; the kubelet cannot create its driver container."""
    world.apps[app].state = "SUBMITTED"
    world.pods[f"{app}-driver"] = driver_pod(f"{app}-driver", "Pending", waiting=waiting)


def unblock(world: World, app: str) -> None:
    world.pods[f"{app}-driver"] = driver_pod(f"{app}-driver", "Running")


def test_a_first_revision_whose_secret_is_missing_is_degraded_in_one_pass_and_not_torn_down(
        ) -> None:
    world = World(spec_body(SQL_V1))
    world.reconcile()
    block(world, APP1, ("CreateContainerConfigError", SECRET))
    actions = world.reconcile()
    assert effects(actions) == []
    for type_ in ("Degraded", "Stalled"):
        status, reason, message = condition(world, type_)
        assert (status, reason) == ("True", "SecretMissing")
        assert message == (f"revision {R1}: driver pod {POD1} cannot start "
                           f"(CreateContainerConfigError: {SECRET}); it starts once that is fixed")
    status, reason, message = condition(world, "Ready")
    assert (status, reason) == ("False", "SecretMissing") and SECRET in message
    assert [(e.reason, e.type) for e in events(actions)] == [("DriverPending", "Warning")]
    assert SECRET in events(actions)[0].message and R1 in events(actions)[0].message

    # Nothing repeats while it waits; nothing is deleted.
    for _ in range(5):
        world.tick()
        world.apps[APP1].state = "SUBMITTED"  # the kubelet keeps it pending
        actions = world.reconcile()
        assert effects(actions) == [] and events(actions) == []
    assert APP1 in world.apps

    # The Secret appears: the kubelet starts the driver, the conditions clear.
    unblock(world, APP1)
    world.apps[APP1].state = "RUNNING"
    world.start_job(world.apps[APP1])
    world.reconcile()
    assert condition(world, "Degraded")[:2] == ("False", "AsExpected")
    assert condition(world, "Ready")[:2] == ("False", "Backfilling")
    world.settle(ticks=8)
    assert world.alias == I1
    assert condition(world, "Ready")[:2] == ("True", "Serving")


def test_a_changed_kubelet_message_is_announced_again() -> None:
    world = World(spec_body(SQL_V1))
    world.reconcile()
    block(world, APP1, ("CreateContainerConfigError", SECRET))
    assert len(events(world.reconcile())) == 1
    block(world, APP1, ("CreateContainerConfigError",
                        "couldn't find key password in Secret shop/views-db"))
    actions = events(world.reconcile())
    assert len(actions) == 1 and "couldn't find key password" in actions[0].message


def test_a_candidate_that_cannot_pull_its_image_degrades_while_the_active_serves() -> None:
    world = served_world()
    world.edit(spec_body(SQL_V2))
    world.reconcile()
    world.tick()
    block(world, APP2, ("ImagePullBackOff", 'Back-off pulling image "dv-job:9"'))
    actions = world.reconcile()
    assert effects(actions) == []
    assert condition(world, "Degraded")[:2] == ("True", "ImagePullFailed")
    assert condition(world, "Ready")[:2] == ("False", "Backfilling")  # a migration is under way
    assert world.alias == I1


def test_the_served_revisions_blocked_job_keeps_ready_and_says_degraded() -> None:
    world = served_world()
    world.apps[APP1].state = "SUBMITTED"  # e.g. restarted after its Secret was deleted
    world.pods[POD1] = driver_pod(POD1, "Pending", waiting=("CreateContainerConfigError", SECRET))
    actions = world.reconcile()
    assert effects(actions) == []
    assert condition(world, "Degraded")[:2] == ("True", "SecretMissing")
    assert condition(world, "Ready")[:2] == ("True", "Serving")


def test_a_job_someone_suspended_is_named_in_degraded() -> None:
    world = served_world()
    world.apps[APP1].state = "SUSPENDED"
    actions = world.reconcile()
    assert effects(actions) == []
    status, reason, message = condition(world, "Degraded")
    assert (status, reason) == ("True", "JobSuspended")
    assert APP1 in message and "spec.suspend" in message
    assert [e.reason for e in events(actions)] == ["JobSuspended"]


# States that are neither running nor failed ------------------------------------------------------


@pytest.mark.parametrize("state", ["FAILING", "SUCCEEDING", "UNKNOWN", "PENDING_RERUN",
                                   "INVALIDATING", "RESUMING", "SUBMITTED", "", "HIBERNATING"])
def test_transitional_and_unknown_states_are_waited_out(state: str) -> None:
    world = served_world()
    building_candidate(world)
    world.apps[APP2].state = state
    for _ in range(3):
        actions = world.reconcile()
        assert effects(actions) == []
        world.tick()
        world.apps[APP2].state = state
    record = world.parsed_status().record(R2)
    assert record is not None and record.phase.value in ("Pending", "Backfilling")
    assert record.job_state == (state or None)
    assert condition(world, "Degraded")[:2] == ("False", "AsExpected")


def test_a_failed_submission_the_spark_operator_retries_is_not_a_failure() -> None:
    world = served_world()
    building_candidate(world)
    app = world.apps[APP2]
    app.obj["spec"]["restartPolicy"] = {"type": "Always", "onSubmissionFailureRetryInterval": 5}
    app.state, app.error = "SUBMISSION_FAILED", "failed to run spark-submit: boom"
    world.reconcile()
    assert world.phases()[R2] != "Failed"
    app.obj["spec"]["restartPolicy"] = {"type": "Never"}
    world.reconcile()
    assert world.phases()[R2] == "Failed"


# Recreating safely ---------------------------------------------------------------------------


def test_no_job_is_created_while_a_driver_pod_of_the_same_name_exists() -> None:
    world = served_world()
    building_candidate(world)
    assert world.fail_job(R2, EXIT_MESSAGE)
    world.pods[POD2] = driver_pod(POD2, "Failed", terminated=(1, "Error", CAUSE))
    world.reconcile()
    world.annotations["derivedviews.io/retry"] = "again"
    assert effects(world.reconcile()) == [A.DeleteSparkApplication(R2, APP2)]
    # Foreground deletion: the app stays while its driver pod goes.
    assert world.apps[APP2].deleting
    assert effects(world.reconcile()) == []
    # Someone removed the app without waiting; its driver pod is still terminating.
    del world.apps[APP2]
    world.pods[POD2]["metadata"]["deletionTimestamp"] = "2026-03-01T12:00:00Z"
    for _ in range(3):
        assert effects(world.reconcile()) == []
    world.tick()  # the kubelet removed the pod
    assert POD2 not in world.pods
    creates = [a for a in world.reconcile() if isinstance(a, A.CreateSparkApplication)]
    assert [(c.revision, c.name) for c in creates] == [(R2, APP2)]


def test_a_lingering_driver_pod_also_holds_back_the_first_job() -> None:
    world = World(spec_body(SQL_V1))
    world.pods[POD1] = driver_pod(POD1, "Succeeded", terminated=(0, "Completed", ""))
    actions = world.reconcile()
    assert not [a for a in actions if isinstance(a, A.CreateSparkApplication)]
    del world.pods[POD1]
    actions = world.reconcile()
    assert [a.name for a in actions if isinstance(a, A.CreateSparkApplication)] == [APP1]
