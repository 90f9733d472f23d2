"""Debezium's change events through its Avro converter, on a whole run: real Kafka, schema
registry, PySpark (spark-submit with spark-avro) and PostgreSQL.

The events are written here as Debezium's PostgreSQL connector writes them with an Avro
converter (an `Envelope` value with `before`/`after` of the table's `Value`, `source`,
`op`, `ts_ms`; the primary key as a `Key` record; a tombstone after each delete), in the
Confluent wire format. The table gains a column mid-log: a second envelope schema, and a
second key schema, registered under other subjects, so the job meets both ids mid-replay
and must learn them. One event of each bad kind: an op Debezium uses for a truncate, and a
tombstone whose key is not Avro.

The index must mirror the table as this test changed it (its own dict of rows, not any
decoding): deleted rows gone, updated rows at their last values.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from confluent_kafka import Producer
from psycopg import sql

from dvstack.testing import replay
from dvstack.testing.schema_registry_client import register
from support.avro_orders import wire
from support.spark_job.job_submit import mounted_secrets, submit

pytestmark = pytest.mark.integration

NAMESPACE = "cdc.public.accounts"
COLUMNS = [{"name": "id", "type": "int"}, {"name": "owner", "type": "string"},
           {"name": "balance", "type": "long"}]
NOTE = {"name": "note", "type": ["null", "string"], "default": None}
READER = {"type": "record", "name": "Account", "fields": [*COLUMNS, NOTE]}
ROW_DDL = "`id` INT, `owner` STRING, `balance` BIGINT, `note` STRING"
SQL = "SELECT id, owner, balance, note, _debezium_deleted AS _dv_deleted FROM events"


def envelope(columns: list[dict[str, Any]], namespace: str = NAMESPACE) -> dict[str, Any]:
    """Debezium's value schema for a table of `columns` (PostgreSQL connector, Avro)."""
    value = {"type": "record", "name": "Value", "namespace": namespace, "fields": columns}
    source = {"type": "record", "name": "Source", "namespace": "io.debezium.connector.postgresql",
              "fields": [{"name": "version", "type": "string"},
                         {"name": "lsn", "type": ["null", "long"], "default": None}]}
    return {"type": "record", "name": "Envelope", "namespace": namespace, "fields": [
        {"name": "before", "type": ["null", value], "default": None},
        {"name": "after", "type": ["null", "Value"], "default": None},
        {"name": "source", "type": source}, {"name": "op", "type": "string"},
        {"name": "ts_ms", "type": ["null", "long"], "default": None}]}


def key_schema(namespace: str = NAMESPACE) -> dict[str, Any]:
    return {"type": "record", "name": "Key", "namespace": namespace,
            "fields": [{"name": "id", "type": "int"}]}


class Table:
    """The source table as this test changes it, and the change events it makes."""

    def __init__(self, ids: dict[str, int], schemas: dict[str, dict[str, Any]]) -> None:
        self.rows: dict[int, dict[str, Any]] = {}
        self.events: list[tuple[bytes | None, bytes | None]] = []
        self.ids, self.schemas, self.value, self.key = ids, schemas, "v1", "k1"

    def _event(self, op: str, before: Any, after: Any) -> None:
        source = {"version": "3.3.2.Final", "lsn": len(self.events)}
        self.events.append((
            wire(self.ids[self.key], self.schemas[self.key], {"id": (after or before)["id"]}),
            wire(self.ids[self.value], self.schemas[self.value], {
                "before": before, "after": after, "source": source, "op": op,
                "ts_ms": 1_700_000_000_000 + len(self.events)})))

    def _image(self, row: dict[str, Any]) -> dict[str, Any]:
        return row if self.value == "v2" else {k: v for k, v in row.items() if k != "note"}

    def write(self, op: str, row: dict[str, Any]) -> None:
        before = self.rows.get(row["id"])
        self.rows[row["id"]] = row
        self._event(op, self._image(before) if op == "u" and before else None,
                    self._image(row))

    def delete(self, row_id: int) -> None:
        before = self.rows.pop(row_id)
        self._event("d", self._image(before), None)
        self.events.append((wire(self.ids[self.key], self.schemas[self.key], {"id": row_id}),
                            None))


def account(i: int, balance: int, note: str | None = None) -> dict[str, Any]:
    return {"id": i, "owner": f"owner-{i}", "balance": balance, "note": note}


@pytest.fixture
def cdc_topic(stack: Any) -> dict[str, Any]:
    topic = f"cdc-avro-{uuid.uuid4().hex[:8]}"
    replay.create_topic(stack.kafka_bootstrap, topic, 1)
    url = stack.schema_registry_url
    schemas = {"v1": envelope(COLUMNS), "k1": key_schema(),
               # the column added later; its key schema differs by namespace only
               "v2": envelope([*COLUMNS, NOTE], f"{NAMESPACE}.v2"),
               "k2": key_schema(f"{NAMESPACE}.v2")}
    ids = {"v1": register(url, f"{topic}-value", json.dumps(schemas["v1"])),
           "k1": register(url, f"{topic}-key", json.dumps(schemas["k1"])),
           "v2": register(url, f"{topic}-v2-value", json.dumps(schemas["v2"])),
           "k2": register(url, f"{topic}-v2-key", json.dumps(schemas["k2"]))}
    table = Table(ids, schemas)
    for i in range(1, 31):
        table.write("r", account(i, i * 10))
    for i in range(31, 41):
        table.write("c", account(i, i * 10))
    for i in range(1, 11):
        table.write("u", account(i, i * 10 + 1))
    for i in range(5, 9):
        table.delete(i)
    truncate = (wire(ids["k1"], schemas["k1"], {"id": 1}), wire(ids["v1"], schemas["v1"], {
        "before": None, "after": None, "source": {"version": "v", "lsn": None}, "op": "t",
        "ts_ms": None}))
    bad_key = (b'{"id": 9}', None)
    table.events += [truncate, bad_key]
    table.value, table.key = "v2", "k2"
    for i in range(41, 46):
        table.write("c", account(i, i * 10, note=f"new-{i}"))
    table.write("u", account(2, 99, note="moved"))
    table.delete(41)
    table.delete(3)
    producer = Producer({"bootstrap.servers": stack.kafka_bootstrap, "enable.idempotence": True})
    for key, value in table.events:
        producer.produce(topic, key=key, value=value, partition=0)
    assert producer.flush(30) == 0
    return {"topic": topic, "rows": table.rows, "ids": ids, "bad": 2}


def test_debezium_avro_changes_mirror_the_table_through_a_new_column_and_bad_events(
        stack: Any, schema: str, cdc_topic: dict[str, Any], tmp_path: Path) -> None:
    config = {
        "view": "it/cdc-avro", "revision": "r1",
        "source": {"bootstrapServers": stack.kafka_bootstrap, "topics": [cdc_topic["topic"]],
                   "format": "debezium", "schema": ROW_DDL,
                   "avro": {"readerSchema": json.dumps(READER)}, "maxOffsetsPerTrigger": 40,
                   "badRecords": {"policy": "skip"}},
        "transform": {"sql": SQL},
        "sink": {"table": "accounts__r1", "schema": schema, "primaryKey": ["id"]},
        "checkpointLocation": str(tmp_path / "ckpt"),
        "trigger": {"availableNow": True},
        "secrets": {"sink": "views-db", "registry": "registry"},
    }
    done = submit(stack, config, timeout=1500, conf=mounted_secrets(stack, tmp_path / "secrets"))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    with psycopg.connect(stack.pg_dsn) as conn:
        index = {r[0]: {"id": r[0], "owner": r[1], "balance": r[2], "note": r[3]}
                 for r in conn.execute(sql.SQL("SELECT id, owner, balance, note FROM {}").format(
                     sql.Identifier(schema, "accounts__r1")))}
        bad = conn.execute(sql.SQL("SELECT sum(bad_records) FROM {} WHERE revision = 'r1'")
                           .format(sql.Identifier(schema, "dv_ledger"))).fetchone()
    assert index == cdc_topic["rows"]
    assert bad is not None and bad[0] == cdc_topic["bad"]  # counted, as skip does
    ids = cdc_topic["ids"]
    for role, name in (("value", "v2"), ("key", "k2")):
        assert (f"{role} schema id {ids[name]} met in the log: decoded") in done.stdout, (
            done.stdout[-3000:])
