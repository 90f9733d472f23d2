"""Kafka records -> the `events` rows the view's transform sees.

The value is JSON read with the view's DDL schema (fields the schema does not
name are ignored; a value that is not valid JSON yields nulls, as from_json's
PERMISSIVE mode does).  Kafka's metadata comes along as `_kafka_*` columns so a
transform can key on the record key, order by offset or turn a tombstone into
a delete.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StructType

from dvjob.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

KAFKA_PREFIX = "_kafka_"
KAFKA_COLUMNS = ("_kafka_key", "_kafka_topic", "_kafka_partition", "_kafka_offset",
                 "_kafka_timestamp", "_kafka_tombstone")


def value_schema(ddl: str) -> StructType:
    """The DDL string as a struct; needs an active SparkSession to parse it."""
    try:
        parsed = DataType.fromDDL(ddl)
    except Exception as exc:  # ParseException; its message says where
        first_line = (str(exc).strip().splitlines() or [""])[0]
        raise ConfigError(f"source.schema: cannot parse {ddl!r}: {first_line[:300]}") from None
    if not isinstance(parsed, StructType) or not parsed.fields:
        raise ConfigError(f"source.schema: {ddl!r} must list one or more 'name TYPE' fields")
    clashes = [f.name for f in parsed.fields if f.name.lower().startswith(KAFKA_PREFIX)]
    if clashes:
        raise ConfigError(f"source.schema: {', '.join(clashes)}: names starting with "
                          f"{KAFKA_PREFIX!r} are reserved for Kafka metadata")
    return parsed


def parse_events(raw: DataFrame, schema: StructType) -> DataFrame:
    """Value fields plus `_kafka_key` (string), topic, partition, offset, timestamp, tombstone."""
    with_payload = raw.select(
        F.from_json(F.col("value").cast("string"), schema).alias("_dv_payload"),
        F.col("key").cast("string").alias("_kafka_key"),
        F.col("topic").alias("_kafka_topic"),
        F.col("partition").alias("_kafka_partition"),
        F.col("offset").alias("_kafka_offset"),
        F.col("timestamp").alias("_kafka_timestamp"),
        F.col("value").isNull().alias("_kafka_tombstone"),
    )
    # Expanding the struct in a second step parses each value once, not once per field.
    return with_payload.select("_dv_payload.*", *KAFKA_COLUMNS)
