"""The Spark driver SIGKILLed mid-replay, and between a batch's COPY and its commit; then
ten spec edits within five seconds on the same view.

The restarted driver resumes from its checkpoint (its batch ids carry on); a batch whose
transaction died before COMMIT left nothing (ledger row included) and is written again,
once. The edits build only the newest revision (spec_edits). One scene serves the three:
each scene of its own cost a topic, a first replay and a convergence (the edits had a file
of their own, 401 s beside the other files on the 2-core machine).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from dvstack.testing.waiting import wait_for
from support.e2e.views import ledger_batch_ids, ledger_rows, newest_batch
from support.faults.scenes import (
    BUILDING,
    JobHold,
    OperatorProcess,
    ScenarioResult,
    Scene,
    delete_view,
    kill_driver,
)
from support.faults.spec_edits import check, edit_ten_times


def test_a_driver_killed_mid_replay_and_mid_batch_then_ten_edits_lose_nothing(
        stack: Any, kube_api_client: Any, namespace: str, operator: OperatorProcess,
        results: Path, tmp_path: Path) -> None:
    hold = JobHold(tmp_path)
    scene = Scene.start(stack, kube_api_client, namespace, seed=81, spark_conf=hold.conf())
    views = scene.views
    try:
        # mid-replay: the candidate has committed batches and is behind
        _, replaying = views.start_next()
        wait_for(lambda: ledger_rows(stack.pg_dsn, replaying) >= 1, timeout=900,
                 interval=0.2, what="a committed batch of the candidate")
        assert views.phase(replaying) in BUILDING
        before_kill = ledger_batch_ids(stack.pg_dsn, replaying)
        kill_driver(scene.core, scene.custom, scene.namespace, scene.app_of(replaying))
        killed_mid_replay = time.monotonic()
        replay_ready = views.wait_serving(replaying)
        # resumed from its checkpoint: the batch sequence carries on (a fresh checkpoint
        # would start at batch 0 again, and the ledger would refuse it)
        after_kill = sorted(set(ledger_batch_ids(stack.pg_dsn, replaying)) - set(before_kill))
        assert after_kill and min(after_kill) > max(before_kill), (before_kill, after_kill)

        # mid-batch: the candidate's driver holds after COPY, upsert and ledger row, before
        # COMMIT (the job's failpoint), and dies there
        _, batching = views.start_next()
        hold.arm(batching)
        wait_for(hold.held, timeout=900, interval=0.1,
                 what="the candidate's driver to hold between COPY and commit")
        held_after = newest_batch(stack.pg_dsn, batching)  # the held batch is not committed
        kill_driver(scene.core, scene.custom, scene.namespace, scene.app_of(batching))
        killed_mid_batch = time.monotonic()
        batch_ready = views.wait_serving(batching)
        assert newest_batch(stack.pg_dsn, batching) > held_after

        # ten edits within five seconds: only the newest is built, and it serves
        burst = edit_ten_times(scene)
        converged, lost, duplicated = scene.finish()
    finally:
        scene.stop_traffic()
    errors = len(scene.reader.errors)
    ScenarioResult("Spark driver SIGKILL mid-replay", 1, int(converged),
                   [round(replay_ready - killed_mid_replay, 1)], lost, duplicated,
                   errors).write(results)
    ScenarioResult("Spark driver SIGKILL between COPY and commit", 1, int(converged),
                   [round(batch_ready - killed_mid_batch, 1)], lost, duplicated,
                   errors).write(results)
    ScenarioResult("10 spec edits within 5 s", 1, int(converged), [round(burst.built, 1)],
                   lost, duplicated, errors, note=burst.note()).write(results)
    check(burst)
    assert converged and (lost, duplicated) == (0, 0), (lost, duplicated)
    assert scene.reader.errors == [], scene.reader.errors[:3]
    delete_view(scene.custom, views.handle)
