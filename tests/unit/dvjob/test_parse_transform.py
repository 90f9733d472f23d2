"""Parsing Kafka records into `events`, and the view's transform as a pure function.

Static DataFrames shaped like the Kafka source stand in for the stream: the
same functions run on both.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import DoubleType, StringType, StructField, StructType, TimestampType

from dvjob.config import TransformConfig
from dvjob.errors import ConfigError
from dvjob.source.parse import parse_events, value_schema
from dvjob.transform import apply_transform

KafkaRecord = tuple[str | None, str | None, int, int]
SCHEMA = "order_id STRING, customer_id STRING, amount DOUBLE, ts TIMESTAMP"
RECORDS: list[KafkaRecord] = [
    ("o1", '{"order_id":"o1","customer_id":"c1","amount":12.5,"ts":"2024-05-01T10:00:00Z"}', 0, 0),
    ("o2", '{"order_id":"o2","customer_id":"c2","amount":5.0,"ts":"2024-05-01T10:01:00Z","x":1}', 1, 0),
    ("o3", '{"order_id":"o3","customer_id":"c1","amount":20.0,"ts":"2024-05-01T10:02:00Z"}', 0, 1),
    ("o2", None, 1, 1),            # tombstone: order o2 withdrawn
    (None, "not json at all", 0, 2),  # a bad record: left out under skip (test_bad_records)
]

KafkaFrame = Callable[[Sequence[KafkaRecord]], DataFrame]


@pytest.fixture
def events(kafka_frame: KafkaFrame) -> DataFrame:
    return parse_events(kafka_frame(RECORDS), value_schema(SCHEMA), policy="skip")


def test_value_schema_from_ddl(spark: SparkSession) -> None:
    assert value_schema(SCHEMA) == StructType([
        StructField("order_id", StringType()), StructField("customer_id", StringType()),
        StructField("amount", DoubleType()), StructField("ts", TimestampType())])


@pytest.mark.parametrize(("ddl", "expected"), [
    ("order_id STRNG", "source.schema: cannot parse 'order_id STRNG'"),
    ("STRING", "source.schema: 'STRING' must list one or more 'name TYPE' fields"),
    ("_kafka_key STRING, a INT", "_kafka_key: names starting with '_kafka_' or '_debezium_' are reserved"),
])
def test_bad_schema_ddl(spark: SparkSession, ddl: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        value_schema(ddl)


def test_events_have_value_fields_then_kafka_metadata(events: DataFrame) -> None:
    assert events.columns == ["order_id", "customer_id", "amount", "ts", "_kafka_key",
                              "_kafka_topic", "_kafka_partition", "_kafka_offset",
                              "_kafka_timestamp", "_kafka_tombstone"]
    rows = events.selectExpr(
        "order_id", "customer_id", "amount", "CAST(ts AS STRING)", "_kafka_key", "_kafka_topic",
        "_kafka_partition", "_kafka_offset", "CAST(_kafka_timestamp AS STRING)", "_kafka_tombstone",
    ).collect()
    assert [tuple(r) for r in rows] == [
        ("o1", "c1", 12.5, "2024-05-01 10:00:00", "o1", "orders", 0, 0, "2024-05-01 12:00:00", False),
        ("o2", "c2", 5.0, "2024-05-01 10:01:00", "o2", "orders", 1, 0, "2024-05-01 12:00:00", False),
        ("o3", "c1", 20.0, "2024-05-01 10:02:00", "o3", "orders", 0, 1, "2024-05-01 12:00:00", False),
        (None, None, None, None, "o2", "orders", 1, 1, "2024-05-01 12:00:00", True),
    ]


def test_sql_aggregation_per_customer(events: DataFrame) -> None:
    output = apply_transform(TransformConfig(sql=(
        "SELECT customer_id, count(*) AS orders, sum(amount) AS revenue "
        "FROM events WHERE NOT _kafka_tombstone AND customer_id IS NOT NULL "
        "GROUP BY customer_id")), events)
    assert sorted(tuple(r) for r in output.collect()) == [("c1", 2, 32.5), ("c2", 1, 5.0)]


def test_sql_projection_turns_tombstones_into_deletes(events: DataFrame) -> None:
    output = apply_transform(TransformConfig(sql=(
        "SELECT _kafka_key AS order_id, amount, _kafka_tombstone AS _dv_deleted "
        "FROM events WHERE _kafka_key IS NOT NULL")), events)
    assert [tuple(r) for r in output.collect()] == [
        ("o1", 12.5, False), ("o2", 5.0, False), ("o3", 20.0, False), ("o2", None, True)]


def test_latest_state_per_key_aggregation_ends_in_a_delete_after_a_tombstone(
        events: DataFrame) -> None:
    """The compaction-style view: the last record of a key decides, a tombstone deletes."""
    output = apply_transform(TransformConfig(sql=(
        "SELECT _kafka_key AS order_id, max_by(amount, _kafka_offset) AS amount, "
        "max_by(_kafka_tombstone, _kafka_offset) AS _dv_deleted "
        "FROM events WHERE _kafka_key IS NOT NULL GROUP BY _kafka_key")), events)
    assert sorted(tuple(r) for r in output.collect()) == [
        ("o1", 12.5, False), ("o2", None, True), ("o3", 20.0, False)]


def test_python_function_transform(events: DataFrame) -> None:
    output = apply_transform(
        TransformConfig(python="support.spark_job.sample_transforms:big_orders_per_customer"), events)
    assert sorted(tuple(r) for r in output.collect()) == [("c1", 2)]


@pytest.mark.parametrize(("ref", "expected"), [
    ("dvjob_no_such_module:f", "transform.python: cannot import 'dvjob_no_such_module'"),
    ("support.spark_job.sample_transforms:missing", "has no function 'missing'"),
    ("support.spark_job.sample_transforms:NOT_CALLABLE", "has no function 'NOT_CALLABLE'"),
    ("support.spark_job.sample_transforms:not_a_dataframe",
     "support.spark_job.sample_transforms:not_a_dataframe returned int, not a DataFrame"),
])
def test_python_transform_errors(events: DataFrame, ref: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        apply_transform(TransformConfig(python=ref), events)


def test_sql_errors_are_config_errors(events: DataFrame) -> None:
    with pytest.raises(ConfigError, match=r"transform.sql: .*no_such_column"):
        apply_transform(TransformConfig(sql="SELECT no_such_column FROM events"), events)


def test_the_same_transform_applies_to_a_stream(spark: SparkSession) -> None:
    """The job runs the transform on the streaming DataFrame; nothing here is batch-only."""
    fake_kafka = spark.readStream.format("rate").load().selectExpr(
        "CAST(NULL AS BINARY) AS key", "CAST(CONCAT('{\"customer_id\":\"c', value % 3, '\"}') AS BINARY) AS value",
        "'orders' AS topic", "0 AS partition", "value AS offset", "timestamp")
    events = parse_events(fake_kafka, value_schema("customer_id STRING"))
    output = apply_transform(TransformConfig(
        sql="SELECT customer_id, count(*) AS orders FROM events GROUP BY customer_id"), events)
    assert output.isStreaming
    assert [(f.name, f.dataType.simpleString()) for f in output.schema.fields] == [
        ("customer_id", "string"), ("orders", "bigint")]


@pytest.mark.parametrize("policy", ["fail", "skip"])
def test_each_record_is_parsed_once(kafka_frame: KafkaFrame, policy: str) -> None:
    """Spark would push the bad-record filter below the parse, inlining from_json into the
    filter and parsing each record several times (2x slower replays): the filter must stay
    above the projection that parses."""
    parsed = parse_events(kafka_frame(RECORDS), value_schema(SCHEMA), policy=policy)
    grouped = parsed.groupBy("customer_id").count()
    plan = grouped._jdf.queryExecution().optimizedPlan().toString()
    filters = [line for line in plan.splitlines() if line.lstrip(" +-:").startswith("Filter")]
    assert filters, plan
    whole_record = "StructField(order_id,StringType,true), StructField(customer_id"
    for line in filters:  # the filter reads the parse's output; only lazy probes parse again
        assert "_dv_parsed#" in line and whole_record not in line, plan
