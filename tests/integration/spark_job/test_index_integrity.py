"""The job never writes into an index table that lost batches its ledger claims (real PostgreSQL).

Each ledger row records the OID of the table its batch went to. A table dropped
mid-life (ledger rows kept) is not re-created at start; a table dropped and
re-created is refused at start and before the next batch; TRUNCATE is refused
by a trigger. The last test runs the whole job (spark-submit, Kafka) twice
with the index dropped in between.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from dvjob.integrity import IndexLostError
from dvjob.sinks.postgres.sink import PostgresSink
from dvstack.testing import replay
from support.spark_job.job_submit import produce, rows, run_job
from support.spark_job.pg_sink_samples import (
    ORDERS,
    REVISION,
    TABLE,
    Connect,
    index_rows,
    make_sink,
    order,
    query,
)

pytestmark = pytest.mark.integration

OFFSETS_0 = {"orders": {"0": 2}}
OFFSETS_1 = {"orders": {"0": 4}}


def run(connect: Connect, statement: str, schema: str, table: str = TABLE) -> None:
    with connect() as conn:
        conn.execute(sql.SQL(statement).format(sql.Identifier(schema, table)))


def table_exists(connect: Connect, schema: str, table: str = TABLE) -> bool:
    return query(connect, "SELECT to_regclass(%s)", f'"{schema}"."{table}"')[0][0] is not None


def written(connect: Connect, schema: str) -> PostgresSink:
    sink = make_sink(connect, schema)
    sink.write_batch(0, [order("o1", "c1", "5.00"), order("o2", "c1", "7.00")], OFFSETS_0)
    return sink


def test_each_batch_records_the_oid_of_its_table(connect: Connect, schema: str) -> None:
    written(connect, schema)
    recorded = query(connect, sql.SQL("SELECT index_oid FROM {} WHERE revision = %s").format(
        sql.Identifier(schema, "dv_ledger")), REVISION)
    live = query(connect, "SELECT %s::regclass::oid", f'"{schema}"."{TABLE}"')
    assert recorded == live and live[0][0] is not None


def test_a_dropped_index_is_not_recreated_at_start(connect: Connect, schema: str) -> None:
    written(connect, schema)
    run(connect, "DROP TABLE {}", schema)
    with pytest.raises(IndexLostError) as refused:
        make_sink(connect, schema)  # the restarted job's start-up
    message = str(refused.value)
    assert f"index table {schema}.{TABLE} is missing but the ledger holds committed batches 0..0 " \
           f"of revision {REVISION}" in message
    assert "rebuilds the revision from offset 0" in message
    assert not table_exists(connect, schema)  # not re-created empty


def test_a_table_dropped_under_a_running_job_fails_its_next_batch(connect: Connect,
                                                                  schema: str) -> None:
    sink = written(connect, schema)
    run(connect, "DROP TABLE {}", schema)
    with pytest.raises(IndexLostError, match="is missing"):
        sink.write_batch(1, [order("o3", "c2", "1.00")], OFFSETS_1)
    assert len(query(connect, sql.SQL("SELECT * FROM {}").format(
        sql.Identifier(schema, "dv_ledger")))) == 1  # batch 1 was not recorded


def test_a_table_dropped_and_recreated_is_refused_at_start_and_per_batch(
        connect: Connect, schema: str) -> None:
    sink = written(connect, schema)
    run(connect, "DROP TABLE {}", schema)
    run(connect, "CREATE TABLE {} (order_id text PRIMARY KEY, customer_id text, "
                 "amount numeric(10,2))", schema)
    with pytest.raises(IndexLostError, match="dropped and re-created"):
        sink.write_batch(1, [order("o3", "c2", "1.00")], OFFSETS_1)
    with pytest.raises(IndexLostError, match="is not the table its batches were written to"):
        make_sink(connect, schema)
    assert index_rows(connect, schema) == []


def test_truncate_of_an_index_table_is_refused(connect: Connect, schema: str) -> None:
    written(connect, schema)
    with pytest.raises(psycopg.errors.RaiseException) as refused:
        run(connect, "TRUNCATE {}", schema)
    assert "TRUNCATE would empty it silently" in str(refused.value)
    assert [r[0] for r in index_rows(connect, schema)] == ["o1", "o2"]


def test_a_ledger_from_before_identities_gains_the_columns(connect: Connect, schema: str) -> None:
    with connect() as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        conn.execute(sql.SQL(
            "CREATE TABLE {} (revision text NOT NULL, batch_id bigint NOT NULL, end_offsets jsonb "
            "NOT NULL, rows_upserted bigint NOT NULL, rows_deleted bigint NOT NULL, committed_at "
            "timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (revision, batch_id))").format(
            sql.Identifier(schema, "dv_ledger")))
        conn.execute(sql.SQL("INSERT INTO {} VALUES ('old', 0, '{{}}', 0, 0, now())").format(
            sql.Identifier(schema, "dv_ledger")))
    sink = make_sink(connect, schema)
    sink.write_batch(0, [order("o1", "c1", "5.00")], OFFSETS_0, history_start={"orders": {"0": 0}})
    got = query(connect, sql.SQL("SELECT revision, index_oid IS NULL, history_start FROM {} "
                                 "ORDER BY 1").format(sql.Identifier(schema, "dv_ledger")))
    assert got == [(REVISION, False, {"orders": {"0": 0}}), ("old", True, None)]
    assert ORDERS.column_names == ("order_id", "customer_id", "amount")


def test_the_restarted_job_refuses_a_dropped_index(stack: Any, schema: str,
                                                   tmp_path: Path) -> None:
    topic = f"json-{uuid.uuid4().hex[:8]}"
    replay.create_topic(stack.kafka_bootstrap, topic, 1)
    produce(stack.kafka_bootstrap, topic, [(f"k{i}", json.dumps({"id": i, "name": f"n{i}"}))
                                           for i in range(1, 6)])
    kwargs: dict[str, Any] = dict(topic=topic, schema=schema, fmt="json",
                                  row_ddl="id INT, name STRING",
                                  sql_text="SELECT id, name FROM events", key=["id"],
                                  checkpoint=tmp_path / "ckpt")
    first = run_job(stack, **kwargs)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert len(rows(stack, schema, "mirror__r1")) == 5
    with psycopg.connect(stack.pg_dsn, autocommit=True) as conn:  # the ledger keeps its rows
        conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(schema, "mirror__r1")))
    produce(stack.kafka_bootstrap, topic, [("k6", json.dumps({"id": 6, "name": "n6"}))])
    second = run_job(stack, **kwargs)
    assert second.returncode == 1
    last = [line for line in second.stdout.splitlines() if line.startswith("dvjob: error:")]
    assert last and f"index table {schema}.mirror__r1 is missing but the ledger holds " \
                    "committed batches 0..0 of revision r1" in last[-1]
    assert "Traceback" not in second.stdout + second.stderr
    assert not table_exists(lambda: psycopg.connect(stack.pg_dsn), schema, "mirror__r1")
