"""Python transforms referenced as "support.spark_job.sample_transforms:<name>" by the tests."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F


def big_orders_per_customer(events: DataFrame) -> DataFrame:
    """Orders of 10 or more, counted per customer (the python kind of transform)."""
    return (events.where(F.col("amount") >= 10)
            .groupBy("customer_id")
            .agg(F.count(F.lit(1)).alias("big_orders")))


def not_a_dataframe(events: DataFrame) -> int:
    return 42


NOT_CALLABLE = "just a string"
