"""Fixtures for the Spark job's unit tests: a small local SparkSession, no services."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
SPARK_TEMPLATES = HERE.parents[2] / "spark_templates"
for path in (SPARK_TEMPLATES, HERE):  # the job's package; the sample transform module
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql.types import (  # noqa: E402
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


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = (SparkSession.builder.master("local[1]").appName("dvjob-unit-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .getOrCreate())
    yield session
    session.stop()


@pytest.fixture
def kafka_frame(spark: SparkSession) -> Callable[[Sequence[KafkaRecord]], DataFrame]:
    """A static DataFrame shaped like Spark's Kafka source, from simple records."""
    def build(records: Sequence[KafkaRecord]) -> DataFrame:
        rows: list[tuple[Any, ...]] = [
            (None if key is None else bytearray(key.encode()),
             None if value is None else bytearray(value.encode()),
             "orders", partition, offset, datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC), 0)
            for key, value, partition, offset in records]
        return spark.createDataFrame(rows, KAFKA_SOURCE_SCHEMA)
    return build
