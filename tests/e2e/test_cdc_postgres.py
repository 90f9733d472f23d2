"""From a database to the index by change data capture, on real components, under a workload.

A "system of record" database on the stack's PostgreSQL holds `accounts`; a workload inserts,
updates and deletes rows in it all along. Debezium's PostgreSQL connector (Kafka Connect,
standalone, pgoutput) turns the table's snapshot and every change into a Kafka topic:
`r`/`c`/`u`/`d` events and a tombstone after each delete. Two connectors capture the table:
one with the JSON converter (schemas on), one with Apicurio's Avro converter through the
stack's schema registry (Confluent wire format, keys and values). A DerivedView with `format:
debezium` mirrors the table from the JSON topic (v1), then migrates, while the workload keeps
running and a reader queries the alias, to a new SQL over the Avro topic (v2: the team moved
its connector to Avro; a content change, so a replay of the Avro topic from offset 0). After
each, the index equals the source table's current state as the test reads it from the
database (the truth), with v2's derived columns computed in Python (`dvstack.services.debezium.v2_of`): 0
rows differ, deleted rows included: JSON and Avro change events, deletes and tombstones
alike, in one Spark job per revision.
Figures go to `.stack/results/cdc_postgres.json`.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from kubernetes import client

from dvstack.services.debezium import (
    AVRO_ROW_SCHEMA,
    MIRROR_COLUMNS,
    MIRROR_SQL,
    ROW_SCHEMA,
    V2_COLUMNS,
    V2_SQL,
    SourceDatabase,
    TableWorkload,
    mirrored,
    settle,
    v2_of,
)
from dvstack.testing import replay
from dvstack.testing.traffic import AliasReader
from dvstack.testing.waiting import wait_for
from support.e2e.operator import GATE_SECONDS
from support.e2e.views import G, P, V, ViewHandle

SEED_ROWS = 2_000


def topic_events(bootstrap: str, topic: str) -> tuple[int, int]:
    """(records, tombstones) in the topic: ends summed, tombstones counted by reading it."""
    ends = replay.topic_end_offsets(bootstrap, topic)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in ends])
        seen = {p: 0 for p in ends}
        tombstones = 0
        deadline = time.monotonic() + 120
        while any(seen[p] < ends[p] for p in ends) and time.monotonic() < deadline:
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
    avro = source.second_capture("avro")
    table = f"accounts_{source.key}"
    source.create(SEED_ROWS)
    workload: TableWorkload | None = None
    reader: AliasReader | None = None
    seen: dict[str, Any] = {}
    try:
        source.capture()
        avro.capture(avro_registry_url=stack.schema_registry_url)
        workload = TableWorkload(source.dsn, rate=40).start()
        wait_for(lambda: workload is not None and workload.changes >= 200,
                 timeout=120, interval=0.5, what="the workload to have made 200 changes")

        replay.ensure_namespace_and_sink_secret(core, namespace, "views-db", stack.pg)
        replay.ensure_registry_secret(core, namespace, stack.schema_registry_url)
        custom.create_namespaced_custom_object(G, V, namespace, P, {
            "apiVersion": f"{G}/{V}", "kind": "DerivedView",
            "metadata": {"name": "accounts", "namespace": namespace},
            "spec": {"source": {"kafka": {"bootstrapServers": stack.kafka_bootstrap},
                                "topics": [source.topic], "format": "debezium",
                                "schema": ROW_SCHEMA},
                     "transform": {"sql": MIRROR_SQL},
                     "sink": {"postgres": {"secretRef": {"name": "views-db"}, "table": table},
                              "primaryKey": ["id"]},
                     "cutover": {"stableForSeconds": 2, "retainPreviousSeconds": 5,
                                 "maxLagSeconds": GATE_SECONDS}}})
        view = ViewHandle(custom, namespace, "accounts")
        v1 = view.wait_serving_new(None, "v1 to mirror the source table", timeout=600)
        seen["v1"] = settle(workload, source, stack.pg_dsn, table, MIRROR_COLUMNS, mirrored)

        reader = AliasReader(stack.pg_dsn, table).start()
        view.patch({"spec": {"source": {
            "topics": [avro.topic], "schema": None,
            "avro": {"registry": {"secretRef": {"name": "registry"}},
                     "readerSchema": {"schema": AVRO_ROW_SCHEMA}}},
            "transform": {"sql": V2_SQL}}})
        v2 = view.wait_serving_new(v1, "v2 to replay the Avro topic and take over",
                                   timeout=600)
        changes_during_migration = workload.changes - seen["v1"]["changes"]
        reader.stop()
        seen["v2"] = settle(workload, source, stack.pg_dsn, table, V2_COLUMNS, v2_of)
        seen["v2"]["changes_during_migration"] = changes_during_migration
        seen["v2"]["last_cutover"] = view.status()["lastCutover"]
        seen["revisions"] = {"v1": v1, "v2": v2}
        # Every delete leaves its tombstone: the last ones (made after the index settled,
        # before the workload stopped) reach the topic as fast as Debezium ships them, so
        # they are awaited while the connector still runs.
        workload.stop()
        deletes = workload.counts["delete"]

        def every_tombstone(topic: str) -> tuple[int, int] | None:
            found = topic_events(stack.kafka_bootstrap, topic)
            return found if found[1] >= deletes else None

        records, tombstones = wait_for(lambda: every_tombstone(avro.topic), timeout=120,
                                       interval=2, what=f"{deletes} tombstones in {avro.topic}")
        json_records, json_tombstones = wait_for(
            lambda: every_tombstone(source.topic), timeout=120, interval=2,
            what=f"{deletes} tombstones in {source.topic}")
    finally:
        if reader is not None:
            reader.stop()
        if workload is not None:
            workload.stop()
        avro.drop(database=False)
        source.drop()
    assert workload.failures == [], workload.failures[:5]
    assert reader.errors == [], reader.errors[:5]
    assert seen["v1"]["differing_rows"] == 0 and seen["v2"]["differing_rows"] == 0
    assert seen["v2"]["changes_during_migration"] > 0
    assert deletes > 0 and tombstones >= deletes
    seen["workload"] = {"operations": dict(workload.counts), "seed_rows": SEED_ROWS,
                        "avro_topic_records": records, "avro_tombstones": tombstones,
                        "json_topic_records": json_records,
                        "json_tombstones": json_tombstones}
    seen["reader"] = {"queries": reader.queries, "errors": len(reader.errors),
                      "worst_stall_ms": round(reader.worst_stall * 1000, 1)}
    results = Path(stack.state_dir) / "results"
    results.mkdir(parents=True, exist_ok=True)
    (results / "cdc_postgres.json").write_text(json.dumps(seen, indent=2, default=str))
