"""A SparkApplication replaying an orders topic, as test_first_replay drives one on each
runtime (the stand-in, the real Spark Operator): the test's own recomputation and the wait
until the job's ledger reaches the topic's end."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest
from kubernetes import client

from dvstack.testing import replay
from dvstack.testing.waiting import wait_for


def orders_by_customer(events: list[dict[str, Any]]) -> dict[str, tuple[int, float]]:
    """customer -> (orders, revenue), summed here in event order, not by Spark."""
    counts: dict[str, int] = defaultdict(int)
    sums: dict[str, float] = defaultdict(float)
    for e in events:
        counts[e["customer_id"]] += 1
        sums[e["customer_id"]] += e["amount"]
    return {c: (counts[c], sums[c]) for c in counts}


def app_status(custom: client.CustomObjectsApi, namespace: str, name: str) -> dict[str, Any]:
    obj = custom.get_namespaced_custom_object("sparkoperator.k8s.io", "v1beta2", namespace,
                                              "sparkapplications", name)
    return dict(obj.get("status") or {})


def wait_caught_up(custom: client.CustomObjectsApi, namespace: str, name: str, *, dsn: str,
                   revision: str, topic: str, ends: dict[int, int]) -> None:
    """Until the ledger's committed offsets equal `ends`; fails at once if the application
    ends (a replay job keeps running)."""
    def caught_up() -> bool:
        status = app_status(custom, namespace, name)
        state = (status.get("applicationState") or {}).get("state")
        if state in ("FAILED", "SUBMISSION_FAILED", "COMPLETED"):
            pytest.fail(f"SparkApplication ended early: {state}: "
                        f"{status['applicationState'].get('errorMessage')}")
        return replay.ledger_end_offsets(dsn, revision, topic) == ends

    wait_for(caught_up, timeout=900, interval=1.0,
             what="ledger offsets to equal the topic's end offsets")
