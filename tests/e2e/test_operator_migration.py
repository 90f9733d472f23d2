"""The operator as a user runs it, on a log whose beginning retention took: apply v1 -> it
serves once its backlog is in; the first half of every partition is deleted; change the SQL
-> v2 replays but is not promoted (its history starts later than v1's); accept the shorter
history (`source.history: fromLogStart`) -> v2 cuts over without a replay; delete.

The operator runs as its own process (`derived-views-operator -A`) against the local API
server, Kafka and PostgreSQL, with the stand-in running its jobs (the same migration on the
real node, with the chart's operator pods and the jobs' pods deleted on the way:
test_chart_on_node). The backlog is written seconds before v1 is applied, younger than the
gate: a reader counting the alias's rows from before it exists must never see fewer than
the backlog's customers (a first revision serves only once hydrated). A producer writes
through the migration, a reader queries the alias in a loop through the cutover and must see
no error, and each index must equal the test's own recomputation: v1 of every event, v2 of
what the log held when its replay started plus what was produced since (read back from the
log by the test).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
from kubernetes import client

from dvstack.testing import replay
from dvstack.testing.traffic import AliasReader, LiveProducer, RowCountReader
from dvstack.testing.waiting import wait_for
from support.e2e.checkpoints import s3_keys
from support.e2e.operator import GATE_SECONDS
from support.e2e.views import G, P, V, ViewHandle, wait_alias_equals

SQL_V2 = ("SELECT customer_id, count(*) AS orders, sum(amount) AS revenue, max(amount) AS biggest "
          "FROM events GROUP BY customer_id")


def test_a_migration_over_a_log_whose_beginning_is_gone(
        stack: Any, kube_api_client: Any, namespace: str, operator_process: Path) -> None:
    core, custom = client.CoreV1Api(kube_api_client), client.CustomObjectsApi(kube_api_client)
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    table = f"obc_{uuid.uuid4().hex[:8]}"
    bootstrap = stack.kafka_bootstrap
    replay.create_topic(bootstrap, topic, 3, config={"retention.ms": str(7 * 86_400_000)})
    events = replay.make_orders(30_000, seed=11)
    replay.produce(bootstrap, topic, events)  # seconds old: younger than the gate
    customers = len({e["customer_id"] for e in events})
    replay.ensure_namespace_and_sink_secret(core, namespace, "views-db", stack.pg)
    view = {"apiVersion": f"{G}/{V}", "kind": "DerivedView",
            "metadata": {"name": "orders", "namespace": namespace},
            "spec": {"source": {"kafka": {"bootstrapServers": bootstrap},
                                "topics": [topic], "schema": replay.ORDER_SCHEMA},
                     "transform": {"sql": replay.ORDERS_BY_CUSTOMER_SQL},
                     "sink": {"postgres": {"secretRef": {"name": "views-db"}, "table": table},
                              "primaryKey": ["customer_id"]},
                     "cutover": {"stableForSeconds": 2, "retainPreviousSeconds": 5,
                                 "maxLagSeconds": GATE_SECONDS},
                     "deletionPolicy": "Delete"}}
    counter = RowCountReader(stack.pg_dsn, table).start()
    try:
        custom.create_namespaced_custom_object(G, V, namespace, P, view)
        handle = ViewHandle(custom, namespace, "orders")
        v1 = handle.wait_serving_new(None, "v1 to become Ready")
        wait_for(lambda: len(counter.counts) >= 20, timeout=60, interval=0.2,
                 what="the row counter to read the served alias")
    finally:
        counter.stop()
    # not shown before hydrated: every answer holds every customer of the backlog
    assert counter.counts and set(counter.counts) == {customers}, sorted(set(counter.counts))[:5]
    v1_checkpoint = handle.record(v1)["checkpointLocation"]
    assert v1_checkpoint.startswith("s3a://")
    assert any("/commits/" in k for k in s3_keys(stack, v1_checkpoint))
    v1_columns = ["orders", "revenue"]
    wait_alias_equals(stack.pg_dsn, table, events, v1_columns, "v1's alias to hold every event")
    assert handle.record(v1).get("historyStart") in (None, {})  # v1 read from offset 0

    # retention takes the first half of every partition
    ends = replay.topic_end_offsets(bootstrap, topic)
    starts = replay.delete_records_before(bootstrap, topic, {p: e // 2 for p, e in ends.items()})
    assert all(starts[p] == ends[p] // 2 > 0 for p in ends), (ends, starts)

    reader = AliasReader(stack.pg_dsn, table).start()
    live = LiveProducer(bootstrap, topic, rate=50, seed=113).start()
    figures: dict[str, Any] = {}
    try:
        applied = time.monotonic()
        handle.patch({"spec": {"transform": {"sql": SQL_V2}}})
        wait_for(lambda: handle.condition("Degraded").get("reason") == "HistoryIncomplete",
                 timeout=300, interval=0.5, what="v2 to be held for its shorter history",
                 on_timeout=handle.brief)
        figures["history_incomplete_after_apply_s"] = round(time.monotonic() - applied, 1)
        v2 = handle.status()["revision"]
        wait_for(lambda: bool(handle.record(v2).get("historyStart")), timeout=600, interval=1,
                 what="v2's first batch to record where its history starts",
                 on_timeout=handle.brief)
        figures["first_batch_after_apply_s"] = round(time.monotonic() - applied, 1)
        degraded = handle.condition("Degraded")
        for p, start in starts.items():
            assert f"{topic}/{p} ({start} records)" in degraded["message"], degraded
        assert "retention.ms=604800000 (7 days)" in degraded["message"], degraded
        assert handle.record(v2)["historyStart"] == {f"{topic}/{p}": o for p, o in starts.items()}
        figures["degraded_message"] = degraded["message"]
        assert handle.active() == v1
    finally:
        events += live.stop()
    # held back: v1 serves every event, the deleted ones too
    wait_alias_equals(stack.pg_dsn, table, events, v1_columns,
                      "v1 to serve every event while v2 is held back")
    assert handle.active() == v1 and handle.phases()[v2] in ("Backfilling", "CaughtUp")
    assert handle.status()["revision"] == v2

    live = LiveProducer(bootstrap, topic, rate=50, seed=127).start()
    try:
        handle.patch({"spec": {"source": {"history": "fromLogStart"}}})
        assert handle.wait_serving_new(v1, "v2 to take over once its history is accepted") == v2
    finally:
        reader.stop()
        live.stop()
    assert live.failures == []
    assert reader.errors == []
    v2_columns = ["orders", "revenue", "biggest"]
    held = replay.read_topic(bootstrap, topic)  # what the log holds: the survivors, the live
    assert len(held) == sum(ends[p] - starts[p] for p in ends) + len(events) - 30_000 + \
        live.count()
    wait_alias_equals(stack.pg_dsn, table, held, v2_columns,
                      "v2's alias to hold every record the log holds")
    assert handle.record(v2)["revision"] == v2  # the same revision: accepted, not replayed
    shown = subprocess.run(
        [sys.executable, "-m", "derived_views.cli", "status", "orders", "-n", namespace],
        env={**os.environ, "KUBECONFIG": stack.kubeconfig}, capture_output=True, text=True,
        check=True, timeout=60).stdout
    said = " ".join(shown.split())  # the table wraps long values
    assert "History fromLogStart" in said, shown
    for p, start in starts.items():
        assert f"{topic}/{p} from offset {start} ({start} records deleted by retention)" in said
    figures["dv_status"] = shown
    assert handle.phases()[v1] in ("Retiring", "Retired")
    wait_for(lambda: handle.phases().get(v1) == "Retired",
             timeout=60, interval=1, what="v1's index to be dropped after its retain window")
    # Its checkpoint went with its index; v2's is kept.
    assert s3_keys(stack, v1_checkpoint) == []
    v2_checkpoint = handle.record(v2)["checkpointLocation"]
    assert any("/commits/" in k for k in s3_keys(stack, v2_checkpoint))
    results = Path(stack.state_dir) / "results"
    results.mkdir(exist_ok=True)
    (results / "operator_migration.json").write_text(json.dumps(
        {"reader_queries": reader.queries, "reader_worst_stall_ms":
         round(reader.worst_stall * 1000, 1), "live_events": len(events) - 30_000
         + live.count(), "row_counts_read": len(counter.counts),
         **figures}, indent=2))

    custom.delete_namespaced_custom_object(G, V, namespace, P, "orders")
    wait_for(handle.gone, timeout=120, interval=1,
             what="the view to be deleted (finalizer removed)")
    with psycopg.connect(stack.pg_dsn) as conn:
        left = conn.execute("SELECT count(*) FROM pg_class WHERE relname LIKE %s",
                            (f"{table}%",)).fetchone()
    assert left == (0,)  # deletionPolicy Delete dropped the alias and every index
    assert s3_keys(stack, v2_checkpoint) == []  # and every index's checkpoint
