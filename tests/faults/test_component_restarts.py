"""Kafka, PostgreSQL and the kube-apiserver restarted (state kept) during migrations of
one view.

Kafka and the API server going away must only delay a migration; PostgreSQL
going away fails the queries of readers while it is down (the database itself
is gone) but must not lose or double-count a record, nor strand the cutover.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from dvstack.services import restarts
from dvstack.settings import load
from dvstack.testing.waiting import wait_for
from support.e2e.views import ledger_rows
from support.faults.scenes import (
    BUILDING,
    OperatorProcess,
    ScenarioResult,
    Scene,
    delete_view,
)

# Kafka, PostgreSQL and the API server go down under every other test's feet
pytestmark = pytest.mark.exclusive

OUTAGE_SECONDS = 3.0


def _mid_replay(scene: Scene, dsn: str) -> str:
    """Start the next migration and wait until its candidate is replaying; return it."""
    _, new = scene.views.start_next()
    wait_for(lambda: ledger_rows(dsn, new) >= 1, timeout=900, interval=0.2,
             what="a committed batch of the candidate")
    assert scene.views.phase(new) in BUILDING
    return new


def test_kafka_the_api_server_and_postgres_restarted_mid_migration_lose_nothing(
        stack: Any, kube_api_client: Any, namespace: str, operator: OperatorProcess,
        results: Path) -> None:
    """One view through four migrations, one outage each (one Spark start for the view,
    one per candidate): Kafka and the API server mid-replay must only delay it; PostgreSQL
    mid-replay and mid-cutover fails readers while it is down, and nothing else."""
    scene = Scene.start(stack, kube_api_client, namespace, seed=91)
    settings = load()
    try:
        new = _mid_replay(scene, stack.pg_dsn)
        restarted = time.monotonic()
        kafka_took = restarts.restart(settings, "kafka", down_seconds=OUTAGE_SECONDS)
        kafka_ready = scene.views.wait_serving(new)

        new = _mid_replay(scene, stack.pg_dsn)
        api_restarted = time.monotonic()
        api_took = restarts.restart(settings, "apiserver", down_seconds=OUTAGE_SECONDS)
        api_ready = scene.views.wait_serving(new)
        before_postgres = list(scene.reader.errors)

        new = _mid_replay(scene, stack.pg_dsn)
        pg_restarted = time.monotonic()
        pg_took = restarts.restart(settings, "postgres", down_seconds=OUTAGE_SECONDS)
        replay_ready = scene.views.wait_serving(new)
        replay_errors = len(scene.reader.errors) - len(before_postgres)

        # mid-cutover: the operator holds between its recorded intent and the switch (its
        # failpoint) while the database restarts under it, then goes on
        old, new = scene.views.start_next()
        operator.arm_switch_hold()
        wait_for(operator.switch_held, timeout=900, interval=0.1,
                 what="the operator to hold between intent and switch")
        cutover_restarted = time.monotonic()
        restarts.restart(settings, "postgres", down_seconds=OUTAGE_SECONDS)
        operator.release_switch()
        cutover_ready = scene.views.wait_serving(new)
        wait_for(lambda: scene.views.phase(old) == "Retired", timeout=300, interval=0.5,
                 what=f"revision {old} to be retired")
        converged, lost, duplicated = scene.finish()
    finally:
        scene.stop_traffic()
    cutover_errors = len(scene.reader.errors) - len(before_postgres) - replay_errors
    ScenarioResult("Kafka broker restart mid-replay", 1, int(converged),
                   [round(kafka_ready - restarted, 1)], lost, duplicated, len(before_postgres),
                   note=f"broker down {kafka_took:.0f} s").write(results)
    ScenarioResult("kube-apiserver restart mid-migration", 1, int(converged),
                   [round(api_ready - api_restarted, 1)], lost, duplicated, len(before_postgres),
                   note=f"API server down {api_took:.0f} s").write(results)
    ScenarioResult("PostgreSQL restart mid-replay", 1, int(converged),
                   [round(replay_ready - pg_restarted, 1)], lost, duplicated, replay_errors,
                   reader_errors_expected=True,
                   note=f"database down {pg_took:.0f} s").write(results)
    ScenarioResult("PostgreSQL restart mid-cutover", 1, int(converged),
                   [round(cutover_ready - cutover_restarted, 1)], lost, duplicated,
                   cutover_errors, reader_errors_expected=True).write(results)
    assert converged and (lost, duplicated) == (0, 0), (lost, duplicated)
    assert before_postgres == [], before_postgres[:3]
    delete_view(scene.custom, scene.views.handle)
