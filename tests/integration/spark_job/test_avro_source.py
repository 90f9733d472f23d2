"""Avro in the Confluent wire format on a whole run: real Kafka, schema registry, PySpark
(spark-submit with spark-avro) and PostgreSQL.

Producers moved through three compatible writer schemas (v2 added `channel` with a default
and dropped `coupon`; v3 widened `amount` from int to long), all registered under the
topic's value subject before the job starts. A fourth writer, registered under another
subject (as a record-name strategy would), is met only mid-replay: the job must learn it
and restart its query from the checkpoint, losing nothing. And one record of each bad kind:
not the wire format, an id the registry does not have, a writer whose `amount` is a string
(not resolvable to the reader's long), bytes cut short.

The index is compared with this test's own recomputation: each record decoded with
`fastavro` (its own implementation of Avro's resolution rules), never with Spark.
"""

from __future__ import annotations

import io
import json
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import fastavro
import psycopg
import pytest
from confluent_kafka import Consumer, Producer
from psycopg import sql

from dvstack.testing import replay
from dvstack.testing.schema_registry_client import register
from support.avro_orders import BAD_WRITER, GIFT, W1, W2, W3, order_record, wire
from support.spark_job.job_submit import mounted_secrets, submit

pytestmark = pytest.mark.integration


LATE = order_record(*W3["fields"], GIFT)
READER = W3
ROW_DDL = "`order_id` STRING, `customer_id` STRING, `amount` BIGINT, `channel` STRING"
SQL = ("SELECT customer_id, count(*) AS orders, sum(amount) AS revenue, "
       "max(channel) AS channel FROM events WHERE NOT _kafka_tombstone GROUP BY customer_id")
MISSING_ID = 2_000_000_000


def orders(n: int, start: int, version: int) -> list[dict[str, Any]]:
    out = []
    for i in range(start, start + n):
        value: dict[str, Any] = {"order_id": f"o{i}", "customer_id": f"c{i % 7}",
                                 "amount": (i % 50) + 1}
        if version == 1:
            value["coupon"] = "SAVE" if i % 3 == 0 else None
        else:
            value["channel"] = ("app", "web", "shop")[i % 3]
        if version == 3:
            value["amount"] += 3_000_000_000  # beyond int: only v3 writes it
        out.append(value)
    return out


@pytest.fixture
def avro_topic(stack: Any) -> dict[str, Any]:
    topic = f"avro-{uuid.uuid4().hex[:8]}"
    replay.create_topic(stack.kafka_bootstrap, topic, 1)
    url = stack.schema_registry_url
    ids = {name: register(url, f"{topic}-value", json.dumps(schema))
           for name, schema in (("w1", W1), ("w2", W2), ("w3", W3))}
    ids["late"] = register(url, f"shop.Order-{topic}", json.dumps(LATE))
    ids["bad_writer"] = register(url, f"{topic}-elsewhere", json.dumps(BAD_WRITER))
    good: list[tuple[bytes, int, dict[str, Any]]] = []  # (value, id, writer values)
    for version, (name, schema) in enumerate((("w1", W1), ("w2", W2), ("w3", W3)), start=1):
        good += [(wire(ids[name], schema, v), ids[name], v)
                 for v in orders(40, 100 * version, version)]
    late = [{**v, "gift": True} for v in orders(20, 900, 3)]
    good += [(wire(ids["late"], LATE, v), ids["late"], v) for v in late]
    cut = wire(ids["w2"], W2, orders(1, 990, 2)[0])
    bad = {
        "not wire": (b'{"order_id": "j1"}', "value is not Avro in the Confluent wire format"),
        "missing id": (wire(MISSING_ID, W3, orders(1, 991, 3)[0]),
                       f"value schema id {MISSING_ID} is not in the schema registry"),
        "bad writer": (wire(ids["bad_writer"], BAD_WRITER,
                            {"order_id": "s1", "customer_id": "c1", "amount": "lots"}),
                       f"writer schema id {ids['bad_writer']} cannot be resolved to the reader "
                       "schema: field 'amount'"),
        "cut short": (cut[:len(cut) - 4],
                      f"value does not decode with writer schema id {ids['w2']}"),
    }
    values = [v for v, _, _ in good[:100]] + [v for v, _ in bad.values()] + [
        v for v, _, _ in good[100:]]
    producer = Producer({"bootstrap.servers": stack.kafka_bootstrap, "enable.idempotence": True})
    for n, value in enumerate(values):
        producer.produce(topic, key=f"k{n}".encode(), value=value, partition=0)
    assert producer.flush(30) == 0
    return {"topic": topic, "ids": ids, "good": good, "bad": bad}


def expected_index(good: list[tuple[bytes, int, dict[str, Any]]],
                   ids: dict[str, int]) -> list[tuple[Any, ...]]:
    """Each record read back by fastavro with its writer's schema resolved to the reader's."""
    writers = {ids["w1"]: W1, ids["w2"]: W2, ids["w3"]: W3, ids["late"]: LATE}
    reader = fastavro.parse_schema(READER)
    totals: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for value, schema_id, _ in good:
        decoded = fastavro.schemaless_reader(
            io.BytesIO(value[5:]), fastavro.parse_schema(writers[schema_id]), reader)
        totals[decoded["customer_id"]].append(decoded)
    return sorted((c, len(rows), sum(r["amount"] for r in rows), max(r["channel"] for r in rows))
                  for c, rows in totals.items())


def run_job(stack: Any, tmp_path: Path, topic: str, schema: str,
            bad_records: dict[str, str]) -> Any:
    config = {
        "view": "it/avro", "revision": "r1",
        "source": {"bootstrapServers": stack.kafka_bootstrap, "topics": [topic],
                   "format": "avro", "schema": ROW_DDL, "avro": {"readerSchema": json.dumps(READER)},
                   "maxOffsetsPerTrigger": 50, "badRecords": bad_records},
        "transform": {"sql": SQL},
        "sink": {"table": "orders__r1", "schema": schema, "primaryKey": ["customer_id"]},
        "checkpointLocation": str(tmp_path / "ckpt"),
        "trigger": {"availableNow": True},
        "secrets": {"sink": "views-db", "registry": "registry"},
    }
    return submit(stack, config, timeout=1500,
                  conf=mounted_secrets(stack, tmp_path / "secrets"))


def index_rows(stack: Any, schema: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(stack.pg_dsn) as conn:
        return sorted((r[0], int(r[1]), int(r[2]), r[3]) for r in conn.execute(
            sql.SQL("SELECT customer_id, orders, revenue, channel FROM {}").format(
                sql.Identifier(schema, "orders__r1"))))


def test_three_writer_versions_a_late_writer_and_each_bad_kind(
        stack: Any, schema: str, avro_topic: dict[str, Any], tmp_path: Path) -> None:
    topic, bad = avro_topic["topic"], avro_topic["bad"]
    dead = f"{topic}-dead"
    replay.create_topic(stack.kafka_bootstrap, dead, 1)
    done = run_job(stack, tmp_path, topic, schema,
                   {"policy": "deadLetter", "deadLetterTopic": dead})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert index_rows(stack, schema) == expected_index(avro_topic["good"], avro_topic["ids"])
    late = avro_topic["ids"]["late"]
    assert (f"value schema id {late} met in the log: decoded; restarting the query from its "
            "checkpoint") in done.stdout, done.stdout[-3000:]

    consumer = Consumer({"bootstrap.servers": stack.kafka_bootstrap, "group.id": dead,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([dead])
    letters: list[Any] = []
    try:
        for _ in range(60):
            if len(letters) >= len(bad):
                break
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                letters.append(message)
    finally:
        consumer.close()
    causes = {dict((k, v.decode()) for k, v in m.headers())["dv.cause"]: m.value()
              for m in letters}
    assert len(letters) == len(bad), sorted(causes)
    for kind, (value, words) in bad.items():
        matches = [c for c in causes if c.startswith(words)]
        assert matches, (kind, words, sorted(causes))
        assert causes[matches[0]] == value, kind


def test_fail_names_the_record_and_its_schema_id(stack: Any, schema: str,
                                                 avro_topic: dict[str, Any],
                                                 tmp_path: Path) -> None:
    failed = run_job(stack, tmp_path, avro_topic["topic"], schema, {"policy": "fail"})
    assert failed.returncode == 1, failed.stdout[-3000:] + failed.stderr[-3000:]
    last = [line for line in failed.stdout.splitlines() if line.startswith("dvjob: error:")]
    assert last, failed.stdout[-3000:]
    assert last[-1].startswith(f"dvjob: error: refused record {avro_topic['topic']}/0@100: "
                               "value is not Avro in the Confluent wire format"), last[-1]
