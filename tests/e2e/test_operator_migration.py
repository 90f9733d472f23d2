"""The operator as a user runs it: apply v1 -> serves; change SQL -> v2 replays, cuts over; delete.

The operator runs as its own process (`derived-views-operator -A`) against the
local API server, Kafka and PostgreSQL, with the stand-in running its jobs (the same
migration on the real node, with the chart's operator pods and the jobs' pods deleted on
the way: test_chart_on_node). A producer writes through the migration, a reader queries
the alias in a loop through the cutover and must see no error, and the index must equal
the test's recomputation of every event.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import psycopg
from e2e_checkpoints import s3_keys
from e2e_operator import GATE_SECONDS
from e2e_views import G, P, V, ViewHandle, wait_alias_equals
from kubernetes import client

from dvstack import replay
from dvstack.traffic import AliasReader, LiveProducer
from dvstack.waiting import wait_for

SQL_V2 = ("SELECT customer_id, count(*) AS orders, sum(amount) AS revenue, max(amount) AS biggest "
          "FROM events GROUP BY customer_id")


def test_apply_migrate_cut_over_and_delete(stack: Any, kube_api_client: Any, namespace: str,
                                           operator_process: Path) -> None:
    core, custom = client.CoreV1Api(kube_api_client), client.CustomObjectsApi(kube_api_client)
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    table = f"obc_{uuid.uuid4().hex[:8]}"
    replay.create_topic(stack.kafka_bootstrap, topic, 3)
    events = replay.make_orders(30_000, seed=11)
    # older than the gate: v1 builds until it holds them all
    replay.produce(stack.kafka_bootstrap, topic, events, age_seconds=3600)
    replay.ensure_namespace_and_sink_secret(core, namespace, "views-db", stack.pg)
    view = {"apiVersion": f"{G}/{V}", "kind": "DerivedView",
            "metadata": {"name": "orders", "namespace": namespace},
            "spec": {"source": {"kafka": {"bootstrapServers": stack.kafka_bootstrap},
                                "topics": [topic], "schema": replay.ORDER_SCHEMA},
                     "transform": {"sql": replay.ORDERS_BY_CUSTOMER_SQL},
                     "sink": {"postgres": {"secretRef": {"name": "views-db"}, "table": table},
                              "primaryKey": ["customer_id"]},
                     "cutover": {"stableForSeconds": 2, "retainPreviousSeconds": 5,
                                 "maxLagSeconds": GATE_SECONDS},
                     "deletionPolicy": "Delete"}}
    custom.create_namespaced_custom_object(G, V, namespace, P, view)
    handle = ViewHandle(custom, namespace, "orders")

    v1 = handle.wait_serving_new(None, "v1 to become Ready")
    v1_checkpoint = handle.record(v1)["checkpointLocation"]
    assert v1_checkpoint.startswith("s3a://")
    assert any("/commits/" in k for k in s3_keys(stack, v1_checkpoint))
    v1_columns = ["orders", "revenue"]
    wait_alias_equals(stack.pg_dsn, table, events, v1_columns, "v1's alias to hold every event")

    reader = AliasReader(stack.pg_dsn, table).start()
    live = LiveProducer(stack.kafka_bootstrap, topic, rate=50, seed=113).start()
    try:
        handle.patch({"spec": {"transform": {"sql": SQL_V2}}})
        handle.wait_serving_new(v1, "v2 to replay and take over")
    finally:
        reader.stop()
        events += live.stop()
    assert live.failures == []
    assert reader.errors == []
    v2_columns = ["orders", "revenue", "biggest"]
    wait_alias_equals(stack.pg_dsn, table, events, v2_columns, "v2's alias to hold every event")
    assert handle.phases()[v1] in ("Retiring", "Retired")
    wait_for(lambda: handle.phases().get(v1) == "Retired",
             timeout=60, interval=1, what="v1's index to be dropped after its retain window")
    # Its checkpoint went with its index; v2's is kept.
    assert s3_keys(stack, v1_checkpoint) == []
    v2_checkpoint = handle.record(handle.active() or "")["checkpointLocation"]
    assert any("/commits/" in k for k in s3_keys(stack, v2_checkpoint))
    results = Path(stack.state_dir) / "results"
    results.mkdir(exist_ok=True)
    (results / "operator_migration.json").write_text(json.dumps(
        {"reader_queries": reader.queries, "reader_worst_stall_ms":
         round(reader.worst_stall * 1000, 1), "live_events": live.count()}))

    custom.delete_namespaced_custom_object(G, V, namespace, P, "orders")
    wait_for(handle.gone, timeout=120, interval=1,
             what="the view to be deleted (finalizer removed)")
    with psycopg.connect(stack.pg_dsn) as conn:
        left = conn.execute("SELECT count(*) FROM pg_class WHERE relname LIKE %s",
                            (f"{table}%",)).fetchone()
    assert left == (0,)  # deletionPolicy Delete dropped the alias and every index
    assert s3_keys(stack, v2_checkpoint) == []  # and every index's checkpoint
