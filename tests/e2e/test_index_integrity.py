"""A candidate whose index table is dropped mid-replay is rebuilt from offset 0, never promoted.

Events keep arriving (LiveProducer) while a view's first revision replays; once its
job has committed a batch, someone drops its index table by hand (its ledger rows
stay, as after following a hint half-way). The job refuses to write into or re-create
the table, the operator sees the ledger's claim fail (the table is gone), rebuilds the
revision under a new build and a fresh checkpoint, and promotes it only once the
rebuild catches up: the alias then equals the test's recomputation of every event
produced. (A first revision, not a migration: one Spark job start fewer.)
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import psycopg
from kubernetes import client

from dvstack.testing import replay
from dvstack.testing.traffic import AliasReader, LiveProducer
from dvstack.testing.waiting import wait_for
from support.e2e.operator import GATE_SECONDS
from support.e2e.views import G, P, V, ViewHandle, wait_alias_equals

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
    # older than the gate: the first revision builds until it holds them all
    replay.produce(stack.kafka_bootstrap, topic, seeded, age_seconds=3600)
    replay.ensure_namespace_and_sink_secret(core, namespace, "views-db", stack.pg)
    producer = LiveProducer(stack.kafka_bootstrap, topic, rate=20, seed=22).start()
    try:
        custom.create_namespaced_custom_object(G, V, namespace, P, {
            "apiVersion": f"{G}/{V}", "kind": "DerivedView",
            "metadata": {"name": "integ", "namespace": namespace},
            "spec": {"source": {"kafka": {"bootstrapServers": stack.kafka_bootstrap},
                                "topics": [topic], "schema": replay.ORDER_SCHEMA,
                                # several batches per replay, so there is a "mid-replay"
                                "maxOffsetsPerTrigger": 1_000},
                     "transform": {"sql": SQL_V2},
                     "sink": {"postgres": {"secretRef": {"name": "views-db"}, "table": table},
                              "primaryKey": ["customer_id"]},
                     # a gate long enough that the drop lands before it could be promoted
                     "cutover": {"stableForSeconds": 30, "maxLagSeconds": GATE_SECONDS},
                     "deletionPolicy": "Delete"}})
        view = ViewHandle(custom, namespace, "integ")
        wait_for(lambda: view.status().get("revision"), timeout=60, interval=0.5,
                 what="the view's first pass")
        revision = view.status()["revision"]
        index = view.record(revision)["index"]
        wait_for(lambda: bool(_ledger(stack.pg_dsn, revision)), timeout=900, interval=0.5,
                 what="the first job to commit a batch")
        assert view.active() is None  # mid-replay: not promoted yet
        lost_oid = _oid(stack.pg_dsn, index)
        with psycopg.connect(stack.pg_dsn, autocommit=True) as conn:
            conn.execute(f'DROP TABLE public."{index}"')  # its ledger rows stay

        wait_for(lambda: view.record(revision).get("build") == 1, timeout=300, interval=0.5,
                 what="the operator to rebuild the revision under build 1")
        rebuilt = view.record(revision)
        assert rebuilt["checkpointLocation"].endswith(f"/{revision}.1")
        assert rebuilt["reason"] == "IndexLost" or rebuilt["phase"] != "Active"
        assert view.active() is None
        assert all(kind == "Warning" for kind, _, _ in view.wait_events(core, "IndexLost"))

        view.wait_serving_new(None, "the rebuilt index to catch up and serve", timeout=900)
    finally:
        events = seeded + producer.stop()
    assert producer.failures == []
    # Every ledger row left (the operator prunes old ones) names the table now serving; that
    # it holds every batch from 0 is the recomputation's equality below.
    served_oid = _oid(stack.pg_dsn, index)
    ledger = _ledger(stack.pg_dsn, revision)
    assert served_oid is not None and served_oid != lost_oid
    assert ledger and {oid for _, oid in ledger} == {served_oid}
    reader = AliasReader(stack.pg_dsn, table).start()
    try:
        wait_alias_equals(stack.pg_dsn, table, events, V2_COLUMNS,
                          "the alias to equal the recomputation of every event", timeout=300)
    finally:
        reader.stop()
    assert reader.errors == []
    results = Path(stack.state_dir) / "results"
    results.mkdir(exist_ok=True)
    (results / "index_integrity.json").write_text(json.dumps({
        "events": len(events), "live_rate": round(producer.achieved_rate(), 1),
        "ledger_batches_after_rebuild": len(ledger)}))
