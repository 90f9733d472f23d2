"""Every hostile cutover check of the corpus is refused by the running operator, never run.

The operator runs as its own process against the local stack. One view per hostile
check of tests/hostile_checks.py is applied at once, each paused (so no job starts:
the refusal is the planner's, made from the spec before any check could be due) with a
valid transform and that check as its only assertion. Each must end Stalled with reason
PolicyViolation and the corpus's words, as judged by PostgreSQL's own parser; no
SparkApplication may exist, and the sink database must hold nothing the checks tried to
create. What the server itself would do with each text is the integration test's part
(tests/integration/adapters/test_postgres_check_protocol.py).
"""

from __future__ import annotations

import re
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
from kubernetes import client

from derived_views.api.constants import PAUSED_ANNOTATION
from dvstack.testing import replay
from dvstack.testing.waiting import wait_for
from support.corpora.hostile_checks import HOSTILE, Hostile
from support.corpora.hostile_transforms import SCHEMA
from support.e2e.views import G, P, V, ViewHandle

SQL = "SELECT order_id, amount FROM events"


def body(name: str, check_sql: str, bootstrap: str, topic: str) -> dict[str, Any]:
    return {"apiVersion": f"{G}/{V}", "kind": "DerivedView",
            "metadata": {"name": name, "annotations": {PAUSED_ANNOTATION: "true"}},
            "spec": {"source": {"kafka": {"bootstrapServers": bootstrap},
                                "topics": [topic], "schema": SCHEMA},
                     "transform": {"sql": SQL},
                     "sink": {"postgres": {"secretRef": {"name": "views-db"},
                                           "table": f"chk_{uuid.uuid4().hex[:10]}"},
                              "primaryKey": ["order_id"]},
                     "cutover": {"checks": {"assertions": [
                         {"name": "hostile", "sql": check_sql}]}}}}


CREATED = re.compile(r"(?:CREATE\s+(?:TEMP\s+|UNLOGGED\s+)?TABLE|INTO)\s+([a-z_]+)\b", re.I)


def _tables(dsn: str, names: set[str]) -> set[str]:
    """Which of `names` (tables the corpus tries to create) exist in the sink database."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT tablename FROM pg_tables WHERE tablename = ANY(%s)",
                            (sorted(names),)).fetchall()
    return {str(r[0]) for r in rows}


def test_every_hostile_check_stalls_its_view_without_running(
        stack: Any, kube_api_client: Any, namespace: str, operator_process: Path) -> None:
    core, custom = client.CoreV1Api(kube_api_client), client.CustomObjectsApi(kube_api_client)
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    replay.create_topic(stack.kafka_bootstrap, topic, 1)
    replay.ensure_namespace_and_sink_secret(core, namespace, "views-db", stack.pg)
    tried = {m.group(1).lower() for h in HOSTILE for m in CREATED.finditer(h.sql)}
    assert tried, "the corpus tries to create tables"
    tables_before = _tables(stack.pg_dsn, tried)

    applied: dict[str, tuple[Hostile, float]] = {}
    for i, hostile in enumerate(HOSTILE):
        name = f"check-{i}"
        custom.create_namespaced_custom_object(
            G, V, namespace, P, body(name, hostile.sql, stack.kafka_bootstrap, topic))
        applied[name] = (hostile, time.monotonic())
    handles = {name: ViewHandle(custom, namespace, name) for name in applied}
    seconds: dict[str, float] = {}

    def all_stalled() -> bool:
        for name, handle in handles.items():
            if name not in seconds and handle.condition("Stalled").get("reason") == (
                    "PolicyViolation"):
                seconds[name] = round(time.monotonic() - applied[name][1], 2)
        return len(seconds) == len(handles)

    try:
        wait_for(all_stalled, timeout=300, interval=1,
                 what="every view with a hostile check to end Stalled PolicyViolation",
                 on_timeout=lambda: str({applied[n][0].sql: h.condition("Stalled")
                                         for n, h in handles.items() if n not in seconds}))
        for name, handle in handles.items():
            hostile = applied[name][0]
            message = handle.condition("Stalled")["message"]
            assert message.startswith("cutover.checks.assertions hostile: "), message
            assert hostile.expected in message, (hostile.sql, message)
        apps = custom.list_namespaced_custom_object(
            "sparkoperator.k8s.io", "v1beta2", namespace, "sparkapplications")["items"]
        assert apps == [], [a["metadata"]["name"] for a in apps]
        assert _tables(stack.pg_dsn, tried) == tables_before
        print(f"{len(handles)} views Stalled PolicyViolation; slowest "
              f"{max(seconds.values()):.2f} s after its apply")
    finally:
        for name in handles:  # before the operator stops: it releases them
            custom.delete_namespaced_custom_object(G, V, namespace, P, name)
        wait_for(lambda: all(h.gone() for h in handles.values()), timeout=180, interval=1,
                 what="the views with hostile checks to be deleted")
