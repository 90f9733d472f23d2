"""Debezium's JDBC sink connector writing the mirror's rows: what a user runs instead of a view.

Issue 50 asks for the mirror's ceiling beside Spark's batch job: the tool a team would
otherwise reach for to keep a table in step with a topic, Debezium's JDBC sink on a Kafka
Connect worker (the stack's, `dvstack.services.kafka_connect`), upserting into the same table
(the job's own DDL for the mirror's index).

The sink needs records with a schema, and the bench's topic holds bare JSON, as the view
reads it. So the same orders are written to a twin topic (same keys, so the same partitions)
in the envelope the worker's JSON converter expects (`schemas.enable`, the converter's
default): the same fields, the order time as Connect's `Timestamp`, so it lands in the
index's `timestamptz` column as the view's does. The connector runs one task per partition
and batches of BATCH_SIZE rows (pgjdbc rewrites them into multi-row statements): the
strongest settings a user would choose, not its defaults.

The rate: events over the time from the connector's creation to the committed offsets of its
consumer group reaching the topic's end (the worker commits every second), and a steady rate
from the first commit on, as the replay's is from its first batch on. The table's rows are
counted at the end, so a sink that dropped records would show.
"""

from __future__ import annotations

import calendar
import json
import sys
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import psycopg
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from dvstack.services import kafka_connect
from dvstack.testing import replay
from dvstack.testing.waiting import wait_for

sys.path.insert(0, str(Path(__file__).resolve().parent))

from spark_batch import jdbc_target

TIMESTAMP = "org.apache.kafka.connect.data.Timestamp"
"""Connect's logical type for an instant: epoch milliseconds on the wire."""
BATCH_SIZE = 10_000
"""Rows per JDBC batch (the connector's default is 500)."""
ENVELOPE_SCHEMA = {
    "type": "struct", "name": "order", "optional": False,
    "fields": [
        {"field": "order_id", "type": "string", "optional": False},
        {"field": "customer_id", "type": "string", "optional": True},
        {"field": "amount", "type": "double", "optional": True},
        {"field": "ts", "type": "int64", "name": TIMESTAMP, "version": 1, "optional": True},
    ],
}
"""The mirror's columns (benchmarks/replay_rate.MIRROR_OUTPUT) as a Connect schema."""
_SCHEMA_JSON = json.dumps(ENVELOPE_SCHEMA)


def epoch_ms(ts: str) -> int:
    """An order's `ts` (UTC, `YYYY-MM-DDTHH:MM:SS`, as replay.iter_orders writes it) in epoch
    milliseconds."""
    return calendar.timegm(time.strptime(ts, "%Y-%m-%dT%H:%M:%S")) * 1000


def envelope(order: Mapping[str, Any]) -> bytes:
    """One order as the JSON converter reads a record with a schema."""
    payload = json.dumps({"order_id": order["order_id"], "customer_id": order["customer_id"],
                          "amount": order["amount"], "ts": epoch_ms(str(order["ts"]))})
    return f'{{"schema":{_SCHEMA_JSON},"payload":{payload}}}'.encode()


def connector_config(*, topic: str, table: str, dsn: str, tasks: int) -> dict[str, str]:
    """The sink upserting the topic into `table` by order_id, into a table made beforehand
    (no schema evolution: the index's DDL is the job's); keys are the producer's plain
    strings, not JSON."""
    url, props = jdbc_target(dsn)
    return {
        "connector.class": kafka_connect.JDBC_SINK_CONNECTOR,
        "tasks.max": str(tasks),
        "topics": topic,
        "connection.url": url,
        "connection.username": props["user"],
        "connection.password": props["password"],
        "insert.mode": "upsert",
        "primary.key.mode": "record_value",
        "primary.key.fields": "order_id",
        "schema.evolution": "none",
        "collection.name.format": table,
        "batch.size": str(BATCH_SIZE),
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "true",
    }


def rates(events_n: int, started: float, samples: list[tuple[float, int]]) -> dict[str, Any]:
    """The sink's rates from (time, committed records) samples ending at `events_n`: over the
    whole run, and from its first commit on (None when that first commit was the last)."""
    done_at = next(t for t, n in samples if n >= events_n)
    first_at, first_n = next((t, n) for t, n in samples if n > 0)
    steady = ((events_n - first_n) / (done_at - first_at)
              if done_at > first_at and first_n < events_n else None)
    return {"jdbc_sink_events_per_s": round(steady) if steady else None,
            "jdbc_sink_events_per_s_including_startup": round(events_n / (done_at - started)),
            "jdbc_sink_seconds": round(done_at - started, 1)}


def _committed(consumer: Consumer, topic: str, partitions: int) -> int:
    found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)],
                               timeout=10)
    return sum(max(tp.offset, 0) for tp in found)


def delete_group(bootstrap: str, group: str) -> None:
    """Remove the sink's consumer group: Connect keeps it after its connector is deleted, and
    each run names a new one. Its members leave a moment after the connector's deletion."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **replay.QUIET})

    def gone() -> bool:
        try:
            admin.delete_consumer_groups([group], request_timeout=10)[group].result()
        except KafkaException as exc:
            code = exc.args[0].code()
            if code == KafkaError.NON_EMPTY_GROUP:
                return False
            if code != KafkaError.GROUP_ID_NOT_FOUND:
                raise
        return True

    wait_for(gone, timeout=120, interval=1, what=f"consumer group {group} to have no members")


def sink_rate(info: Mapping[str, Any], orders: list[dict[str, Any]], layout_ddl: str,
              table: str, partitions: int) -> dict[str, Any]:
    """The JDBC sink's rate over the orders (written to a twin topic first, untimed) into
    `table`, made by `layout_ddl`; the table, topic, connector and its consumer group are
    removed afterwards."""
    bootstrap, dsn, connect = info["kafka_bootstrap"], info["pg_dsn"], info["kafka_connect"]
    run = uuid.uuid4().hex[:8]
    topic, name = f"bench-connect-{run}", f"bench-jdbc-sink-{run}"
    replay.create_topic(bootstrap, topic, partitions)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"connect-{name}",
                         "enable.auto.commit": False, **replay.QUIET})
    try:
        replay.produce(bootstrap, topic, orders, encode=envelope)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(layout_ddl)
        samples: list[tuple[float, int]] = []

        def caught_up() -> bool:
            samples.append((time.monotonic(), _committed(consumer, topic, partitions)))
            status = kafka_connect.connector_status(connect, name) or {}
            failed = [t for t in status.get("tasks", []) if t.get("state") == "FAILED"]
            if failed:
                raise RuntimeError(f"the JDBC sink failed: {failed[0].get('trace', '')[:2000]}")
            return samples[-1][1] >= len(orders)

        started = time.monotonic()
        kafka_connect.put_connector(connect, name, connector_config(
            topic=topic, table=table, dsn=dsn, tasks=partitions))
        wait_for(caught_up, timeout=3600, interval=0.5,
                 what="the JDBC sink to commit the whole topic")
        with psycopg.connect(dsn) as conn:
            row = conn.execute(f'SELECT count(*) FROM "public"."{table}"').fetchone()
        return {**rates(len(orders), started, samples), "jdbc_sink_tasks": partitions,
                "jdbc_sink_batch_size": BATCH_SIZE,
                "jdbc_sink_output_rows": row[0] if row else None}
    finally:
        consumer.close()
        kafka_connect.delete_connector(connect, name)
        delete_group(bootstrap, f"connect-{name}")
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP TABLE IF EXISTS "public"."{table}"')
        replay.delete_topic(bootstrap, topic)
