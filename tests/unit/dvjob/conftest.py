"""Fixtures for the Spark job's unit tests: a small local SparkSession, no services."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from dvjob.sql import guard as sql_guard
from support.corpora.hostile_transforms import SCHEMA
from support.spark_job.kafka_records import KAFKA_SOURCE_SCHEMA, KafkaRecord


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


@pytest.fixture(scope="module")
def events(spark: SparkSession) -> Iterator[None]:
    """The session as the job leaves it: hardened, `events` its only view (the hostile
    transforms' SCHEMA), for the guard's tests."""
    sql_guard.harden(spark)
    frame = spark.createDataFrame(
        [("o1", "c1", 2.5, datetime(2024, 5, 1, tzinfo=UTC), 7)],
        f"{SCHEMA}, _kafka_offset LONG")
    frame.createOrReplaceTempView("events")
    yield
    spark.catalog.dropTempView("events")
