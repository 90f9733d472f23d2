"""Kafka records -> the `events` rows the view's transform sees.

The value is JSON read with the view's DDL schema (fields the schema does not
name are ignored; a value that is not valid JSON yields nulls, as from_json's
PERMISSIVE mode does).  Kafka's metadata comes along as `_kafka_*` columns so a
transform can key on the record key, order by offset or turn a tombstone into
a delete.

`debezium` values are change events (bare, or wrapped as `{"schema", "payload"}`
by a JSON converter with schemas on); the DDL schema describes the table's
ROW, and the events expose the row as of the change: `after` for c/u/r,
`before` for d, and for a tombstone the record key's fields (Debezium's key
is the row's primary key), so `_debezium_deleted AS _dv_deleted` mirrors the
table.  An op the job cannot map (t, m, unknown, missing) fails the batch:
dropping it would silently diverge the index from the log.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, LongType, StringType, StructField, StructType

from dvjob.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

KAFKA_PREFIX = "_kafka_"
KAFKA_COLUMNS = ("_kafka_key", "_kafka_topic", "_kafka_partition", "_kafka_offset",
                 "_kafka_timestamp", "_kafka_tombstone")
DEBEZIUM_PREFIX = "_debezium_"
DEBEZIUM_COLUMNS = ("_debezium_op", "_debezium_ts_ms", "_debezium_deleted")
DEBEZIUM_ROW_OPS = ("c", "u", "r")
DEBEZIUM_DELETE_OP = "d"
RESERVED_PREFIXES = (KAFKA_PREFIX, DEBEZIUM_PREFIX)


def value_schema(ddl: str) -> StructType:
    """The DDL string as a struct; needs an active SparkSession to parse it."""
    try:
        parsed = DataType.fromDDL(ddl)
    except Exception as exc:  # ParseException; its message says where
        first_line = (str(exc).strip().splitlines() or [""])[0]
        raise ConfigError(f"source.schema: cannot parse {ddl!r}: {first_line[:300]}") from None
    if not isinstance(parsed, StructType) or not parsed.fields:
        raise ConfigError(f"source.schema: {ddl!r} must list one or more 'name TYPE' fields")
    clashes = [f.name for f in parsed.fields if f.name.lower().startswith(RESERVED_PREFIXES)]
    if clashes:
        raise ConfigError(f"source.schema: {', '.join(clashes)}: names starting with "
                          f"{' or '.join(map(repr, RESERVED_PREFIXES))} are reserved for "
                          "Kafka and Debezium metadata")
    return parsed


def parse_events(raw: DataFrame, schema: StructType, fmt: str = "json") -> DataFrame:
    """The events of either format; see the module docstring."""
    if fmt == "debezium":
        return parse_debezium_events(raw, schema)
    if fmt != "json":
        raise ConfigError(f"source.format: {fmt!r} is not supported (json, debezium)")
    return parse_json_events(raw, schema)


def _kafka_metadata() -> list[Column]:
    return [F.col("key").cast("string").alias("_kafka_key"),
            F.col("topic").alias("_kafka_topic"),
            F.col("partition").alias("_kafka_partition"),
            F.col("offset").alias("_kafka_offset"),
            F.col("timestamp").alias("_kafka_timestamp"),
            F.col("value").isNull().alias("_kafka_tombstone")]


def debezium_change(row: StructType) -> StructType:
    """A change event's fields the job reads."""
    return StructType([StructField("before", row), StructField("after", row),
                       StructField("op", StringType()), StructField("ts_ms", LongType())])


def _wrappable(fields: StructType) -> StructType:
    """`fields` at the top level or under `payload`, as a JSON converter with schemas on
    wraps values and keys."""
    return StructType([*fields.fields, StructField("payload", fields)])


def _unwrapped(parsed: Column, fields: StructType) -> Column:
    """`payload` when the converter wrapped the event (or key) with its schema, else itself."""
    bare = F.struct(*[parsed[f.name].alias(f.name) for f in fields.fields])
    return F.when(parsed["payload"].isNotNull(), parsed["payload"]).otherwise(bare)


def _from_json(column: str, fields: StructType) -> Column:
    """Parse a bare or payload-wrapped JSON column into `fields`."""
    parsed = F.from_json(F.col(column).cast("string"), _wrappable(fields))
    return _unwrapped(parsed, fields)


def parse_debezium_events(raw: DataFrame, row: StructType) -> DataFrame:
    """Row fields as of the change, `_kafka_*`, then `_debezium_op/_ts_ms/_deleted`."""
    staged = raw.select(
        _from_json("value", debezium_change(row)).alias("_dv_change"),
        _from_json("key", row).alias("_dv_key"), *_kafka_metadata())
    op = F.col("_dv_change.op")
    tombstone = F.col("_kafka_tombstone")
    refused = F.concat(
        F.lit("refused record "), F.col("_kafka_topic"), F.lit("/"),
        F.col("_kafka_partition").cast("string"), F.lit("@"),
        F.col("_kafka_offset").cast("string"), F.lit(": "),
        F.when(op.isNull(), F.lit("not a Debezium change event (no 'op'; is source.format "
                                  "right?)"))
        .otherwise(F.concat(F.lit("Debezium op '"), op, F.lit(
            "' cannot be mapped to upserts and deletes (c, u, r and d can)"))))
    mappable = op.isin(*DEBEZIUM_ROW_OPS, DEBEZIUM_DELETE_OP)
    # A filter, not a column: the check must run even when the transform reads no metadata.
    checked = staged.where(F.when(tombstone | mappable, F.lit(True))
                           .otherwise(F.raise_error(refused).cast("boolean")))
    image = (F.when(tombstone, F.col("_dv_key"))
             .when(op == DEBEZIUM_DELETE_OP, F.col("_dv_change.before"))
             .otherwise(F.col("_dv_change.after")))
    expanded = checked.select(
        image.alias("_dv_row"), *KAFKA_COLUMNS,
        F.when(tombstone, F.lit(None).cast("string")).otherwise(op).alias("_debezium_op"),
        F.col("_dv_change.ts_ms").alias("_debezium_ts_ms"),
        (tombstone | (op == DEBEZIUM_DELETE_OP)).alias("_debezium_deleted"))
    return expanded.select("_dv_row.*", *KAFKA_COLUMNS, *DEBEZIUM_COLUMNS)


def parse_json_events(raw: DataFrame, schema: StructType) -> DataFrame:
    """Value fields plus `_kafka_key` (string), topic, partition, offset, timestamp, tombstone."""
    with_payload = raw.select(
        F.from_json(F.col("value").cast("string"), schema).alias("_dv_payload"),
        *_kafka_metadata())
    # Expanding the struct in a second step parses each value once, not once per field.
    return with_payload.select("_dv_payload.*", *KAFKA_COLUMNS)
