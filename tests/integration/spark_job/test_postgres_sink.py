"""The Spark job's PostgreSQL sink against a real PostgreSQL: one transaction per batch.

Each test works in a schema of its own, created by the sink and dropped after.
The last tests drive the foreachBatch writer itself with a local SparkSession,
a static DataFrame and an offset log laid out as Spark writes it.
"""

from __future__ import annotations

import os
import sys
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from pyspark.sql import SparkSession
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from dvjob.batch_writer import BatchWriter
from dvjob.errors import JobError, NullKeyError
from dvjob.offsets import OffsetLogError
from dvjob.sinks.contract import FrameRows, IndexOwnedElsewhereError, LedgerMismatchError
from dvjob.sinks.postgres.sink import (
    Connect,
    IndexTableMismatchError,
    PostgresSink,
    index_ddl,
    owner_comment,
    stage_prefix,
    stage_table_ddl,
)
from dvjob.sinks.postgres.stage import PartitionCopier
from dvjob.sinks.schema import SinkColumn, TableLayout, table_layout
from dvstack.testing.waiting import wait_for
from support.spark_job.pg_sink_samples import (
    ORDERS,
    REVISION,
    TABLE,
    Row,
    index_rows,
    ledger_rows,
    make_sink,
    order,
    query,
)

pytestmark = pytest.mark.integration

def must_not_be_read() -> Iterator[Row]:
    raise AssertionError("the rows of a skipped batch were read")
    yield ()  # pragma: no cover - makes this a generator


def test_tables_are_created_with_mapped_types_and_key(connect: Connect, schema: str) -> None:
    output = StructType([StructField(n, t) for n, t in [
        ("shop", StringType()), ("day", DateType()), ("orders", LongType()), ("n", IntegerType()),
        ("revenue", DoubleType()), ("avg_amount", DecimalType(10, 2)), ("first_seen", TimestampType()),
        ("local_seen", TimestampNTZType()), ("tags", ArrayType(StringType())),
        ("flag", BooleanType()), ("raw", BinaryType()), ("_dv_deleted", BooleanType())]])
    layout = table_layout(output, ["shop", "day"])
    make_sink(connect, schema, layout, table="daily")
    columns = query(connect, "SELECT column_name, data_type FROM information_schema.columns "
                             "WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position",
                    schema, "daily")
    assert columns == [
        ("shop", "text"), ("day", "date"), ("orders", "bigint"), ("n", "integer"),
        ("revenue", "double precision"), ("avg_amount", "numeric"),
        ("first_seen", "timestamp with time zone"), ("local_seen", "timestamp without time zone"),
        ("tags", "jsonb"), ("flag", "boolean"), ("raw", "bytea")]
    key = query(connect, "SELECT a.attname FROM pg_index i JOIN pg_attribute a "
                         "ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
                         "WHERE i.indrelid = %s::regclass AND i.indisprimary ORDER BY a.attnum",
                f'"{schema}"."daily"')
    assert key == [("shop",), ("day",)]
    ledger_columns = query(connect, "SELECT column_name, data_type, is_nullable "
                                    "FROM information_schema.columns WHERE table_schema = %s "
                                    "AND table_name = 'dv_ledger' ORDER BY ordinal_position", schema)
    assert ledger_columns == [
        ("revision", "text", "NO"), ("batch_id", "bigint", "NO"), ("end_offsets", "jsonb", "NO"),
        ("rows_upserted", "bigint", "NO"), ("rows_deleted", "bigint", "NO"),
        ("committed_at", "timestamp with time zone", "NO"), ("index_oid", "bigint", "YES"),
        ("history_start", "jsonb", "YES"), ("bad_records", "bigint", "NO")]


def test_start_up_is_idempotent_but_refuses_a_foreign_index_table(
        connect: Connect, schema: str) -> None:
    make_sink(connect, schema)
    make_sink(connect, schema)  # a restarted job
    other = TableLayout(columns=(SinkColumn("order_id", "text"), SinkColumn("total", "bigint")),
                        primary_key=("order_id",), has_delete_flag=False)
    with pytest.raises(IndexTableMismatchError, match=r"exists with columns \['amount', "
                       r"'customer_id', 'order_id'\], but this revision writes \['order_id', 'total'\]"):
        make_sink(connect, schema, other)


def test_rows_and_ledger_row_commit_in_one_transaction(connect: Connect, schema: str) -> None:
    sink = make_sink(connect, schema)
    seen_mid_batch: list[list[Row]] = []

    def rows() -> Iterator[Row]:
        yield order("o1", "c1", "10.00")
        yield order("o2", "c2", "20.50")
        # Another session sees nothing of this batch while it is being written.
        seen_mid_batch.append(index_rows(connect, schema))
        seen_mid_batch.append(ledger_rows(connect, schema))
        yield order("o3", "c1", "5.25")

    outcome = sink.write_batch(0, rows(), {"orders": {"0": 2, "1": 1}})
    assert (outcome.skipped, outcome.rows_upserted, outcome.rows_deleted) == (False, 3, 0)
    assert seen_mid_batch == [[], []]
    assert index_rows(connect, schema) == [
        ("o1", "c1", Decimal("10.00")), ("o2", "c2", Decimal("20.50")), ("o3", "c1", Decimal("5.25"))]
    assert ledger_rows(connect, schema) == [(REVISION, 0, {"orders": {"0": 2, "1": 1}}, 3, 0)]
    committed_at = query(connect, sql.SQL("SELECT committed_at FROM {}").format(
        sql.Identifier(schema, "dv_ledger")))
    assert committed_at[0][0] is not None


def test_a_later_batch_updates_rows_by_key(connect: Connect, schema: str) -> None:
    sink = make_sink(connect, schema)
    sink.write_batch(0, [order("o1", "c1", "10.00"), order("o2", "c2", "20.00")], {"orders": {"0": 2}})
    outcome = sink.write_batch(1, [order("o1", "c1", "15.00"), order("o3", "c3", "5.00")],
                               {"orders": {"0": 4}})
    assert (outcome.rows_upserted, outcome.rows_deleted) == (2, 0)
    assert index_rows(connect, schema) == [
        ("o1", "c1", Decimal("15.00")), ("o2", "c2", Decimal("20.00")), ("o3", "c3", Decimal("5.00"))]
    assert [r[:2] + r[3:] for r in ledger_rows(connect, schema)] == [
        (REVISION, 0, 2, 0), (REVISION, 1, 2, 0)]


def test_a_replayed_batch_is_skipped_without_reading_its_rows(connect: Connect, schema: str) -> None:
    sink = make_sink(connect, schema)
    sink.write_batch(0, [order("o1", "c1", "10.00")], {"orders": {"0": 1}})
    outcome = sink.write_batch(0, must_not_be_read(), {"orders": {"0": 1}})
    assert outcome.skipped
    assert (outcome.rows_upserted, outcome.rows_deleted) == (0, 0)
    assert index_rows(connect, schema) == [("o1", "c1", Decimal("10.00"))]
    assert ledger_rows(connect, schema) == [(REVISION, 0, {"orders": {"0": 1}}, 1, 0)]


def test_other_revisions_do_not_share_batch_ids(connect: Connect, schema: str) -> None:
    make_sink(connect, schema).write_batch(0, [order("o1", "c1", "1.00")], {"orders": {"0": 1}})
    other = PostgresSink(connect=connect, schema=schema, table="orders__a71e", ledger_table="dv_ledger",
                         revision="a71e", layout=ORDERS)
    other.prepare()
    outcome = other.write_batch(0, [order("o1", "c1", "2.00")], {"orders": {"0": 1}})
    assert not outcome.skipped
    assert index_rows(connect, schema, "orders__a71e") == [("o1", "c1", Decimal("2.00"))]


def test_a_replay_over_another_range_is_refused(connect: Connect, schema: str) -> None:
    sink = make_sink(connect, schema)
    sink.write_batch(0, [order("o1", "c1", "10.00")], {"orders": {"0": 1}})
    with pytest.raises(LedgerMismatchError, match=r"batch 0 of revision 3f9c1a2b4d5e is in the "
                       r"ledger with end offsets \{'orders': \{'0': 1\}\}, but the checkpoint now "
                       r"says \{'orders': \{'0': 5\}\}"):
        sink.write_batch(0, must_not_be_read(), {"orders": {"0": 5}})
    assert index_rows(connect, schema) == [("o1", "c1", Decimal("10.00"))]
    assert ledger_rows(connect, schema) == [(REVISION, 0, {"orders": {"0": 1}}, 1, 0)]


def test_deletes_and_each_key_s_last_row_wins(connect: Connect, schema: str) -> None:
    sink = make_sink(connect, schema)
    sink.write_batch(0, [order("o1", "c1", "10.00"), order("o2", "c2", "20.00"),
                         order("o3", "c3", "30.00")], {"orders": {"0": 3}})
    outcome = sink.write_batch(1, [
        order("o2", None, None, deleted=True),         # delete
        order("o4", None, None, deleted=True),         # delete of a key never seen: no effect
        order("o3", None, None, deleted=True),         # deleted, then written again: kept
        order("o3", "c3", "33.00"),
        order("o1", "c1", "11.00"),                    # written, then deleted: gone
        order("o1", None, None, deleted=True),
    ], {"orders": {"0": 9}})
    assert (outcome.rows_upserted, outcome.rows_deleted) == (1, 2)
    assert index_rows(connect, schema) == [("o3", "c3", Decimal("33.00"))]
    assert ledger_rows(connect, schema)[-1] == (REVISION, 1, {"orders": {"0": 9}}, 1, 2)


def test_a_failure_mid_batch_leaves_neither_rows_nor_ledger_row(connect: Connect, schema: str) -> None:
    sink = make_sink(connect, schema)
    sink.write_batch(0, [order("o1", "c1", "10.00")], {"orders": {"0": 1}})

    def rows_then_executor_lost() -> Iterator[Row]:
        yield order("o1", "c1", "99.00")
        yield order("o2", "c2", "20.00")
        raise RuntimeError("executor lost")

    with pytest.raises(RuntimeError, match="executor lost"):
        sink.write_batch(1, rows_then_executor_lost(), {"orders": {"0": 3}})
    assert index_rows(connect, schema) == [("o1", "c1", Decimal("10.00"))]
    assert ledger_rows(connect, schema) == [(REVISION, 0, {"orders": {"0": 1}}, 1, 0)]
    # Spark re-runs the batch: the claim was rolled back too, so it is applied now.
    outcome = sink.write_batch(1, [order("o1", "c1", "99.00"), order("o2", "c2", "20.00")],
                               {"orders": {"0": 3}})
    assert not outcome.skipped
    assert index_rows(connect, schema) == [("o1", "c1", Decimal("99.00")), ("o2", "c2", Decimal("20.00"))]


def test_a_null_key_fails_the_whole_batch(connect: Connect, schema: str) -> None:
    sink = make_sink(connect, schema)
    with pytest.raises(NullKeyError, match="batch 0: the transform emitted a row with NULL in primary-key column 'order_id'"):
        sink.write_batch(0, [order("o1", "c1", "1.00"), order(None, "c2", "2.00")],  # type: ignore[arg-type]
                         {"orders": {"0": 2}})
    assert index_rows(connect, schema) == []
    assert ledger_rows(connect, schema) == []


def test_a_value_postgres_rejects_rolls_back_the_batch(connect: Connect, schema: str) -> None:
    layout = TableLayout(columns=(SinkColumn("id", "text"), SinkColumn("n", "bigint")),
                         primary_key=("id",), has_delete_flag=False)
    sink = make_sink(connect, schema, layout, table="counts")
    with pytest.raises(psycopg.errors.InvalidTextRepresentation):
        sink.write_batch(0, [("a", 1, False), ("b", "many", False)], {"t": {"0": 2}})
    assert index_rows(connect, schema, "counts") == []
    assert ledger_rows(connect, schema) == []


def test_odd_identifiers_are_quoted_everywhere(connect: Connect, stack: Any) -> None:
    schema = f"DV Schema {uuid.uuid4().hex[:8]}"
    layout = TableLayout(columns=(SinkColumn("Customer Id", "text"), SinkColumn('Total "€"', "bigint")),
                         primary_key=("Customer Id",), has_delete_flag=True)
    try:
        sink = make_sink(connect, schema, layout, table='Orders "by" Customer')
        sink.write_batch(0, [("c1", 3, False), ("c2", 4, False)], {"orders": {"0": 7}})
        outcome = sink.write_batch(1, [("c1", 5, False), ("c2", None, True)], {"orders": {"0": 9}})
        assert (outcome.rows_upserted, outcome.rows_deleted) == (1, 1)
        assert index_rows(connect, schema, 'Orders "by" Customer') == [("c1", 5)]
    finally:
        with psycopg.connect(stack.pg_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


# ---- the foreachBatch writer on real Spark ---------------------------------------------

@pytest.fixture(scope="module")
def spark() -> SparkSession:
    """Left running for other tests in this process; Python's exit stops it."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    return (SparkSession.builder.master("local[1]").appName("dvjob-integration-tests")
            .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
            .getOrCreate())


def write_offset_log(checkpoint: Path, batch_id: int, source_line: str) -> None:
    """An offset log file as Spark writes it before running the batch."""
    (checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
    (checkpoint / "offsets" / str(batch_id)).write_text(
        'v1\n{"batchWatermarkMs":0,"batchTimestampMs":1719835200000,"conf":{}}\n' + source_line)


OUTPUT_SCHEMA = StructType([
    StructField("order_id", StringType()), StructField("amount", DecimalType(10, 2)),
    StructField("ts", TimestampType()), StructField("tags", ArrayType(StringType())),
    StructField("day", DateType()), StructField("_dv_deleted", BooleanType())])


def test_foreach_batch_writer_end_to_end_on_spark(
        spark: SparkSession, connect: Connect, schema: str, tmp_path: Path) -> None:
    layout = table_layout(OUTPUT_SCHEMA, ["order_id"])
    sink = make_sink(connect, schema, layout)
    lines: list[str] = []
    writer = BatchWriter(sink=sink, layout=layout, checkpoint_location=tmp_path.as_uri(),
                         report=lines.append)
    noon_utc = datetime(2024, 7, 1, 12, 0, 0, 123456, tzinfo=UTC)
    batch0 = spark.createDataFrame([
        ("o1", Decimal("10.00"), noon_utc, ["gift", "rush"], date(2024, 7, 1), False),
        ("o2", Decimal("20.00"), None, [], None, None),
    ], OUTPUT_SCHEMA)
    write_offset_log(tmp_path, 0, '{"orders":{"0":2,"1":0}}')
    previous = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "Asia/Kolkata")  # the zone must not matter
    try:
        writer(batch0, 0)
        writer(batch0, 0)  # Spark replays the batch after a restart
    finally:
        spark.conf.set("spark.sql.session.timeZone", previous or "UTC")
    assert lines == [
        'dvjob progress {"bad_records": 0, "batch": 0, "end_offsets": {"orders": {"0": 2, '
        '"1": 0}}, "rows_deleted": 0, "rows_upserted": 2, "status": "committed"}',
        'dvjob progress {"bad_records": 0, "batch": 0, "end_offsets": {"orders": {"0": 2, '
        '"1": 0}}, "rows_deleted": 0, "rows_upserted": 0, "status": "skipped"}',
    ]
    assert index_rows(connect, schema) == [
        ("o1", Decimal("10.00"), noon_utc, ["gift", "rush"], date(2024, 7, 1)),
        ("o2", Decimal("20.00"), None, [], None)]

    batch1 = spark.createDataFrame([("o1", None, None, None, None, True)], OUTPUT_SCHEMA)
    write_offset_log(tmp_path, 1, '{"orders":{"0":3,"1":0}}')
    writer(batch1, 1)
    assert index_rows(connect, schema) == [("o2", Decimal("20.00"), None, [], None)]
    assert ledger_rows(connect, schema) == [
        (REVISION, 0, {"orders": {"0": 2, "1": 0}}, 2, 0),
        (REVISION, 1, {"orders": {"0": 3, "1": 0}}, 0, 1)]


def test_foreach_batch_writer_remembers_why_it_failed(
        spark: SparkSession, connect: Connect, schema: str, tmp_path: Path) -> None:
    layout = table_layout(OUTPUT_SCHEMA, ["order_id"])
    writer = BatchWriter(sink=make_sink(connect, schema, layout), layout=layout,
                         checkpoint_location=str(tmp_path), report=lambda line: None)
    batch = spark.createDataFrame([("o1", None, None, None, None, False)], OUTPUT_SCHEMA)
    with pytest.raises(OffsetLogError, match="cannot read offset log"):
        writer(batch, 5)  # no offsets/5: not a checkpoint Spark wrote
    assert isinstance(writer.failure, OffsetLogError)
    assert ledger_rows(connect, schema) == []


# ---- large batches: staged by the executors, merged by the batch's transaction ----------

ORDERS_SCHEMA = StructType([
    StructField("order_id", StringType()), StructField("customer_id", StringType()),
    StructField("amount", DecimalType(10, 2)), StructField("_dv_deleted", BooleanType())])


def staged_rows(spark: SparkSession, partitions: list[list[Row]], *,
                one_task: bool = False) -> FrameRows:
    """A DataFrame whose Spark partitions hold exactly `partitions`, in order."""
    rdd = spark.sparkContext.parallelize(partitions, len(partitions)).flatMap(lambda p: p)
    assert rdd.glom().collect() == partitions
    return FrameRows(spark.createDataFrame(rdd, ORDERS_SCHEMA), parallel=True,
                     one_task=one_task)


def stage_tables(connect: Connect, schema: str) -> list[Row]:
    return query(connect, "SELECT relname FROM pg_class c JOIN pg_namespace n ON "
                          "n.oid = c.relnamespace WHERE n.nspname = %s AND relname LIKE "
                          "'\\_dv\\_stage\\_%%'", schema)


def test_a_staged_batch_keeps_each_key_s_last_row_across_partitions(
        spark: SparkSession, connect: Connect, schema: str) -> None:
    sink = make_sink(connect, schema)
    sink.write_batch(0, [order("o9", "c-old", "1.00")], {"orders": {"0": 1}})
    rows = staged_rows(spark, [
        [order("o1", "c1", "1.00"), order("o2", "c2", "2.00"), order("o1", "c1", "1.50")],
        [order("o2", "c2", "2.50"), order("o3", "c3", "3.00"), order("o9", None, None, True)],
        [order("o3", "c3", "3.50")]])
    outcome = sink.write_batch(1, rows, {"orders": {"0": 8}})
    assert (outcome.skipped, outcome.rows_upserted, outcome.rows_deleted) == (False, 3, 1)
    assert index_rows(connect, schema) == [
        ("o1", "c1", Decimal("1.50")), ("o2", "c2", Decimal("2.50")),
        ("o3", "c3", Decimal("3.50"))]
    assert ledger_rows(connect, schema)[-1] == (REVISION, 1, {"orders": {"0": 8}}, 3, 1)
    assert stage_tables(connect, schema) == []
    # 7 rows into an index of 1 no reader sees: merged in bulk, the key rebuilt as it was
    assert "bulk_merge_seconds" in outcome.seconds
    assert primary_key(connect, schema) == (f"{TABLE}_pkey", ["order_id"])
    again = sink.write_batch(1, staged_rows(spark, [[order("o1", "c1", "9.00")]]),
                             {"orders": {"0": 8}})
    assert again.skipped
    assert index_rows(connect, schema)[0] == ("o1", "c1", Decimal("1.50"))


def test_a_batch_staged_in_one_task_keeps_each_key_s_last_row(
        spark: SparkSession, connect: Connect, schema: str) -> None:
    """A steady job with one task slot stages in one task (dvjob.placement): one Python
    worker for the batch, the partitions' rows in their order."""
    sink = make_sink(connect, schema)
    rows = staged_rows(spark, [
        [order("o1", "c1", "1.00"), order("o2", "c2", "2.00")],
        [order("o1", "c1", "1.50"), order("o3", "c3", "3.00")],
        [order("o2", "c2", "2.50")], [order("o3", "c3", "3.50"), order("o1", "c1", "1.75")]],
        one_task=True)
    tracker = spark.sparkContext.statusTracker()
    group = f"one-task-{schema}"
    spark.sparkContext.setJobGroup(group, "a batch staged in one task")
    try:
        outcome = sink.write_batch(0, rows, {"orders": {"0": 7}})
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    assert (outcome.skipped, outcome.rows_upserted) == (False, 3)
    assert index_rows(connect, schema) == [
        ("o1", "c1", Decimal("1.75")), ("o2", "c2", Decimal("2.50")),
        ("o3", "c3", Decimal("3.50"))]
    tasks = []
    for job in tracker.getJobIdsForGroup(group):
        info = tracker.getJobInfo(job)
        assert info is not None
        for stage in info.stageIds:
            stage_info = tracker.getStageInfo(stage)
            if stage_info is not None:
                tasks.append(stage_info.numTasks)
    assert tasks == [1], tasks
    assert stage_tables(connect, schema) == []


def test_a_staged_batch_with_a_null_key_applies_nothing(
        spark: SparkSession, connect: Connect, schema: str) -> None:
    sink = make_sink(connect, schema)
    rows = staged_rows(spark, [[order("o1", "c1", "1.00")], [order(None, "c2", "2.00")]])  # type: ignore[arg-type]
    with pytest.raises(NullKeyError, match="NULL in primary-key column 'order_id'"):
        sink.write_batch(0, rows, {"orders": {"0": 2}})
    assert index_rows(connect, schema) == []
    assert ledger_rows(connect, schema) == []
    assert stage_tables(connect, schema) == []


def test_a_staging_table_that_lost_rows_is_not_merged(
        spark: SparkSession, connect: Connect, schema: str) -> None:
    """What a database restart does to an UNLOGGED table between the executors' COPY and the
    merge: the batch must fail, not commit as if it were empty."""
    sink = make_sink(connect, schema)

    rows = staged_rows(spark, [[order("o1", "c1", "1.00")], [order("o2", "c2", "2.00")]])
    real_apply = sink._apply

    def apply_after_loss(batch_id: int, batch_rows: Any, staged: Any, *rest: Any) -> Any:
        if staged is not None:
            with connect() as conn:
                conn.execute(sql.SQL("DELETE FROM {}").format(sql.Identifier(schema, staged[0])))
        return real_apply(batch_id, batch_rows, staged, *rest)

    sink._apply = apply_after_loss  # type: ignore[method-assign]
    with pytest.raises(JobError, match=r"holds 0 rows but the executors wrote 2"):
        sink.write_batch(0, rows, {"orders": {"0": 2}})
    assert index_rows(connect, schema) == []
    assert ledger_rows(connect, schema) == []


def test_a_retried_task_replaces_its_partition_s_rows(connect: Connect, schema: str) -> None:
    make_sink(connect, schema)
    stage = "_dv_stage_test"
    with connect() as conn:
        conn.execute(stage_table_ddl(schema, stage, ORDERS))
    copier = PartitionCopier(schema=schema, table=stage, columns=ORDERS.column_names,
                             deleted="_dv_deleted", ordinal="_dv_ord", application_name="t",
                             conninfo=getattr(connect, "dsn", ""))
    attempt = [("o1\tc1\t1.00\tf",), ("o2\tc2\t2.00\tf",)]
    assert list(copier(1, iter(attempt))) == [(1, 2)]
    assert list(copier(0, iter([("o0\tc0\t0.50\tf",)]))) == [(0, 1)]
    assert list(copier(1, iter(attempt))) == [(1, 2)]
    assert query(connect, sql.SQL("SELECT order_id, _dv_ord FROM {} ORDER BY _dv_ord").format(
        sql.Identifier(schema, stage))) == [("o0", 0), ("o1", 2**40), ("o2", 2**40 + 1)]


def test_start_up_drops_the_staging_tables_a_crashed_run_left(
        connect: Connect, schema: str) -> None:
    make_sink(connect, schema)
    mine, other = f"{stage_prefix(REVISION)}deadbeef", f"{stage_prefix('another')}deadbeef"
    with connect() as conn:
        for name in (mine, other):
            conn.execute(stage_table_ddl(schema, name, ORDERS))
    make_sink(connect, schema)  # the job's restart
    assert stage_tables(connect, schema) == [(other,)]


def test_a_staged_batch_keeps_every_type_s_values_exact(
        spark: SparkSession, connect: Connect, schema: str, tmp_path: Path) -> None:
    """The staged path sends COPY text Spark built (dvjob.sinks.postgres.copy_text): each value must read
    back as itself, including text that looks like COPY syntax."""
    output = StructType([StructField(n, t) for n, t in [
        ("k", StringType()), ("n", LongType()), ("i", IntegerType()), ("d", DoubleType()),
        ("r", FloatType()), ("flag", BooleanType()), ("day", DateType()),
        ("local", TimestampNTZType()), ("at", TimestampType()), ("raw", BinaryType()),
        ("amount", DecimalType(12, 4)), ("tags", ArrayType(StringType())),
        ("_dv_deleted", BooleanType())]])
    layout = table_layout(output, ["k"])
    sink = make_sink(connect, schema, layout, table="typed")
    writer = BatchWriter(sink=sink, layout=layout, checkpoint_location=tmp_path.as_uri(),
                         report=lambda line: None)
    at = datetime(2024, 7, 1, 12, 0, 0, 123456, tzinfo=UTC)
    local = datetime(1999, 12, 31, 23, 59, 59, 999999)
    odd = "tab\there, new\nline, cr\rback\\slash \\N \\. end"
    rows = [
        (odd, 2**62, -7, 0.1, 1.5, True, date(1970, 1, 1), local, at, b"\x00\\\n\xff",
         Decimal("-12345678.0001"), ['a"b', "c\\d", "\t"], False),
        ("nan", None, None, float("nan"), None, False, None, None, None, b"", None, None, None),
        ("inf", 0, 0, float("-inf"), float("inf"), None, date(2400, 2, 29), None, None, None,
         Decimal("0.0001"), [], False),
        ("big", -1, 1, 1e300, -0.0, True, None, None, None, None, Decimal("1E-4"), None, False),
        ("", 1, 1, -0.0, 3.4e38, None, None, None, None, None, None, None, None),
    ]
    write_offset_log(tmp_path, 0, '{"orders":{"0":5}}')
    writer(spark.createDataFrame(rows, output).repartition(2), 0)
    stored = {r[0]: r for r in query(connect, sql.SQL("SELECT * FROM {}").format(
        sql.Identifier(schema, "typed")))}
    assert set(stored) == {odd, "nan", "inf", "big", ""}
    assert stored[odd] == (odd, 2**62, -7, 0.1, 1.5, True, date(1970, 1, 1), local, at,
                           b"\x00\\\n\xff", Decimal("-12345678.0001"), ['a"b', "c\\d", "\t"])
    nan = stored["nan"]
    assert nan[1:3] == (None, None) and nan[3] != nan[3] and nan[4:] == (
        None, False, None, None, None, b"", None, None)
    assert stored["inf"][1:] == (0, 0, float("-inf"), float("inf"), None, date(2400, 2, 29),
                                 None, None, None, Decimal("0.0001"), [])
    assert stored["big"][3:5] == (1e300, -0.0) and str(stored["big"][4]) == "-0.0"
    assert stored["big"][10] == Decimal("0.0001")
    assert stored[""][3:] == (-0.0, 3.4e38, None, None, None, None, None, None, None)


class RecordingPolicy:
    """The bad-record policy `skip` as the sink sees it (dvjob.sinks.registry.BadRecordHandler)."""

    def __init__(self) -> None:
        self.null_keys: list[tuple[int, str, tuple[Any, ...]]] = []

    def null_key(self, batch_id: int, column: str, row: Any) -> None:
        self.null_keys.append((batch_id, column, tuple(row)))

    def settle(self, batch_id: int, end_offsets: Any) -> int:
        return len([n for n in self.null_keys if n[0] == batch_id])


def test_a_staged_null_key_row_reaches_the_policy_as_the_projection_had_it(
        spark: SparkSession, connect: Connect, schema: str, tmp_path: Path) -> None:
    """Whichever way a batch is written, the policy (and so a dead letter) sees a row with a
    NULL key in the sink projection's form: timestamps and nested values as text."""
    layout = table_layout(OUTPUT_SCHEMA, ["order_id"])
    policy = RecordingPolicy()
    writer = BatchWriter(sink=make_sink(connect, schema, layout), layout=layout,
                         checkpoint_location=tmp_path.as_uri(), report=lambda line: None,
                         bad=policy)
    noon_utc = datetime(2024, 7, 1, 12, 0, 0, 123456, tzinfo=UTC)
    rows = [("o1", Decimal("1.00"), noon_utc, ["a"], date(2024, 7, 1), False),
            (None, Decimal("2.00"), noon_utc, ["b", "c"], date(2024, 7, 2), False)]
    write_offset_log(tmp_path, 0, '{"orders":{"0":2}}')  # a first batch: staged
    writer(spark.createDataFrame(rows, OUTPUT_SCHEMA).repartition(2), 0)
    assert policy.null_keys == [(0, "order_id", (
        None, Decimal("2.00"), "2024-07-01 12:00:00.123456+00:00", '["b", "c"]',
        date(2024, 7, 2), False))]
    assert [r[0] for r in index_rows(connect, schema)] == ["o1"]
    assert ledger_rows(connect, schema) == [(REVISION, 0, {"orders": {"0": 2}}, 1, 0)]


def primary_key(connect: Connect, schema: str, table: str = TABLE) -> tuple[str, list[str]] | None:
    found = query(connect, "SELECT con.conname, array_agg(a.attname ORDER BY k.n) "
                           "FROM pg_constraint con CROSS JOIN unnest(con.conkey) WITH ORDINALITY "
                           "AS k(attnum, n) JOIN pg_attribute a ON a.attrelid = con.conrelid "
                           "AND a.attnum = k.attnum WHERE con.conrelid = to_regclass(%s) "
                           "AND con.contype = 'p' GROUP BY con.conname",
                  f'"{schema}"."{table}"')
    return (found[0][0], list(found[0][1])) if found else None


BATCH_1 = [[order("o1", "c1", "1.00"), order("o2", "c2", "2.00")],
           [order("o1", "c1", "1.50"), order("o9", None, None, True)]]


def _seeded(connect: Connect, schema: str, **options: Any) -> Any:
    sink = make_sink(connect, schema)
    for name, value in options.items():
        setattr(sink, name, value)
    sink.write_batch(0, [order("o9", "c9", "9.00"), order("o8", "c8", "8.00")],
                     {"orders": {"0": 2}})
    return sink


@pytest.mark.parametrize("why", ["served", "larger than the batch", "turned off"])
def test_a_staged_batch_merges_row_by_row_where_bulk_would_not_do(
        spark: SparkSession, connect: Connect, schema: str, why: str) -> None:
    """Bulk takes the table's ACCESS EXCLUSIVE lock and rebuilds its key: never for an index
    a reader sees, nor for one holding more rows than the batch."""
    sink = _seeded(connect, schema, bulk_load=why != "turned off")
    if why == "served":
        with connect() as conn:
            conn.execute(sql.SQL("CREATE VIEW {} AS SELECT * FROM {}").format(
                sql.Identifier(schema, "orders"), sql.Identifier(schema, TABLE)))
    if why == "larger than the batch":
        sink.write_batch(1, [order(f"x{n}", "c", "1.00") for n in range(10)], {"orders": {"0": 12}})
    batch_id, end = (2, 16) if why == "larger than the batch" else (1, 6)
    outcome = sink.write_batch(batch_id, staged_rows(spark, BATCH_1), {"orders": {"0": end}})
    assert "bulk_merge_seconds" not in outcome.seconds
    assert (outcome.rows_upserted, outcome.rows_deleted) == (2, 1)
    assert [r for r in index_rows(connect, schema) if not r[0].startswith("x")] == [
        ("o1", "c1", Decimal("1.50")), ("o2", "c2", Decimal("2.00")),
        ("o8", "c8", Decimal("8.00"))]


def test_a_bulk_merge_that_fails_leaves_the_index_and_its_key_as_they_were(
        spark: SparkSession, connect: Connect, schema: str) -> None:
    sink = _seeded(connect, schema)

    def crash(batch_id: int) -> None:
        raise RuntimeError(f"the job dies before batch {batch_id} commits")

    sink._before_commit = crash
    with pytest.raises(RuntimeError, match="dies before batch 1 commits"):
        sink.write_batch(1, staged_rows(spark, BATCH_1), {"orders": {"0": 6}})
    assert index_rows(connect, schema) == [("o8", "c8", Decimal("8.00")),
                                           ("o9", "c9", Decimal("9.00"))]
    assert primary_key(connect, schema) == (f"{TABLE}_pkey", ["order_id"])
    assert [r[1] for r in ledger_rows(connect, schema)] == [0]
    sink._before_commit = None
    outcome = sink.write_batch(1, staged_rows(spark, BATCH_1), {"orders": {"0": 6}})
    assert "bulk_merge_seconds" in outcome.seconds
    assert (outcome.rows_upserted, outcome.rows_deleted) == (2, 1)
    assert index_rows(connect, schema) == [("o1", "c1", Decimal("1.50")),
                                           ("o2", "c2", Decimal("2.00")),
                                           ("o8", "c8", Decimal("8.00"))]
    with pytest.raises(psycopg.errors.UniqueViolation), connect() as conn:  # the rebuilt key
        conn.execute(sql.SQL("INSERT INTO {} VALUES ('o1', 'c', 1)").format(
            sql.Identifier(schema, TABLE)))


# The start-up's lock: the index table's own (dvjob.sinks.postgres.sink.INDEX_LOCK_MODE).

SHOP = {"namespace": "shop", "name": "orders", "uid": "uid-shop"}
BILLING = {"namespace": "billing", "name": "orders", "uid": "uid-billing"}


def tagged(stack: Any, tag: str, **options: Any) -> Connect:
    """Connections that show as `tag` in pg_stat_activity (which locks they wait on)."""
    def connect() -> psycopg.Connection[Any]:
        return psycopg.connect(stack.pg_dsn, application_name=tag, **options)
    return connect


def owned_sink(connect: Connect, schema: str, owner: dict[str, str] | None = SHOP,
               table: str = TABLE, revision: str = REVISION) -> PostgresSink:
    return PostgresSink(connect=connect, schema=schema, table=table, ledger_table="dv_ledger",
                        revision=revision, layout=ORDERS, owner=owner)


class InThread:
    """A start-up run beside the test, which waits on the locks it should wait on."""

    def __init__(self, work: Any) -> None:
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(work,), daemon=True)
        self._thread.start()

    def _run(self, work: Any) -> None:
        try:
            work()
        except BaseException as exc:  # handed to the test
            self.error = exc

    def result(self) -> BaseException | None:
        self._thread.join(60)
        assert not self._thread.is_alive(), "the start-up did not end"
        return self.error


def waits(stack: Any, tag: str) -> list[tuple[str, str, str | None]]:
    """The locks the sessions tagged `tag` wait for: (type, mode, relation)."""
    with psycopg.connect(stack.pg_dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT l.locktype, l.mode, l.relation::regclass::text FROM pg_locks l "
            "JOIN pg_stat_activity a ON a.pid = l.pid WHERE a.application_name = %s "
            "AND NOT l.granted", (tag,)).fetchall()
    return [(str(r[0]), str(r[1]), r[2]) for r in rows]


def test_the_start_up_lock_is_its_index_table_s_and_holds_back_no_other_index(
        stack: Any, connect: Connect, schema: str) -> None:
    """A start-up waits for the lock on its own index table; another index's start-up goes
    through at once, with that lock held and a third index's batch open (its rows and its
    ledger row written, not committed)."""
    owned_sink(connect, schema).prepare()
    owned_sink(connect, schema, BILLING, table="payments__bbbbbbbbbb",
               revision="bbbbbbbbbb").prepare()
    owned_sink(connect, schema, BILLING, table="refunds__dddddddddd",
               revision="dddddddddd").prepare()
    bounded = tagged(stack, "other", options="-c lock_timeout=2000")
    with psycopg.connect(stack.pg_dsn) as holder, psycopg.connect(stack.pg_dsn) as writer:
        holder.execute(sql.SQL("LOCK TABLE {} IN SHARE ROW EXCLUSIVE MODE").format(
            sql.Identifier(schema, TABLE)))
        writer.execute(sql.SQL("INSERT INTO {} VALUES ('r1', 'c1', 1)").format(
            sql.Identifier(schema, "refunds__dddddddddd")))
        writer.execute(sql.SQL("INSERT INTO {} (revision, batch_id, end_offsets, rows_upserted, "
                               "rows_deleted) VALUES ('dddddddddd', 0, '{{}}', 1, 0)").format(
            sql.Identifier(schema, "dv_ledger")))
        owned_sink(bounded, schema, BILLING, table="payments__bbbbbbbbbb",
                   revision="bbbbbbbbbb").prepare()  # a wait would end in LockNotAvailable
        writer.rollback()
        start = InThread(owned_sink(tagged(stack, "mine"), schema).prepare)
        wait_for(lambda: waits(stack, "mine"), timeout=30, what="the start-up to wait")
        assert waits(stack, "mine") == [("relation", "ShareRowExclusiveLock", f"{schema}.{TABLE}")]
        holder.rollback()
    assert start.result() is None


@pytest.fixture
def reader(stack: Any, schema: str) -> Iterator[Connect]:
    """Connections as a role that may read every table of the schema (once granted:
    _grant_reads) and write none: what a check role or a reader of the alias is given."""
    role, password = f"dv_reader_{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    with psycopg.connect(stack.pg_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
            sql.Identifier(role), sql.Literal(password)))

    def connect() -> psycopg.Connection[Any]:
        pg = stack.pg
        return psycopg.connect(host=pg["host"], port=pg["port"], dbname=pg["database"],
                               user=role, password=password)
    connect.role = role  # type: ignore[attr-defined]
    yield connect
    with psycopg.connect(stack.pg_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
        admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def _grant_reads(stack: Any, schema: str, role: str) -> None:
    """Once the job made the schema: USAGE on it, SELECT on its tables."""
    with psycopg.connect(stack.pg_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(
            sql.Identifier(schema), sql.Identifier(role)))
        admin.execute(sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}").format(
            sql.Identifier(schema), sql.Identifier(role)))


def test_a_role_that_may_only_read_cannot_take_the_start_up_lock_nor_stall_it(
        stack: Any, connect: Connect, schema: str, reader: Connect) -> None:
    owned_sink(connect, schema).prepare()
    _grant_reads(stack, schema, reader.role)  # type: ignore[attr-defined]
    index, ledger = sql.Identifier(schema, TABLE), sql.Identifier(schema, "dv_ledger")
    with reader() as hostile:
        for mode in ("SHARE ROW EXCLUSIVE", "ROW EXCLUSIVE", "SHARE UPDATE EXCLUSIVE",
                     "SHARE", "EXCLUSIVE", "ACCESS EXCLUSIVE"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                hostile.execute(sql.SQL("LOCK TABLE {} IN " + mode + " MODE").format(index))
            hostile.rollback()
        # what it can hold: reads of the index and the ledger, and any advisory key (the
        # start-up took one, which any role could hold, before it locked its own table)
        hostile.execute(sql.SQL("LOCK TABLE {}, {} IN ACCESS SHARE MODE").format(index, ledger))
        hostile.execute(sql.SQL("SELECT count(*) FROM {}").format(index))
        for key in range(-3, 4):
            hostile.execute("SELECT pg_advisory_xact_lock(%s)", (key,))
        owned_sink(tagged(stack, "start", options="-c lock_timeout=2000"), schema).prepare()


def test_a_reader_can_still_queue_a_request_behind_its_own_read(
        stack: Any, connect: Connect, schema: str, reader: Connect) -> None:
    """What a role that may read the index can still do (PostgreSQL's, for every table): keep
    a read open, then ask for a lock PostgreSQL queues before it checks the privilege (CREATE
    RULE asks for ACCESS EXCLUSIVE). Everything after it waits, readers and the start-up
    alike, until the read ends; the request then fails on the privilege."""
    owned_sink(connect, schema).prepare()
    _grant_reads(stack, schema, reader.role)  # type: ignore[attr-defined]
    index = sql.Identifier(schema, TABLE)
    with reader() as holding, reader() as queued:
        holding.execute(sql.SQL("SELECT count(*) FROM {}").format(index))
        queued.execute("SET application_name = 'queued'")
        request = InThread(lambda: queued.execute(sql.SQL(
            "CREATE RULE r AS ON INSERT TO {} DO INSTEAD NOTHING").format(index)))
        wait_for(lambda: waits(stack, "queued"), timeout=30, what="the request to queue")
        with pytest.raises(psycopg.errors.LockNotAvailable):
            owned_sink(tagged(stack, "start", options="-c lock_timeout=1000"),
                       schema).prepare()
        holding.rollback()
        assert isinstance(request.result(), psycopg.errors.InsufficientPrivilege)
    owned_sink(tagged(stack, "start", options="-c lock_timeout=1000"), schema).prepare()


@pytest.mark.parametrize("creator", [SHOP, BILLING], ids=["a twin", "another view"])
def test_a_first_start_racing_another_creation_judges_the_table_it_finds(
        stack: Any, connect: Connect, schema: str, creator: dict[str, str]) -> None:
    """No table yet: the start-up creates one in its transaction; a session creating the
    same table first makes it wait, fail and look again, under the table's lock."""
    owned_sink(connect, schema, table="seed__cccccccccc", revision="cccccccccc").prepare()
    with psycopg.connect(stack.pg_dsn) as other:
        other.execute(index_ddl(schema, TABLE, ORDERS))
        other.execute(sql.SQL("COMMENT ON TABLE {} IS {}").format(
            sql.Identifier(schema, TABLE), sql.Literal(owner_comment(**creator))))
        start = InThread(owned_sink(tagged(stack, "first"), schema).prepare)
        wait_for(lambda: waits(stack, "first"), timeout=30, what="the start-up to wait")
        other.commit()
    error = start.result()
    if creator is SHOP:
        assert error is None
    else:
        assert isinstance(error, IndexOwnedElsewhereError), error
        assert "belongs to DerivedView billing/orders" in str(error)


def test_a_start_waiting_on_the_operator_s_drop_creates_the_index_afresh(
        stack: Any, connect: Connect, schema: str) -> None:
    """The operator's drop takes ACCESS EXCLUSIVE on the index and deletes its ledger rows in
    one transaction: a start-up waiting for its lock meanwhile finds no table, and no batch
    of it, and creates it anew (a drop that left ledger rows would make it IndexLost)."""
    sink = owned_sink(connect, schema)
    sink.prepare()
    sink.write_batch(0, [order("o1", "c1", "1")], {"orders": {"0": 1}})
    oid = query(connect, "SELECT to_regclass(%s)::oid", f'"{schema}"."{TABLE}"')[0][0]
    with psycopg.connect(stack.pg_dsn) as operator:
        operator.execute(sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(
            sql.Identifier(schema, TABLE)))
        operator.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(schema, TABLE)))
        operator.execute(sql.SQL("DELETE FROM {} WHERE revision = %s").format(
            sql.Identifier(schema, "dv_ledger")), (REVISION,))
        start = InThread(owned_sink(tagged(stack, "restart"), schema).prepare)
        wait_for(lambda: waits(stack, "restart"), timeout=30, what="the start-up to wait")
        operator.commit()
    assert start.result() is None
    assert index_rows(connect, schema) == [] and ledger_rows(connect, schema) == []
    assert query(connect, "SELECT to_regclass(%s)::oid", f'"{schema}"."{TABLE}"')[0][0] != oid
