"""The training job of the stand-in's class archive: what a view's job loads at start.

Run once by `spark_jvm.ensure_archive` under `-XX:ArchiveClassesAtExit`: a Spark
session, JSON parsing, an aggregation and a streaming query with foreachBatch, so
the classes of the catalyst planner, code generation and micro-batch execution are
in the archive.
"""

from __future__ import annotations

import time

from pyspark.sql import DataFrame, SparkSession

DEADLINE_SECONDS = 120.0


def train_jvm() -> None:
    spark = SparkSession.builder.appName("dv-class-archive").getOrCreate()
    rows = spark.createDataFrame([('{"k": "a", "v": 1.5}',), ('{"k": "b", "v": 2}',)], ["value"])
    parsed = rows.selectExpr("from_json(value, 'k STRING, v DOUBLE') AS e").select("e.*")
    parsed.groupBy("k").agg({"v": "sum"}).collect()
    batches: list[int] = []

    def each(frame: DataFrame, batch_id: int) -> None:
        frame.groupBy("value").count().collect()
        batches.append(batch_id)

    query = (spark.readStream.format("rate").option("rowsPerSecond", 100).load()
             .selectExpr("value % 7 AS value").writeStream.foreachBatch(each)
             .trigger(processingTime="200 milliseconds").start())
    deadline = time.monotonic() + DEADLINE_SECONDS
    while len(batches) < 2 and time.monotonic() < deadline and query.isActive:
        query.awaitTermination(1)
    query.stop()
    spark.stop()


if __name__ == "__main__":
    train_jvm()
