"""From a database to the index by change data capture, on real components, under a workload.

A "system of record" database on the stack's PostgreSQL holds `accounts`; a workload inserts,
updates and deletes rows in it all along. Debezium's PostgreSQL connector (Kafka Connect,
standalone, pgoutput, JSON converter with schemas) turns the table's snapshot and every
change into a Kafka topic: `r`/`c`/`u`/`d` events and a tombstone after each delete. A
DerivedView with `format: debezium` mirrors the table (v1), then migrates to a new SQL (v2)
while the workload keeps running and a reader queries the alias. After each, the index equals
the source table's current state as the test reads it from the database (the truth), with
the test's own Python for v2's derived columns: 0 rows differ, deleted rows included.
Figures go to `.stack/results/cdc_postgres.json`.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
from confluent_kafka import Consumer, TopicPartition
from e2e_views import AliasReader, G, P, V, ViewHandle
from kubernetes import client

from dvstack import replay
from dvstack.cdc import ROW_SCHEMA, SourceDatabase, TableWorkload
from dvstack.waiting import wait_for

V1_SQL = "SELECT id, owner, region, balance, _debezium_deleted AS _dv_deleted FROM events"
V2_SQL = ("SELECT id, owner, upper(region) AS region, balance, balance >= 5000 AS vip, "
          "_debezium_deleted AS _dv_deleted FROM events")
SEED_ROWS = 2_000


def index_rows(dsn: str, table: str, columns: list[str]) -> dict[int, tuple[Any, ...]]:
    cols = ", ".join(f'"{c}"' for c in columns)
    with psycopg.connect(dsn) as conn:
        return {r[0]: tuple(r[1:]) for r in conn.execute(
            f'SELECT id, {cols} FROM "{table}"').fetchall()}


def differing(index: dict[int, tuple[Any, ...]], truth: dict[int, tuple[Any, ...]]) -> int:
    """Rows present on one side only, or present on both with other values."""
    return sum(index.get(k) != truth.get(k) for k in index.keys() | truth.keys())


def v2_of(truth: dict[int, tuple[Any, ...]]) -> dict[int, tuple[Any, ...]]:
    """The test's own v2: region upper-cased, vip when the balance is 5,000 or more."""
    return {k: (owner, region.upper(), balance, balance >= 5000)
            for k, (owner, region, balance) in truth.items()}


def topic_events(bootstrap: str, topic: str) -> tuple[int, int]:
    """(records, tombstones) in the topic: ends summed, tombstones counted by reading it."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in parts}
        consumer.assign([TopicPartition(topic, p, 0) for p in parts])
        seen = {p: 0 for p in parts}
        tombstones = 0
        deadline = time.monotonic() + 120
        while any(seen[p] < ends[p] for p in parts) and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None or msg.error():
                continue
            if msg.offset() < ends[msg.partition()]:
                seen[msg.partition()] = msg.offset() + 1
                tombstones += msg.value() is None
        return sum(ends.values()), tombstones
    finally:
        consumer.close()


def test_cdc_from_a_database_to_the_index_and_a_migration_under_the_workload(
        stack: Any, kube_api_client: Any, namespace: str, operator_process: Path) -> None:
    core, custom = client.CoreV1Api(kube_api_client), client.CustomObjectsApi(kube_api_client)
    source = SourceDatabase(uuid.uuid4().hex[:8], stack.pg_dsn, stack.pg, stack.kafka_connect)
    table = f"accounts_{source.key}"
    source.create(SEED_ROWS)
    workload: TableWorkload | None = None
    reader: AliasReader | None = None
    seen: dict[str, Any] = {}
    try:
        source.capture()
        workload = TableWorkload(source.dsn, rate=40).start()
        wait_for(lambda: workload is not None and workload.changes >= 200,
                 timeout=120, interval=0.5, what="the workload to have made 200 changes")

        replay.ensure_namespace_and_sink_secret(core, namespace, "views-db", stack.pg)
        custom.create_namespaced_custom_object(G, V, namespace, P, {
            "apiVersion": f"{G}/{V}", "kind": "DerivedView",
            "metadata": {"name": "accounts", "namespace": namespace},
            "spec": {"source": {"kafka": {"bootstrapServers": stack.kafka_bootstrap},
                                "topics": [source.topic], "format": "debezium",
                                "schema": ROW_SCHEMA},
                     "transform": {"sql": V1_SQL},
                     "sink": {"postgres": {"secretRef": {"name": "views-db"}, "table": table},
                              "primaryKey": ["id"]},
                     "cutover": {"stableForSeconds": 2, "retainPreviousSeconds": 5}}})
        view = ViewHandle(custom, namespace, "accounts")
        v1 = view.wait_serving_new(None, "v1 to mirror the source table", timeout=600)
        # While changes keep coming the index trails the database by the pipeline's latency;
        # pausing the workload lets the test compare one state of the table with the index.
        seen["v1"] = _settled(stack, workload, source, table, ["owner", "region", "balance"],
                              lambda t: t, "v1")

        reader = AliasReader(stack.pg_dsn, table).start()
        view.patch({"spec": {"transform": {"sql": V2_SQL}}})
        v2 = view.wait_serving_new(v1, "v2 to replay the topic and take over", timeout=600)
        changes_during_migration = workload.changes - seen["v1"]["changes"]
        reader.stop()
        seen["v2"] = _settled(stack, workload, source, table,
                              ["owner", "region", "balance", "vip"], v2_of, "v2")
        seen["v2"]["changes_during_migration"] = changes_during_migration
        seen["v2"]["last_cutover"] = view.status()["lastCutover"]
        seen["revisions"] = {"v1": v1, "v2": v2}
    finally:
        if reader is not None:
            reader.stop()
        if workload is not None:
            workload.stop()
        source.drop()
    assert workload.failures == [], workload.failures[:5]
    assert reader.errors == [], reader.errors[:5]
    assert seen["v1"]["differing_rows"] == 0 and seen["v2"]["differing_rows"] == 0
    assert seen["v2"]["changes_during_migration"] > 0
    records, tombstones = topic_events(stack.kafka_bootstrap, source.topic)
    assert tombstones >= workload.counts["delete"] > 0  # every delete left its tombstone
    seen["workload"] = {"operations": dict(workload.counts), "seed_rows": SEED_ROWS,
                        "topic_records": records, "tombstones": tombstones}
    seen["reader"] = {"queries": reader.queries, "errors": len(reader.errors),
                      "worst_stall_ms": round(reader.worst_stall * 1000, 1)}
    results = Path(stack.state_dir) / "results"
    results.mkdir(parents=True, exist_ok=True)
    (results / "cdc_postgres.json").write_text(json.dumps(seen, indent=2, default=str))


def _settled(stack: Any, workload: TableWorkload, source: SourceDatabase, table: str,
             columns: list[str], expected_of: Any, what: str) -> dict[str, Any]:
    """Pause the workload, wait until the index equals the test's reading of the table, and
    resume; the figures of that comparison."""
    workload.stop()
    truth = expected_of(source.rows())
    started = time.monotonic()
    wait_for(lambda: differing(index_rows(stack.pg_dsn, table, columns), truth) == 0,
             timeout=180, interval=1,
             what=f"{what}'s index to equal the source table ({len(truth)} rows)")
    figures = {"rows": len(truth),
               "differing_rows": differing(index_rows(stack.pg_dsn, table, columns), truth),
               "seconds_to_equal_after_pause": round(time.monotonic() - started, 1),
               "changes": workload.changes}
    workload.start()
    return figures
