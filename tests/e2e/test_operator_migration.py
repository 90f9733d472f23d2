"""The operator as a user runs it: apply v1 -> serves; change SQL -> v2 replays, cuts over; delete.

The operator runs as its own process (`derived-views-operator -A`) against the
local API server, Kafka, PostgreSQL and the stand-in Spark executor.  A reader
queries the alias in a loop through the cutover and must see no error.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from dvstack import replay
from dvstack.cli import apply_crds
from dvstack.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
G, V, P = "derivedviews.io", "v1alpha1", "derivedviews"
SQL_V2 = ("SELECT customer_id, count(*) AS orders, sum(amount) AS revenue, max(amount) AS biggest "
          "FROM events GROUP BY customer_id")


@pytest.fixture()
def operator_process(stack: Any, kube_api_client: Any, tmp_path: Path) -> Iterator[None]:
    apply_crds(kube_api_client, [REPO / "crds" / "derivedviews.io_derivedviews.yaml"])
    log = open(Path(stack.logs_dir) / "operator-e2e.log", "ab")  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "-m", "derived_views.main", "-A"], stdout=log, stderr=subprocess.STDOUT,
        env={**os.environ, "KUBECONFIG": stack.kubeconfig, "DV_LAG_POLL_SECONDS": "1",
             "DV_CHECKPOINT_BASE": str(tmp_path / "checkpoints")})
    yield
    proc.terminate()
    proc.wait(timeout=30)
    log.close()


def _aggregate(events: list[dict[str, Any]]) -> dict[str, tuple[int, float, float]]:
    counts: dict[str, int] = defaultdict(int)
    sums: dict[str, float] = defaultdict(float)
    maxes: dict[str, float] = defaultdict(float)
    for e in events:
        c = e["customer_id"]
        counts[c] += 1
        sums[c] += e["amount"]
        maxes[c] = max(maxes[c], e["amount"])
    return {c: (counts[c], sums[c], maxes[c]) for c in counts}


def test_apply_migrate_cut_over_and_delete(stack: Any, kube_api_client: Any, namespace: str,
                                           operator_process: None) -> None:
    core, custom = client.CoreV1Api(kube_api_client), client.CustomObjectsApi(kube_api_client)
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    table = f"obc_{uuid.uuid4().hex[:8]}"
    replay.create_topic(stack.kafka_bootstrap, topic, 3)
    events = replay.make_orders(30_000, seed=11)
    replay.produce(stack.kafka_bootstrap, topic, events)
    replay.ensure_namespace_and_sink_secret(core, namespace, "views-db", stack.pg)
    view = {"apiVersion": f"{G}/{V}", "kind": "DerivedView",
            "metadata": {"name": "orders", "namespace": namespace},
            "spec": {"source": {"kafka": {"bootstrapServers": stack.kafka_bootstrap},
                                "topics": [topic], "schema": replay.ORDER_SCHEMA},
                     "transform": {"sql": replay.ORDERS_BY_CUSTOMER_SQL},
                     "sink": {"postgres": {"secretRef": {"name": "views-db"}, "table": table},
                              "primaryKey": ["customer_id"]},
                     "cutover": {"stableForSeconds": 2, "retainPreviousSeconds": 5},
                     "deletionPolicy": "Delete"}}
    custom.create_namespaced_custom_object(G, V, namespace, P, view)

    def status() -> dict[str, Any]:
        return dict(custom.get_namespaced_custom_object(G, V, namespace, P, "orders").get("status") or {})

    def ready() -> bool:
        return any(c["type"] == "Ready" and c["status"] == "True" for c in status().get("conditions", []))

    wait_for(ready, timeout=300, interval=1, what="v1 to become Ready")
    v1 = status()["active"]["revision"]
    expected = _aggregate(events)
    with psycopg.connect(stack.pg_dsn) as conn:
        rows = conn.execute(f'SELECT customer_id, orders, revenue FROM "{table}"').fetchall()
    assert {r[0]: (r[1], r[2]) for r in rows} == {c: v[:2] for c, v in expected.items()}

    errors: list[str] = []
    worst = [0.0]
    stop = threading.Event()

    def reader() -> None:
        with psycopg.connect(stack.pg_dsn, autocommit=True) as rc:
            while not stop.is_set():
                t = time.perf_counter()
                try:
                    rc.execute(f'SELECT count(*) FROM "{table}"').fetchone()
                except psycopg.Error as exc:
                    errors.append(repr(exc))
                worst[0] = max(worst[0], time.perf_counter() - t)

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        custom.patch_namespaced_custom_object(G, V, namespace, P, "orders",
                                              {"spec": {"transform": {"sql": SQL_V2}}})
        wait_for(lambda: status().get("active", {}).get("revision") not in (None, v1) and ready(),
                 timeout=300, interval=1, what="v2 to replay and take over")
    finally:
        stop.set()
        thread.join(timeout=30)
    assert errors == []
    with psycopg.connect(stack.pg_dsn) as conn:
        rows = conn.execute(f'SELECT customer_id, orders, revenue, biggest FROM "{table}"').fetchall()
    assert {r[0]: (r[1], r[2], r[3]) for r in rows} == expected
    revisions = {r["revision"]: r["phase"] for r in status()["revisions"]}
    assert revisions[v1] in ("Retiring", "Retired")
    wait_for(lambda: {r["revision"]: r["phase"] for r in status()["revisions"]}.get(v1) == "Retired",
             timeout=60, interval=1, what="v1's index to be dropped after its retain window")
    results = Path(stack.state_dir) / "results"
    results.mkdir(exist_ok=True)
    (results / "operator_migration.json").write_text(json.dumps(
        {"reader_worst_stall_ms": round(worst[0] * 1000, 1)}))

    custom.delete_namespaced_custom_object(G, V, namespace, P, "orders")

    def gone() -> bool:
        try:
            custom.get_namespaced_custom_object(G, V, namespace, P, "orders")
        except ApiException as exc:
            return exc.status == 404
        return False

    wait_for(gone, timeout=120, interval=1, what="the view to be deleted (finalizer removed)")
    with psycopg.connect(stack.pg_dsn) as conn:
        left = conn.execute("SELECT count(*) FROM pg_class WHERE relname LIKE %s",
                            (f"{table}%",)).fetchone()
    assert left == (0,)  # deletionPolicy Delete dropped the alias and every index
