"""Debezium writes Avro through the stack's schema registry, as Spark's Avro views read it.

A source database captured with `avro_registry_url`: Kafka Connect's Debezium PostgreSQL
connector with Apicurio's AvroConverter (a plugin of its own on the worker's plugin path).
Each record of the topic, read from offset 0 with a plain consumer, is in Confluent's wire
format: magic byte 0, a 4-byte big-endian id that the registry's Confluent-compatible API
answers (`/schemas/ids/{id}`), the Avro binary body, which fastavro decodes with that
schema alone. Keys and values both: the snapshot's `r` events, then a row inserted, updated
and deleted (`c`, `u`, a `d` with `before` and no `after`) and the tombstone after the
delete, a null value whose key still decodes to the row's id. The schemas are listed under
the topic's `-key` and `-value` subjects (TopicIdStrategy), at the ids the records carry,
Apicurio's content ids. What Debezium names its schemas goes to
`.stack/results/cdc_avro.json`.
"""

from __future__ import annotations

import io
import json
import struct
import time
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from confluent_kafka import Consumer, TopicPartition
from fastavro import parse_schema, schemaless_reader

from dvstack.services import kafka_connect
from dvstack.services.debezium import TABLE, SourceDatabase
from dvstack.testing import replay
from dvstack.testing import schema_registry_client as registry
from dvstack.testing.waiting import wait_for

SEED_ROWS = 3
ROW = 1_000
"""The row inserted, updated and deleted (the seeds are 1..SEED_ROWS)."""
TIMEOUT = 120.0


@dataclass(frozen=True)
class Decoded:
    """One record: its key and value as decoded, and the ids they were written with."""

    partition: int
    offset: int
    key_id: int
    key: dict[str, Any]
    value_id: int | None
    value: dict[str, Any] | None


class Schemas:
    """Writer schemas by id, as a Confluent reader gets them: `/schemas/ids/{id}` once each."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.text: dict[int, dict[str, Any]] = {}
        self._parsed: dict[int, Any] = {}

    def decode(self, raw: bytes) -> tuple[int, dict[str, Any]]:
        """(id, record) of wire-format bytes; anything but magic byte 0 fails."""
        assert raw[0] == 0, f"magic byte {raw[0]}, not 0 (Confluent's wire format)"
        (schema_id,) = struct.unpack(">I", raw[1:5])
        if schema_id not in self._parsed:
            self.text[schema_id] = json.loads(registry.schema_by_id(self.url, schema_id))
            self._parsed[schema_id] = parse_schema(self.text[schema_id])
        record = schemaless_reader(io.BytesIO(raw[5:]), self._parsed[schema_id])
        assert isinstance(record, dict), record
        return schema_id, record


def read_until_tombstone(bootstrap: str, topic: str, schemas: Schemas) -> list[Decoded]:
    """Every record from offset 0, each partition in order, until the tombstone of ROW."""
    ends = wait_for(lambda: replay.topic_end_offsets(bootstrap, topic), timeout=TIMEOUT,
                    what=f"topic {topic} to exist")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, **replay.QUIET})
    decoded: list[Decoded] = []
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in ends])
        deadline = time.monotonic() + TIMEOUT
        while not any(d.value is None and d.key["id"] == ROW for d in decoded):
            assert time.monotonic() < deadline, f"no tombstone for id {ROW} in {decoded}"
            msg = consumer.poll(1.0)
            if msg is None or msg.error():
                continue
            decoded.append(decode(msg, schemas))
    finally:
        consumer.close()
    return decoded


def decode(msg: Any, schemas: Schemas) -> Decoded:
    key_id, key = schemas.decode(msg.key())
    raw_value = msg.value()
    value_id, value = schemas.decode(raw_value) if raw_value is not None else (None, None)
    return Decoded(msg.partition(), msg.offset(), key_id, key, value_id, value)


def change_one_row(dsn: str) -> None:
    """ROW inserted, updated and deleted, one transaction each."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"INSERT INTO {TABLE} VALUES (%s, 'owner-new', 'north', 10)", (ROW,))
        conn.execute(f"UPDATE {TABLE} SET balance = 20 WHERE id = %s", (ROW,))
        conn.execute(f"DELETE FROM {TABLE} WHERE id = %s", (ROW,))


def version_ids(url: str, subject: str) -> tuple[int, int]:
    """(global id, content id) of the subject's first version, from Apicurio's own API."""
    path = f"/groups/default/artifacts/{subject}/versions/1"
    with urllib.request.urlopen(f"{kafka_connect.registry_core_url(url)}{path}",
                                timeout=10) as resp:
        meta = json.loads(resp.read())
    return int(meta["globalId"]), int(meta["contentId"])


def forget(url: str, subjects: list[str]) -> None:
    """The subjects deleted for good (the registry is the whole run's)."""
    for subject in subjects:
        for query in ("", "?permanent=true"):
            try:
                registry.call(url, "DELETE", f"subjects/{subject}{query}")
            except registry.RegistryError as exc:
                assert exc.status == 404, exc


def record_names(schema: dict[str, Any]) -> dict[str, str]:
    """Full name -> the record's own name and namespace, for every record type in `schema`."""
    found: dict[str, str] = {}

    def walk(node: Any, namespace: str) -> None:
        if isinstance(node, list):
            for branch in node:
                walk(branch, namespace)
        elif isinstance(node, dict) and node.get("type") == "record":
            ns = node.get("namespace", namespace)
            found[f"{ns}.{node['name']}"] = f"name {node['name']}, namespace {ns}"
            for f in node["fields"]:
                walk(f["type"], ns)
        elif isinstance(node, dict):
            walk(node.get("type"), namespace)

    walk(schema, "")
    return found


def test_debezium_writes_confluent_avro_keys_and_values_through_the_registry(
        stack: Any) -> None:
    url = str(stack.schema_registry_url)
    assert url, "stack.json has no schema registry: run `dvstack up` again"
    missing = kafka_connect.missing_plugins(kafka_connect.connector_plugins(stack.kafka_connect))
    assert not missing, f"Kafka Connect lacks {missing}: run `dvstack up` again (it restarts it)"
    source = SourceDatabase(uuid.uuid4().hex[:8], stack.pg_dsn, stack.pg, stack.kafka_connect)
    try:
        check_capture(stack, url, source)
    finally:
        forget(url, [f"{source.topic}-key", f"{source.topic}-value"])


def check_capture(stack: Any, url: str, source: SourceDatabase) -> None:
    source.create(SEED_ROWS)
    try:
        source.capture(avro_registry_url=url)
        change_one_row(source.dsn)
        schemas = Schemas(url)
        records = read_until_tombstone(stack.kafka_bootstrap, source.topic, schemas)
    finally:
        source.drop()

    snapshot = sorted(r.key["id"] for r in records if r.value and r.value["op"] == "r")
    assert snapshot == list(range(1, SEED_ROWS + 1))
    for r in records:
        assert r.value is None or r.value["after"] is None or r.key["id"] == r.value["after"]["id"]
    changes = [r for r in records if r.key["id"] == ROW]
    assert [r.value["op"] if r.value else None for r in changes] == ["c", "u", "d", None]
    created, updated, deleted, tombstone = changes
    assert created.value and created.value["after"]["balance"] == 10
    assert updated.value and updated.value["after"]["balance"] == 20
    assert deleted.value and deleted.value["before"]["id"] == ROW
    assert deleted.value["after"] is None
    assert tombstone.key == {"id": ROW}
    assert [r.offset for r in changes] == sorted(r.offset for r in changes)

    key_ids = {r.key_id for r in records}
    value_ids = {r.value_id for r in records if r.value_id is not None}
    assert len(key_ids) == 1 and len(value_ids) == 1, (key_ids, value_ids)
    subjects = registry.call(url, "GET", "subjects")
    for suffix, ids in (("key", key_ids), ("value", value_ids)):
        subject = f"{source.topic}-{suffix}"
        assert subject in subjects
        latest = registry.call(url, "GET", f"subjects/{subject}/versions/latest")
        assert {latest["id"]} == ids, (subject, latest, ids)
        assert {version_ids(url, subject)[1]} == ids  # the content id, not the global id

    (key_id,), (value_id,) = key_ids, value_ids
    namespace = source.topic
    assert (schemas.text[value_id]["name"], schemas.text[value_id]["namespace"]) == (
        "Envelope", namespace)
    assert (schemas.text[key_id]["name"], schemas.text[key_id]["namespace"]) == (
        "Key", namespace)
    value_records = record_names(schemas.text[value_id])
    assert f"{namespace}.Value" in value_records
    seen = {"topic": source.topic, "key_id": key_id, "value_id": value_id,
            "key_global_id": version_ids(url, f"{source.topic}-key")[0],
            "value_global_id": version_ids(url, f"{source.topic}-value")[0],
            "key_records": record_names(schemas.text[key_id]), "value_records": value_records,
            "records": len(records), "deleted_before": deleted.value["before"]}
    print(json.dumps(seen, indent=2))
    results = Path(stack.state_dir) / "results"
    results.mkdir(parents=True, exist_ok=True)
    (results / "cdc_avro.json").write_text(json.dumps(seen, indent=2, default=str))
