"""A candidate beside the active revision (phases/candidate.py): built on a content change
only, its gate, superseded, torn down past its deadline or when it stalls, failed and
retried.

The planner, scenario by scenario, in the simulated world of tests/support/world; expected
revisions, names and times are written out by hand (revision hashes come from
tests/unit/core/test_revision.py's independently computed values).
"""

from __future__ import annotations

import datetime as dt
import json

import pytest

from derived_views.core import actions as A
from support.world.samples import I1, I2, I3, R1, R2, R3, SQL_V1, SQL_V2, SQL_V3, spec_body
from support.world.scenarios import (
    APP1,
    APP2,
    CKPT,
    effects,
    kinds,
)
from support.world.world import run_until, served_world


def test_content_change_builds_a_candidate_while_the_active_keeps_serving() -> None:
    world = served_world()
    world.edit(spec_body(SQL_V2))
    actions = world.reconcile()
    assert kinds(actions) == ["RecordIntent", "CreateSparkApplication", "UpdateStatus",
                              "PruneLedger", "EmitEvent"]
    create = actions[1]
    assert isinstance(create, A.CreateSparkApplication) and create.name == APP2
    config = json.loads(create.manifest["spec"]["arguments"][1])
    assert config["transform"] == {"sql": SQL_V2}
    assert config["sink"]["table"] == I2
    assert config["checkpointLocation"] == f"{CKPT}/{R2}"
    for _ in range(3):
        world.tick()
        world.reconcile()
        assert world.alias == I1
        assert APP1 in world.apps
    status = world.parsed_status()
    assert status.active is not None and status.active.revision == R1
    assert status.candidate is not None and status.candidate.revision == R2
    assert status.candidate.lag is not None and status.candidate.lag.messages > 0
    ready = status.condition("Ready")
    reconciling = status.condition("Reconciling")
    assert ready is not None and (ready.status, ready.reason) == ("False", "Backfilling")
    assert reconciling is not None and reconciling.reason == "Backfilling"
    assert f"lag {status.candidate.lag.messages} messages" in reconciling.message


@pytest.mark.parametrize("edit", [
    pytest.param({"spark": {"executor": {"instances": 4, "memory": "4g"}}}, id="spark resources"),
    pytest.param({"cutover": {"stableForSeconds": 30}}, id="cutover policy"),
    pytest.param({"deletionPolicy": "Delete"}, id="deletion policy"),
    pytest.param({"source": {"kafka": {"bootstrapServers": "kafka-2:9093"},
                             "topics": ["orders"], "format": "json",
                             "schema": "order_id STRING, customer_id STRING, amount DOUBLE"}},
                 id="bootstrap servers"),
])
def test_non_content_changes_never_start_a_replay(edit: dict[str, object]) -> None:
    world = served_world()
    world.edit(spec_body(SQL_V1, **edit))
    actions = world.reconcile()
    # job settings (spark, Kafka connection) restart the job from its checkpoint; policy
    # changes touch no job (deletionPolicy Delete holds the sink Secret for the cleanup);
    # nothing starts a new revision
    restart = "spark" in edit or "source" in edit
    hold = [A.HoldSecret("views-db")] if "deletionPolicy" in edit else []
    assert effects(actions) == ([A.DeleteSparkApplication(R1, APP1)] if restart else hold)
    status = world.parsed_status()
    assert status.observed_generation == 2
    assert [r.revision for r in status.revisions] == [R1]
    assert all(c.observed_generation == 2 for c in status.conditions)


def test_lag_above_the_gate_resets_caught_up_since() -> None:
    world = served_world()
    world.edit(spec_body(SQL_V2))
    run_until(world, lambda w: w.parsed_status().candidate is not None
              and w.parsed_status().candidate.caught_up_since is not None)
    first = world.parsed_status().candidate
    assert first is not None and first.caught_up_since == world.now
    world.ends[("orders", 0)] += 500  # a burst: the candidate falls behind
    world.rate = 0
    world.tick()
    world.reconcile()
    candidate = world.parsed_status().candidate
    assert candidate is not None
    assert candidate.caught_up_since is None and candidate.phase.value == "Backfilling"
    assert world.condition("CaughtUp") == ("False", "LagAboveGate")
    world.rate = 1000
    world.tick()
    world.reconcile()
    candidate = world.parsed_status().candidate
    assert candidate is not None and candidate.caught_up_since == world.now
    restarted = world.now
    switched = None
    for _ in range(4):
        world.tick()
        if any(isinstance(a, A.SwitchAlias) for a in world.reconcile()):
            switched = world.now
            break
    assert switched == restarted + dt.timedelta(seconds=10)


def test_max_lag_messages_passes_the_gate_behind_the_log_but_not_behind_the_serving_index(
) -> None:
    world = served_world()
    world.edit(spec_body(SQL_V2, cutover={"maxLagMessages": 30}))
    world.rate = 1000
    world.reconcile()
    world.tick()
    world.reconcile()
    world.tick()  # running, table created, positions 0
    # hydrated (every record of its start is in), then the log grows: 20 + 10 behind
    world.apps[APP2].position = {("orders", 0): 120, ("orders", 1): 80}
    world.ends.update({("orders", 0): 140, ("orders", 1): 90})
    world.rate = 0
    world.ledger[R2] = (dict(world.apps[APP2].position), world.now)
    world.apps[APP1].position = dict(world.ends)  # the serving index keeps up
    world.ledger[R1] = (dict(world.ends), world.now)
    world.reconcile()
    assert world.condition("CaughtUp") == ("True", "LagWithinGate")
    world.tick(seconds=10)
    world.reconcile()  # stable: the switch is tried and deferred (the serving index is ahead)
    assert world.alias == I1
    world.reconcile()
    assert world.condition("Reconciling") == ("True", "BehindActive")
    world.rate = 1000
    world.tick()  # the candidate commits up to the log's end
    world.reconcile()
    assert world.alias == I2


def test_a_newer_spec_supersedes_the_candidate() -> None:
    world = served_world(delete_lingers=True)
    world.edit(spec_body(SQL_V2))
    for _ in range(3):
        world.reconcile()
        world.tick()
    assert I2 in world.tables
    world.edit(spec_body(SQL_V3))
    actions = world.reconcile()
    assert A.DeleteSparkApplication(R2, APP2) in actions
    assert not any(isinstance(a, A.DropIndex) for a in actions)  # its job may still run
    assert any(isinstance(a, A.CreateSparkApplication) and a.revision == R3 for a in actions)
    assert ("Superseded" in world.event_reasons())
    assert world.phases()[R2] == "Superseded"
    world.tick()  # the job is gone now
    actions = world.reconcile()
    assert A.DropIndex("public", I2, R2) in actions
    assert world.alias == I1
    run_until(world, lambda w: w.alias == I3)
    assert world.violations == []


def test_returning_to_the_active_revision_tears_the_candidate_down() -> None:
    world = served_world()
    world.edit(spec_body(SQL_V2))
    for _ in range(3):
        world.reconcile()
        world.tick()
    world.edit(spec_body(SQL_V1))
    world.reconcile()
    world.reconcile()
    assert world.phases() == {R1: "Active", R2: "Superseded"}
    assert world.tables == {I1}
    assert world.condition("Ready") == ("True", "Serving")


def test_candidate_past_its_deadline_is_torn_down_and_the_active_keeps_serving() -> None:
    world = served_world()
    world.edit(spec_body(SQL_V2))
    world.reconcile()
    started = world.now
    world.rate = 0  # never catches up
    while world.now < started + dt.timedelta(seconds=595):
        world.tick(growth=1)
        world.reconcile()
        assert world.phases()[R2] != "Failed"
    world.tick()
    actions = world.reconcile()
    assert A.DeleteSparkApplication(R2, APP2) in actions
    assert A.EmitEvent("DeadlineExceeded", f"Aborted candidate revision {R2}: not promoted within "
                                           "600s of starting; torn down.", "Warning") in actions
    world.reconcile()
    assert world.tables == {I1} and world.alias == I1
    assert world.condition("Degraded") == ("True", "DeadlineExceeded")
    assert world.condition("Stalled") == ("True", "DeadlineExceeded")
    assert world.condition("Ready") == ("False", "DeadlineExceeded")
    for _ in range(5):  # no retry loop
        world.tick()
        assert effects(world.reconcile()) == []
    world.rate = 1000
    world.annotations["derivedviews.io/retry"] = "1"
    actions = world.reconcile()
    create = next(a for a in actions if isinstance(a, A.CreateSparkApplication))
    assert json.loads(create.manifest["spec"]["arguments"][1])["checkpointLocation"] == \
        f"{CKPT}/{R2}.1"
    run_until(world, lambda w: w.alias == I2)
    assert world.violations == []


def test_failed_candidate_job_degrades_without_a_retry_loop_until_asked() -> None:
    world = served_world()
    world.edit(spec_body(SQL_V2))
    for _ in range(3):
        world.reconcile()
        world.tick()
    assert world.fail_job(R2, "Job aborted: OutOfMemoryError")
    actions = world.reconcile()
    assert A.EmitEvent("JobFailed", f"Stopped waiting for revision {R2}: its job ended (FAILED): "
                                    "Job aborted: OutOfMemoryError", "Warning") in actions
    degraded = world.parsed_status().condition("Degraded")
    assert degraded is not None and degraded.status == "True" and degraded.reason == "JobFailed"
    assert "Job aborted: OutOfMemoryError" in degraded.message
    assert world.alias == I1
    for _ in range(5):
        world.tick()
        assert effects(world.reconcile()) == []
    assert APP2 in world.apps  # kept for inspection
    world.annotations["derivedviews.io/retry"] = "please"
    actions = world.reconcile()
    assert effects(actions) == [A.DeleteSparkApplication(R2, APP2)]
    actions = world.reconcile()
    create = next(a for a in actions if isinstance(a, A.CreateSparkApplication))
    config = json.loads(create.manifest["spec"]["arguments"][1])
    assert config["checkpointLocation"] == f"{CKPT}/{R2}"  # its index is kept: resume
    run_until(world, lambda w: w.alias == I2)
    assert world.violations == []


def test_a_spec_change_retries_a_failed_job_once() -> None:
    world = served_world()
    world.edit(spec_body(SQL_V2))
    for _ in range(3):
        world.reconcile()
        world.tick()
    world.fail_job(R2)
    world.reconcile()
    world.edit(spec_body(SQL_V2, spark={"driver": {"memory": "4g"}}))
    # the failed candidate is retried; the active's job restarts to take the new settings
    assert sorted(effects(world.reconcile()), key=repr) == [
        A.DeleteSparkApplication(R2, APP2), A.DeleteSparkApplication(R1, APP1)]
    actions = world.reconcile()
    create = next(a for a in actions if isinstance(a, A.CreateSparkApplication))
    assert create.manifest["spec"]["driver"]["memory"] == "4g"


def test_topics_of_each_revision_decide_its_lag() -> None:
    world = served_world()
    with_payments = spec_body(SQL_V2, source={"topics": ["orders", "payments"]})
    world.edit(with_payments)
    world.reconcile()
    status = world.parsed_status()
    assert status.candidate is not None and status.candidate.lag is not None
    assert status.candidate.lag.partitions == {"orders/0": 120, "orders/1": 80, "payments/0": 40}
    assert status.active is not None and status.active.lag is not None
    assert status.active.lag.partitions == {"orders/0": 0, "orders/1": 0}


def test_a_stalled_candidate_is_torn_down_on_progress_not_on_age() -> None:
    no_age_cap = {"maxLagMessages": 0, "stableForSeconds": 10, "deadlineSeconds": None,
                  "progressDeadlineSeconds": 120, "retainPreviousSeconds": 60}
    world = served_world()
    world.ends = {tp: end + 100_000 for tp, end in world.ends.items()}  # a big log
    world.edit(spec_body(SQL_V2, cutover=no_age_cap))
    world.rate = 100
    for _ in range(100):  # 500 s: far past the progress deadline, but committing all along
        world.reconcile()
        world.tick()
        assert world.phases()[R2] in ("Pending", "Backfilling")
    world.rate = 0  # the job hangs
    for _ in range(23):  # 115 s without a commit
        world.reconcile()
        world.tick()
        assert world.phases()[R2] == "Backfilling"
    world.tick()
    world.reconcile()
    assert world.phases()[R2] == "Failed"
    assert world.condition("Degraded") == ("True", "ProgressDeadlineExceeded")
    assert world.alias == I1 and world.condition("Ready")[0] == "False"  # type: ignore[index]
    world.reconcile()
    assert I2 not in world.tables
