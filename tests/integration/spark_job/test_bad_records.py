"""The bad-record policy on a whole run: real Kafka, PySpark (spark-submit) and PostgreSQL.

One topic holds good orders and one record of each bad kind (not JSON, a field
of the wrong type, a NULL primary key after the transform, a NUL character in
text), spread over several micro-batches.  Under `fail` the run stops naming
the first one; under `skip` and `deadLetter` the index equals this test's own
sum of the good orders, the ledger counts the four, and the dead-letter topic
holds them with their original bytes and headers naming cause and origin.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import psycopg
import pytest
from confluent_kafka import Consumer, Producer
from psycopg import sql

from dvstack.testing import replay
from support.spark_job.job_submit import submit

pytestmark = pytest.mark.integration

ROW_DDL = "order_id STRING, customer_id STRING, amount DOUBLE"
SQL = ("SELECT customer_id, count(*) AS orders, sum(amount) AS revenue FROM events "
       "WHERE NOT _kafka_tombstone GROUP BY customer_id")


def order(order_id: str, customer: str | None, amount: Any) -> str:
    return json.dumps({"order_id": order_id, "customer_id": customer, "amount": amount})


GOOD = [("o1", "c1", 10.0), ("o2", "c2", 2.5), ("o3", "c1", 4.0), ("o4", "c3", 1.0),
        ("o5", "c2", 7.5), ("o6", "c1", 0.5), ("o7", "c3", 3.0)]
BAD = {  # offset in the topic -> (record value, the cause's words)
    2: ("not json {", "value is not a JSON object"),
    4: (order("b2", "c1", "lots"), "field 'amount' does not match source.schema type DOUBLE"),
    6: (order("b3", "c\u0000x", 5.0), "field 'customer_id' contains a NUL character"),
    9: (order("b4", None, 100.0), "NULL in primary-key column 'customer_id'"),
}


def records() -> list[tuple[str, str]]:
    """GOOD and BAD interleaved: BAD at its offsets, keyed by order id."""
    good = iter(GOOD)
    out: list[tuple[str, str]] = []
    for offset in range(len(GOOD) + len(BAD)):
        if offset in BAD:
            out.append((f"bad-{offset}", BAD[offset][0]))
        else:
            oid, customer, amount = next(good)
            out.append((oid, order(oid, customer, amount)))
    return out


def expected_index() -> list[tuple[str, int, float]]:
    """The test's own recomputation over the good records only."""
    totals: dict[str, list[float]] = defaultdict(list)
    for _, customer, amount in GOOD:
        totals[customer].append(amount)
    return sorted((c, len(a), sum(a)) for c, a in totals.items())


@pytest.fixture
def topic(stack: Any) -> str:
    name = f"bad-{uuid.uuid4().hex[:8]}"
    replay.create_topic(stack.kafka_bootstrap, name, 1)
    producer = Producer({"bootstrap.servers": stack.kafka_bootstrap, "enable.idempotence": True})
    for key, value in records():
        producer.produce(name, key=key.encode(), value=value.encode(), partition=0,
                         headers=[("origin", b"test")])
    assert producer.flush(30) == 0
    return name


def run_job(stack: Any, *, topic: str, schema: str, checkpoint: Path,
            bad_records: dict[str, str]) -> subprocess.CompletedProcess[str]:
    config = {
        "view": "it/bad", "revision": "r1",
        "source": {"bootstrapServers": stack.kafka_bootstrap, "topics": [topic],
                   "schema": ROW_DDL, "maxOffsetsPerTrigger": 6, "badRecords": bad_records},
        "transform": {"sql": SQL},
        "sink": {"table": "orders__r1", "schema": schema, "primaryKey": ["customer_id"]},
        "checkpointLocation": str(checkpoint),
        "trigger": {"availableNow": True},
    }
    return submit(stack, config, timeout=1500)


def index_rows(stack: Any, schema: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(stack.pg_dsn) as conn:
        return sorted((r[0], int(r[1]), float(r[2])) for r in conn.execute(
            sql.SQL("SELECT customer_id, orders, revenue FROM {}").format(
                sql.Identifier(schema, "orders__r1"))))


def ledger_bad_records(stack: Any, schema: str) -> int:
    with psycopg.connect(stack.pg_dsn) as conn:
        found = conn.execute(sql.SQL("SELECT sum(bad_records) FROM {} WHERE revision = 'r1'")
                             .format(sql.Identifier(schema, "dv_ledger"))).fetchone()
    return int(found[0]) if found and found[0] is not None else 0


def test_fail_stops_at_the_first_bad_record_naming_it(stack: Any, schema: str, topic: str,
                                                     tmp_path: Path) -> None:
    failed = run_job(stack, topic=topic, schema=schema, checkpoint=tmp_path / "ckpt",
                     bad_records={"policy": "fail"})
    assert failed.returncode == 1, failed.stdout[-3000:] + failed.stderr[-3000:]
    last = [line for line in failed.stdout.splitlines() if line.startswith("dvjob: error:")]
    assert last, failed.stdout[-3000:]
    assert last[-1].startswith(f"dvjob: error: refused record {topic}/0@2: value is not a JSON "
                               "object; source.badRecords.policy is fail"), last[-1]


def test_skip_leaves_bad_records_out_and_counts_them(stack: Any, schema: str, topic: str,
                                                    tmp_path: Path) -> None:
    done = run_job(stack, topic=topic, schema=schema, checkpoint=tmp_path / "ckpt",
                   bad_records={"policy": "skip"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert index_rows(stack, schema) == expected_index()
    assert ledger_bad_records(stack, schema) == len(BAD)


def test_dead_letters_carry_original_bytes_and_cause(stack: Any, schema: str, topic: str,
                                                    tmp_path: Path) -> None:
    dead = f"{topic}-dead"
    replay.create_topic(stack.kafka_bootstrap, dead, 1)
    done = run_job(stack, topic=topic, schema=schema, checkpoint=tmp_path / "ckpt",
                   bad_records={"policy": "deadLetter", "deadLetterTopic": dead})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert index_rows(stack, schema) == expected_index()
    assert ledger_bad_records(stack, schema) == len(BAD)

    consumer = Consumer({"bootstrap.servers": stack.kafka_bootstrap, "group.id": dead,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([dead])
    letters = []
    try:
        deadline_polls = 60
        while len(letters) < len(BAD) and deadline_polls:
            message = consumer.poll(1.0)
            deadline_polls -= 1
            if message is not None and message.error() is None:
                letters.append(message)
    finally:
        consumer.close()
    assert len(letters) == len(BAD)
    by_cause = {}
    for letter in letters:
        headers = {k: v.decode() for k, v in letter.headers() or []}
        assert headers["dv.revision"] == "r1" and headers["dv.view"] == "it/bad"
        by_cause[headers["dv.cause"]] = (letter, headers)
    for offset, (value, cause) in BAD.items():
        matches = [c for c in by_cause if c.startswith(cause)]
        assert matches, (cause, sorted(by_cause))
        letter, headers = by_cause[matches[0]]
        if offset == 9:  # a NULL key exists only after the transform: the row, and its batch
            assert json.loads(letter.value())["customer_id"] is None
            assert headers["dv.source.offsets"].startswith(f"{topic}/0 [")
            continue
        assert letter.key() == f"bad-{offset}".encode() and letter.value() == value.encode()
        assert headers["origin"] == "test"
        assert (headers["dv.source.topic"], headers["dv.source.partition"],
                headers["dv.source.offset"]) == (topic, "0", str(offset))
