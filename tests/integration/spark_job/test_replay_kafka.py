"""The job itself (spark-submit, availableNow) from a real Kafka topic into real PostgreSQL.

Covers what only a whole run shows: Debezium change events mirrored into an
index (upserts, deletes by `before`, tombstones by key), an unmappable event
failing the run with a line naming the record, a checkpoint that outlived
its index being moved aside so the revision replays from offset 0, and where a
replay began when retention had deleted the topic's first records.
"""

from __future__ import annotations

import json
import os
import signal
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from psycopg import sql

from derived_views.adapters.postgres.progress import running_batches
from derived_views.adapters.postgres.sink import ledger_positions
from dvjob.batch_progress import PROGRESS_CONF
from dvjob.first_batch import FIRST_BATCH_CONF
from dvjob.placement import IN_DRIVER_CONF
from dvstack.testing import replay
from dvstack.testing.waiting import wait_for
from support.spark_job.job_submit import job_config, produce, rows, run_job, start

pytestmark = pytest.mark.integration

MIRROR_SQL = "SELECT id, name, _debezium_deleted AS _dv_deleted FROM events"


def change(op: str, before: dict[str, Any] | None, after: dict[str, Any] | None,
           wrapped: bool = False) -> str:
    event = {"before": before, "after": after, "op": op, "ts_ms": 1}
    return json.dumps({"schema": {"type": "struct"}, "payload": event} if wrapped else event)


def test_debezium_events_mirror_the_table(stack: Any, schema: str, tmp_path: Path) -> None:
    topic = f"dbz-{uuid.uuid4().hex[:8]}"
    replay.create_topic(stack.kafka_bootstrap, topic, 1)
    produce(stack.kafka_bootstrap, topic, [
        ('{"id":1}', change("r", None, {"id": 1, "name": "ada"})),
        ('{"id":2}', change("r", None, {"id": 2, "name": "bob"})),
        ('{"id":3}', change("c", None, {"id": 3, "name": "cy"}, wrapped=True)),
        ('{"id":1}', change("u", {"id": 1, "name": "ada"}, {"id": 1, "name": "ada l."})),
        ('{"id":2}', change("d", {"id": 2, "name": None}, None)),
        ('{"id":2}', None),
        ('{"id":3}', None),                      # a tombstone alone deletes by key too
        ('{"id":4}', change("c", None, {"id": 4, "name": "dee"})),
        ('{"id":4}', change("d", {"id": 4, "name": "dee"}, None)),
        ('{"id":4}', change("c", None, {"id": 4, "name": "dee again"})),
    ])
    done = run_job(stack, topic=topic, schema=schema, fmt="debezium", row_ddl="id INT, name STRING",
                   sql_text=MIRROR_SQL, key=["id"], checkpoint=tmp_path / "ckpt")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert rows(stack, schema, "mirror__r1") == [(1, "ada l."), (4, "dee again")]


def test_an_unmappable_op_fails_the_run_naming_the_record(stack: Any, schema: str,
                                                          tmp_path: Path) -> None:
    topic = f"dbz-{uuid.uuid4().hex[:8]}"
    replay.create_topic(stack.kafka_bootstrap, topic, 1)
    produce(stack.kafka_bootstrap, topic, [
        ('{"id":1}', change("c", None, {"id": 1, "name": "ada"})),
        ('{"id":1}', json.dumps({"op": "t", "ts_ms": 2})),
    ])
    failed = run_job(stack, topic=topic, schema=schema, fmt="debezium",
                     row_ddl="id INT, name STRING", sql_text=MIRROR_SQL, key=["id"],
                     checkpoint=tmp_path / "ckpt")
    assert failed.returncode == 1
    last = [line for line in failed.stdout.splitlines() if line.startswith("dvjob: error:")]
    assert last and f"refused record {topic}/0@1: Debezium op 't'" in last[-1]
    # the batch failed as a whole: nothing before the bad record was written either
    assert rows(stack, schema, "mirror__r1") == []


def test_a_checkpoint_that_outlived_its_index_is_moved_aside(stack: Any, schema: str,
                                                             tmp_path: Path) -> None:
    topic = f"json-{uuid.uuid4().hex[:8]}"
    replay.create_topic(stack.kafka_bootstrap, topic, 1)
    produce(stack.kafka_bootstrap, topic, [(f"k{i}", json.dumps({"id": i, "name": f"n{i}"}))
                                           for i in range(1, 6)])
    checkpoint = tmp_path / "ckpt"
    kwargs: dict[str, Any] = dict(topic=topic, schema=schema, fmt="json",
                                  row_ddl="id INT, name STRING",
                                  sql_text="SELECT id, name FROM events", key=["id"],
                                  checkpoint=checkpoint)
    first = run_job(stack, **kwargs)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert len(rows(stack, schema, "mirror__r1")) == 5
    # The database loses the index and its ledger rows; the checkpoint survives.
    with psycopg.connect(stack.pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(schema, "mirror__r1")))
        conn.execute(sql.SQL("DELETE FROM {} WHERE revision = 'r1'").format(
            sql.Identifier(schema, "dv_ledger")))
    second = run_job(stack, **kwargs)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert "has committed batches but the ledger has none for revision r1" in second.stdout
    assert [r[0] for r in rows(stack, schema, "mirror__r1")] == [1, 2, 3, 4, 5]
    assert [p.name.startswith("ckpt.stale-") for p in tmp_path.iterdir()].count(True) == 1
    # A third run resumes the fresh checkpoint normally: nothing moved, nothing duplicated.
    third = run_job(stack, **kwargs)
    assert third.returncode == 0 and "moved it" not in third.stdout
    assert [p.name.startswith("ckpt.stale-") for p in tmp_path.iterdir()].count(True) == 1


def ledger_batches(stack: Any, schema: str, revision: str) -> list[dict[str, int]]:
    """Each committed batch's end offsets of partition 0..n, summed over partitions."""
    with psycopg.connect(stack.pg_dsn) as conn:
        found = conn.execute(sql.SQL("SELECT end_offsets FROM {} WHERE revision = %s ORDER BY "
                                     "batch_id").format(sql.Identifier(schema, "dv_ledger")),
                             (revision,)).fetchall()
    return [{p: int(o) for parts in r[0].values() for p, o in parts.items()} for r in found]


def delete_before(bootstrap: str, topic: str, starts: dict[int, int]) -> dict[int, int]:
    """Delete each partition's records below the given offset, as retention does; return the
    log start offsets Kafka reports afterwards."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_records(
            [TopicPartition(topic, p, o) for p, o in starts.items()]).values():
        future.result(timeout=30)
    listed = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.earliest() for p in starts})
    return {tp.partition: future.result(timeout=30).offset for tp, future in listed.items()}


def ledger_history_starts(stack: Any, schema: str, revision: str) -> list[Any]:
    with psycopg.connect(stack.pg_dsn) as conn:
        return [r[0] for r in conn.execute(sql.SQL(
            "SELECT history_start FROM {} WHERE revision = %s ORDER BY batch_id").format(
                sql.Identifier(schema, "dv_ledger")), (revision,))]


def test_a_first_replay_commits_a_bounded_first_batch_then_the_rest(
        stack: Any, schema: str, tmp_path: Path) -> None:
    """With nothing committed, the first batch reads at most the first-batch bound (set low
    here by its Spark configuration); the query then restarts with the view's own bound (none:
    everything left in one batch). Exactly once across the restart.

    The topic's first records are gone before the job starts (delete-records, as retention
    does): every ledger row records where the replay began, Kafka's log start offsets then,
    unchanged by the restart, and the operator's adapter reads it back."""
    topic = f"json-{uuid.uuid4().hex[:8]}"
    replay.create_topic(stack.kafka_bootstrap, topic, 2)
    produce(stack.kafka_bootstrap, topic, [(f"k{i % 50}", json.dumps({"id": i % 50, "n": 1}))
                                           for i in range(3000)])
    producer = Producer({"bootstrap.servers": stack.kafka_bootstrap})
    for i in range(20):  # n = 0: partition 1 changes no total
        producer.produce(topic, key=f"k{i}", value=json.dumps({"id": i, "n": 0}), partition=1)
    assert producer.flush(30) == 0
    log_starts = delete_before(stack.kafka_bootstrap, topic, {0: 100, 1: 5})
    assert log_starts == {0: 100, 1: 5}
    config = job_config(stack, topic=topic, schema=schema, fmt="json", row_ddl="id INT, n INT",
                        sql_text="SELECT id, sum(n) AS total FROM events GROUP BY id",
                        key=["id"], checkpoint=tmp_path / "ckpt")
    config["trigger"] = {"processingTimeSeconds": 1}
    log = tmp_path / "driver.log"
    # submitted to local[1], told to run its tasks in its driver with two cores: its own
    # master then, as on a cluster, where it is submitted to Kubernetes
    job = start(stack, config, {FIRST_BATCH_CONF: "500", IN_DRIVER_CONF: "true",
                                "spark.driver.cores": "2"}, log)
    try:
        wait_for(lambda: job.poll() is not None or sum(
            (ledger_batches(stack, schema, "r1") or [{}])[-1].values()) == 3000 + 20,
            timeout=300, interval=1, what="the job to commit all 3,020 records")
        assert job.poll() is None, log.read_text()[-3000:]
    finally:
        os.killpg(job.pid, signal.SIGTERM)
        job.wait(timeout=60)
    batches = ledger_batches(stack, schema, "r1")
    assert len(batches) == 2 and batches[-1] == {"0": 3000, "1": 20}, batches
    assert sum(batches[0][str(p)] - start for p, start in log_starts.items()) <= 500, batches
    assert "first batch of at most 500 offsets done" in log.read_text()
    assert "dvjob: running tasks in the driver (local[2,4])" in log.read_text()
    assert rows(stack, schema, "mirror__r1") == [(i, 58) for i in range(50)]  # 2,900 left
    history = {topic: {str(p): start for p, start in log_starts.items()}}
    assert ledger_history_starts(stack, schema, "r1") == [history, history]
    assert log.read_text().count("dvjob: history start {") == 1  # read once per process
    with psycopg.connect(stack.pg_dsn) as conn:
        head = ledger_positions(conn, schema, ["r1"])["r1"]
    assert head.history_start == {(topic, p): start for p, start in log_starts.items()}


def test_a_running_batch_reports_how_far_it_has_read(stack: Any, schema: str,
                                                     tmp_path: Path) -> None:
    """One batch of 200,000 records (no first batch of its own): while it runs, the job's
    reports, read through the operator's own adapter, show a count that grows, stays within
    the batch, and comes before the batch's ledger row."""
    total = 200_000
    topic = f"json-{uuid.uuid4().hex[:8]}"
    replay.create_topic(stack.kafka_bootstrap, topic, 1)
    for chunk in range(0, total, 50_000):  # within the producer's queue
        produce(stack.kafka_bootstrap, topic, [(f"k{i % 50}", json.dumps({"id": i % 50, "n": 1}))
                                               for i in range(chunk, chunk + 50_000)])
    config = job_config(stack, topic=topic, schema=schema, fmt="json", row_ddl="id INT, n INT",
                        sql_text="SELECT id, sum(n) AS total FROM events GROUP BY id",
                        key=["id"], checkpoint=tmp_path / "ckpt")
    log = tmp_path / "driver.log"
    job = start(stack, config, {FIRST_BATCH_CONF: "0", PROGRESS_CONF: "0.5",
                                "spark.executor.heartbeatInterval": "1s"}, log)
    seen: list[tuple[int, int, bool]] = []  # (batch, records read, ledger had the batch)

    def look() -> bool:
        with psycopg.connect(stack.pg_dsn, autocommit=True) as conn:
            committed = bool(ledger_batches(stack, schema, "r1"))
            report = running_batches(conn, schema, ["r1"]).get("r1")
        if report is not None and (not seen or seen[-1][:2] != (report.batch_id,
                                                                report.records_read)):
            seen.append((report.batch_id, report.records_read, committed))
        return job.poll() is not None

    try:
        wait_for(look, timeout=300, interval=0.3, what="the job to replay 200,000 records")
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGTERM)
        job.wait(timeout=60)
    assert job.returncode == 0, log.read_text()[-3000:]
    assert ledger_batches(stack, schema, "r1") == [{"0": total}]
    assert rows(stack, schema, "mirror__r1") == [(i, total // 50) for i in range(50)]
    before_commit = [read for batch, read, committed in seen if batch == 0 and not committed]
    assert any(0 < read < total for read in before_commit), seen
    assert before_commit == sorted(before_commit), seen
    assert all(read <= total for _, read, _ in seen), seen
