"""Aggregates over a Debezium changelog are refused at job start; projections are not."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from dvjob.config import TransformConfig
from dvjob.errors import ConfigError
from dvjob.source.changelog import combining_nodes, refuse_changelog_aggregates
from dvjob.source.parse import parse_events, value_schema
from dvjob.transform import apply_transform
from support.spark_job.kafka_records import KafkaRecord

ROW_DDL = "id INT, customer STRING, amount DOUBLE"
CREATED = '{"op": "c", "before": null, "after": {"id": 1, "customer": "c1", "amount": 10.0}}'
UPDATED = ('{"op": "u", "before": {"id": 1, "customer": "c1", "amount": 10.0}, '
           '"after": {"id": 1, "customer": "c1", "amount": 25.0}}')


@pytest.fixture
def output(spark: SparkSession, kafka_frame: Callable[[Sequence[KafkaRecord]], DataFrame]
           ) -> Callable[[str, str], DataFrame]:
    def build(sql: str, fmt: str = "debezium") -> DataFrame:
        records: list[KafkaRecord] = [('{"id": 1}', CREATED, 0, 0), ('{"id": 1}', UPDATED, 0, 1)]
        events = parse_events(kafka_frame(records), value_schema(ROW_DDL), fmt)
        return apply_transform(TransformConfig(sql=sql), events)
    return build


def test_the_refused_aggregate_is_wrong_over_a_changelog(output: Any) -> None:
    # Why the rule exists: the row's amount is 25, the aggregate says 35.
    frame = output("SELECT customer, sum(amount) AS total FROM events GROUP BY customer")
    assert [tuple(r) for r in frame.collect()] == [("c1", 35.0)]
    with pytest.raises(ConfigError) as refused:
        refuse_changelog_aggregates(frame, "debezium")
    message = str(refused.value)
    assert "Aggregate in the query plan" in message
    assert "_debezium_deleted AS _dv_deleted" in message  # what to write instead


@pytest.mark.parametrize("sql", [
    "SELECT count(*) AS n FROM events",
    "SELECT DISTINCT customer FROM events",
    "SELECT id, max_by(amount, _kafka_offset) AS amount FROM events GROUP BY id",
    "SELECT customer, n FROM (SELECT customer, count(*) AS n FROM events GROUP BY customer) "
    "WHERE n > 0",
])
def test_every_aggregate_shape_is_refused(output: Any, sql: str) -> None:
    with pytest.raises(ConfigError, match="aggregates over a changelog are refused"):
        refuse_changelog_aggregates(output(sql), "debezium")


def test_a_projection_mirroring_the_table_passes(output: Any) -> None:
    frame = output("SELECT id, amount, _debezium_deleted AS _dv_deleted FROM events "
                   "WHERE amount > 0")
    assert combining_nodes(frame) == []
    refuse_changelog_aggregates(frame, "debezium")


def test_aggregates_over_json_events_are_left_alone(output: Any) -> None:
    frame = output("SELECT count(*) AS n FROM events", "json")
    assert combining_nodes(frame) == ["Aggregate"]
    refuse_changelog_aggregates(frame, "json")
