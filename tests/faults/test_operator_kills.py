"""The operator SIGKILLed in each phase of a migration, two migrations long, and in the
last of them also replaced by a new process (an upgrade) mid-replay, just before that
migration's Backfilling kill: one view, two migrations (the upgrade had a migration of its
own; sharing the last saves a replay and a Spark start and loses neither fault). Two, not
three: each kill still lands twice, on a fresh candidate and on one whose predecessor was
itself migrated under kills, and the file was the suite's longest (944 s of 2,607 s).

A restarted operator must replan from a fresh observation: the candidate keeps
its job and checkpoint, a recorded intent is carried out once, a retiring index
is still dropped.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from dvstack.testing.waiting import wait_for
from support.e2e.views import ledger_rows
from support.faults.scenes import (
    BUILDING,
    OperatorProcess,
    ScenarioResult,
    Scene,
    delete_view,
)

MIGRATIONS = 2
PHASES = ("Pending", "Backfilling", "between intent and switch", "Retiring")


def test_the_operator_killed_in_every_phase_twice_and_replaced_loses_nothing(
        stack: Any, kube_api_client: Any, namespace: str, operator: OperatorProcess,
        results: Path) -> None:
    scene = Scene.start(stack, kube_api_client, namespace, seed=61)
    views, handle = scene.views, scene.views.handle
    kills: dict[str, list[float]] = {p: [] for p in PHASES}
    seconds: dict[str, list[float]] = {p: [] for p in PHASES}
    seen_phases: list[str] = []
    replaced = replaced_ready = 0.0
    try:
        for migration in range(MIGRATIONS):
            old, new = views.start_next()
            # Pending: the candidate is recorded, its job not yet running
            seen_phases.append(views.wait_phase(new, BUILDING, timeout=300))
            operator.kill_and_restart()
            kills["Pending"].append(time.monotonic())
            # Backfilling: batches of the candidate are committed, it is behind
            wait_for(lambda new=new: ledger_rows(stack.pg_dsn, new) >= 1, timeout=900,
                     interval=0.2, what="a committed batch of the candidate")
            seen_phases.append(views.wait_phase(new, BUILDING))
            if migration == MIGRATIONS - 1:
                # the upgrade, mid-replay: the process that has passed over the candidate
                # is replaced (SIGTERM, as a rolling update stops the old pod) by the new
                # version's; that one is then SIGKILLed in Backfilling like the others
                operator.stop()
                operator.start()
                replaced = time.monotonic()
            operator.kill_and_restart()
            kills["Backfilling"].append(time.monotonic())
            # between the recorded intent and the alias switch (the operator's failpoint)
            operator.arm_switch_hold()
            wait_for(operator.switch_held, timeout=900, interval=0.1,
                     what="the operator to hold between intent and switch")
            intent = handle.status().get("intent") or {}
            assert intent.get("cutoverTo") == new, intent
            assert handle.active() == old  # the switch has not happened
            operator.kill_and_restart()
            kills["between intent and switch"].append(time.monotonic())
            ready = views.wait_serving(new)
            replaced_ready = ready if migration == MIGRATIONS - 1 else replaced_ready
            for phase in PHASES[:3]:
                seconds[phase].append(round(ready - kills[phase][-1], 1))
            # Retiring: the previous revision waits for its retention to end
            assert views.phase(old) == "Retiring", handle.phases()
            operator.kill_and_restart()
            kills["Retiring"].append(time.monotonic())
            wait_for(lambda old=old: views.phase(old) == "Retired", timeout=300, interval=0.2,
                     what=f"revision {old} to be retired after the kill")
            seconds["Retiring"].append(round(time.monotonic() - kills["Retiring"][-1], 1))
        converged, lost, duplicated = scene.finish()
    finally:
        scene.stop_traffic()
    for phase in PHASES:
        ScenarioResult(
            f"operator SIGKILL {'in ' if phase[0].isupper() else ''}{phase}", len(kills[phase]),
            len(kills[phase]) if converged else 0, seconds[phase], lost, duplicated,
            len(scene.reader.errors),
            note=(f"phases seen at the kills: {', '.join(sorted(set(seen_phases[0::2])))}"
                  if phase == "Pending" else "")).write(results)
    ScenarioResult("operator replaced (upgrade) mid-migration", 1, int(converged),
                   [round(replaced_ready - replaced, 1)], lost, duplicated,
                   len(scene.reader.errors)).write(results)
    assert converged and (lost, duplicated) == (0, 0), (lost, duplicated)
    assert scene.reader.errors == [], scene.reader.errors[:3]
    assert scene.reader.queries > 100
    assert all(len(k) == MIGRATIONS for k in kills.values())
    delete_view(scene.custom, handle)

