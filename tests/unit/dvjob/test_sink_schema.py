"""The index table derived from the transform's output, and the COPY-ready projection."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    CalendarIntervalType,
    DataType,
    DateType,
    DayTimeIntervalType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
    VariantType,
)

from dvjob.errors import ConfigError
from dvjob.sinks.schema import (
    SinkColumn,
    TableLayout,
    UnsupportedTypeError,
    pg_column_type,
    sink_projection,
    table_layout,
)


@pytest.mark.parametrize(("spark_type", "pg_type", "transport"), [
    (StringType(), "text", "plain"),
    (LongType(), "bigint", "plain"),
    (IntegerType(), "integer", "plain"),
    (ShortType(), "smallint", "plain"),
    (ByteType(), "smallint", "plain"),
    (DoubleType(), "double precision", "plain"),
    (FloatType(), "real", "plain"),
    (DecimalType(12, 2), "numeric(12,2)", "plain"),
    (BooleanType(), "boolean", "plain"),
    (TimestampType(), "timestamptz", "timestamp_text"),
    (TimestampNTZType(), "timestamp", "plain"),
    (DateType(), "date", "plain"),
    (BinaryType(), "bytea", "plain"),
    (ArrayType(StringType()), "jsonb", "json_text"),
    (MapType(StringType(), LongType()), "jsonb", "json_text"),
    (StructType([StructField("a", IntegerType())]), "jsonb", "json_text"),
    (VariantType(), "jsonb", "json_text"),
])
def test_type_mapping(spark_type: DataType, pg_type: str, transport: str) -> None:
    assert pg_column_type(spark_type) == (pg_type, transport)


@pytest.mark.parametrize(("spark_type", "expected"), [
    (NullType(), "has no type"),
    (DayTimeIntervalType(), "has type interval day to second, which has no PostgreSQL mapping"),
    (CalendarIntervalType(), "has type interval, which has no PostgreSQL mapping"),
])
def test_unmapped_types_are_clear_errors(spark_type: DataType, expected: str) -> None:
    with pytest.raises(UnsupportedTypeError, match=expected):
        pg_column_type(spark_type)


def _schema(*fields: tuple[str, DataType]) -> StructType:
    return StructType([StructField(name, data_type) for name, data_type in fields])


def test_layout_keeps_output_order_and_leaves_out_the_delete_flag() -> None:
    layout = table_layout(_schema(("order_id", StringType()), ("_dv_deleted", BooleanType()),
                                  ("amount", DecimalType(10, 2)), ("ts", TimestampType())),
                          ["order_id"])
    assert layout == TableLayout(
        columns=(SinkColumn("order_id", "text"), SinkColumn("amount", "numeric(10,2)"),
                 SinkColumn("ts", "timestamptz", "timestamp_text")),
        primary_key=("order_id",), has_delete_flag=True)
    assert layout.column_names == ("order_id", "amount", "ts")


def test_key_positions_follow_the_key_order() -> None:
    layout = table_layout(_schema(("day", DateType()), ("n", LongType()), ("shop", StringType())),
                          ["shop", "day"])
    assert layout.key_positions == (2, 0)
    assert layout.has_delete_flag is False


@pytest.mark.parametrize(("fields", "key", "expected"), [
    ([("customer", StringType()), ("orders", LongType())], ["customer_id"],
     r"sink.primaryKey: customer_id not in the transform's output columns \(customer, orders\)"),
    ([("Customer_Id", StringType())], ["customer_id"], "names are case-sensitive"),
    ([("id", StringType()), ("_dv_deleted", StringType())], ["id"],
     "_dv_deleted must be BOOLEAN, not string"),
    ([("id", StringType()), ("_dv_version", LongType())], ["id"],
     "column '_dv_version': names starting with '_dv_' are reserved"),
    ([("id", StringType()), ("n", LongType()), ("n", LongType())], ["id"],
     "column names repeat: n"),
    ([("id", StringType()), ("c" * 64, LongType())], ["id"],
     "column name '" + "c" * 64 + "' is longer than PostgreSQL's limit of 63 bytes"),
    ([("id", StringType()), ("x", NullType())], ["id"], "column 'x' has no type"),
])
def test_layout_errors(fields: list[tuple[str, DataType]], key: list[str], expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        table_layout(_schema(*fields), key)


def test_projection_makes_rows_copy_ready(spark: SparkSession) -> None:
    schema = _schema(("id", StringType()), ("ts", TimestampType()), ("tags", ArrayType(StringType())),
                     ("amount", DecimalType(10, 2)), ("day", DateType()), ("_dv_deleted", BooleanType()))
    frame = spark.createDataFrame([
        ("a", datetime(2024, 7, 1, 12, 30, 15, 250, tzinfo=UTC), ["x", "y"], Decimal("9.99"),
         date(2024, 7, 1), None),
        ("b", None, None, None, None, True),
    ], schema)
    layout = table_layout(frame.schema, ["id"])
    previous = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")  # UTC-4 in July
    try:
        rows = [tuple(r) for r in sink_projection(frame, layout).collect()]
    finally:
        spark.conf.set("spark.sql.session.timeZone", previous or "UTC")
    assert rows == [
        ("a", "2024-07-01 08:30:15.000250-04:00", '["x","y"]', Decimal("9.99"), date(2024, 7, 1), False),
        ("b", None, None, None, None, True),
    ]


def test_projection_without_a_delete_flag_upserts_everything(spark: SparkSession) -> None:
    frame = spark.createDataFrame([("a", 1), ("b", 2)], _schema(("id", StringType()), ("n", LongType())))
    rows = [tuple(r) for r in sink_projection(frame, table_layout(frame.schema, ["id"])).collect()]
    assert rows == [("a", 1, False), ("b", 2, False)]


def test_projection_takes_odd_column_names_literally(spark: SparkSession) -> None:
    frame = spark.createDataFrame([("k", 1)], _schema(("a.b", StringType()), ("we`ird", LongType())))
    rows = [tuple(r) for r in sink_projection(frame, table_layout(frame.schema, ["a.b"])).collect()]
    assert rows == [("k", 1, False)]
