"""Records shaped like Spark's Kafka source, for the job's unit tests (conftest's
`kafka_frame` builds a DataFrame of them)."""

from __future__ import annotations

from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

# The columns Spark's Kafka source produces (headers off).
KAFKA_SOURCE_SCHEMA = StructType([
    StructField("key", BinaryType()), StructField("value", BinaryType()),
    StructField("topic", StringType()), StructField("partition", IntegerType()),
    StructField("offset", LongType()), StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
])

KafkaRecord = tuple[str | None, str | None, int, int]
"""(key, value JSON or None for a tombstone, partition, offset) of topic `orders`."""
