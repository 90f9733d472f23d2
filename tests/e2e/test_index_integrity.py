"""A candidate whose index table is dropped mid-replay is rebuilt from offset 0, never promoted.

v1 serves; events keep arriving (LiveProducer); v2 is applied and, once its job has
committed a batch, someone drops v2's index table by hand (its ledger rows stay, as
after following a hint half-way). The job refuses to write into a re-created table,
the operator sees the ledger's claim fail (the table is gone), rebuilds v2 under a new
build and a fresh checkpoint, and promotes it only once the rebuild catches up. The
reader on the alias sees no error (v1 serves meanwhile) and the alias finally equals
the test's recomputation of every event produced.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import psycopg
from e2e_views import AliasReader, G, LiveProducer, P, V, ViewHandle, wait_alias_equals
from kubernetes import client

from dvstack import replay
from dvstack.waiting import wait_for

SQL_V2 = ("SELECT customer_id, count(*) AS orders, sum(amount) AS revenue, max(amount) AS biggest "
          "FROM events GROUP BY customer_id")
V2_COLUMNS = ["orders", "revenue", "biggest"]


def _ledger(dsn: str, revision: str) -> list[tuple[int, int | None]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT batch_id, index_oid FROM dv_ledger WHERE revision = %s "
                            "ORDER BY batch_id", (revision,)).fetchall()
    return [(int(r[0]), None if r[1] is None else int(r[1])) for r in rows]


def _oid(dsn: str, table: str) -> int | None:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT to_regclass(%s)::oid", (f'public."{table}"',)).fetchone()
    return None if row is None or row[0] is None else int(row[0])


def test_dropped_candidate_index_is_rebuilt_not_promoted(
        stack: Any, kube_api_client: Any, namespace: str, operator_process: Path) -> None:
    core, custom = client.CoreV1Api(kube_api_client), client.CustomObjectsApi(kube_api_client)
    topic, table = f"integ-{uuid.uuid4().hex[:8]}", f"integ_{uuid.uuid4().hex[:8]}"
    replay.create_topic(stack.kafka_bootstrap, topic, 3)
    seeded = replay.make_orders(4_000, seed=21)
    replay.produce(stack.kafka_bootstrap, topic, seeded)
    replay.ensure_namespace_and_sink_secret(core, namespace, "views-db", stack.pg)
    custom.create_namespaced_custom_object(G, V, namespace, P, {
        "apiVersion": f"{G}/{V}", "kind": "DerivedView",
        "metadata": {"name": "integ", "namespace": namespace},
        "spec": {"source": {"kafka": {"bootstrapServers": stack.kafka_bootstrap},
                            "topics": [topic], "schema": replay.ORDER_SCHEMA,
                            # several batches per replay, so there is a "mid-replay"
                            "maxOffsetsPerTrigger": 1_000},
                 "transform": {"sql": replay.ORDERS_BY_CUSTOMER_SQL},
                 "sink": {"postgres": {"secretRef": {"name": "views-db"}, "table": table},
                          "primaryKey": ["customer_id"]},
                 # long enough a gate that the drop lands before v2 could be promoted
                 "cutover": {"stableForSeconds": 30, "retainPreviousSeconds": 600},
                 "deletionPolicy": "Delete"}})
    view = ViewHandle(custom, namespace, "integ")
    v1 = view.wait_serving_new(None, "v1 to replay and serve", timeout=400)

    producer = LiveProducer(stack.kafka_bootstrap, topic, rate=20, seed=22).start()
    reader = AliasReader(stack.pg_dsn, table).start()
    try:
        view.patch({"spec": {"transform": {"sql": SQL_V2}}})
        wait_for(lambda: (view.status().get("candidate") or {}).get("revision") not in (None, v1),
                 timeout=60, interval=0.5, what="v2 to become the candidate")
        v2 = view.status()["candidate"]["revision"]
        v2_index = view.record(v2)["index"]
        wait_for(lambda: bool(_ledger(stack.pg_dsn, v2)), timeout=400, interval=0.5,
                 what="v2's job to commit a batch")
        assert view.active() == v1  # mid-replay: not promoted yet
        lost_oid = _oid(stack.pg_dsn, v2_index)
        with psycopg.connect(stack.pg_dsn, autocommit=True) as conn:
            conn.execute(f'DROP TABLE public."{v2_index}"')

        wait_for(lambda: view.record(v2).get("build") == 1, timeout=120, interval=0.5,
                 what="the operator to rebuild v2 under build 1")
        rebuilt = view.record(v2)
        assert rebuilt["checkpointLocation"].endswith(f"/{v2}.1")
        assert view.active() == v1
        reasons = [e[1] for e in view.events(core) if e[0] == "Warning"]
        assert "IndexLost" in reasons

        view.wait_serving_new(v1, "the rebuilt v2 to catch up and take over", timeout=600)
        assert view.active() == v2
    finally:
        events = seeded + producer.stop()
        reader.stop()
    assert producer.failures == []
    assert reader.errors == []
    # The served index holds every batch from 0, all written to the table now serving.
    served_oid = _oid(stack.pg_dsn, v2_index)
    ledger = _ledger(stack.pg_dsn, v2)
    assert served_oid is not None and served_oid != lost_oid
    assert ledger[0][0] == 0 and {oid for _, oid in ledger} == {served_oid}
    wait_alias_equals(stack.pg_dsn, table, events, V2_COLUMNS,
                      "the alias to equal the recomputation of every event", timeout=240)
    results = Path(stack.state_dir) / "results"
    results.mkdir(exist_ok=True)
    (results / "index_integrity.json").write_text(json.dumps({
        "events": len(events), "live_rate": round(producer.achieved_rate(), 1),
        "reader_queries": reader.queries, "reader_errors": len(reader.errors),
        "reader_worst_stall_ms": round(reader.worst_stall * 1000, 1)}))
