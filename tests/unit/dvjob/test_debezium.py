"""Debezium change events -> the rows a view's transform sees, and the deletes it can emit."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from dvjob.config import TransformConfig
from dvjob.errors import ConfigError, one_line
from dvjob.sinks.schema import DELETED_COLUMN
from dvjob.source.parse import parse_events, value_schema
from dvjob.transform import apply_transform
from support.spark_job.kafka_records import KafkaRecord

ROW_DDL = "id INT, name STRING"
MIRROR_SQL = f"SELECT id, name, _debezium_deleted AS {DELETED_COLUMN} FROM events"


def change(op: str | None, before: dict[str, Any] | None, after: dict[str, Any] | None,
           *, wrapped: bool = False, ts_ms: int = 1_700_000_000_000) -> str:
    event: dict[str, Any] = {"before": before, "after": after, "ts_ms": ts_ms,
                             "source": {"connector": "postgresql", "table": "customers"}}
    if op is not None:
        event["op"] = op
    if wrapped:  # the JSON converter with schemas.enable=true
        return json.dumps({"schema": {"type": "struct", "name": "customers.Envelope"},
                           "payload": event})
    return json.dumps(event)


def key(id_: int, *, wrapped: bool = False) -> str:
    return json.dumps({"schema": {"type": "struct"}, "payload": {"id": id_}} if wrapped
                      else {"id": id_})


@pytest.fixture
def debezium(spark: SparkSession, kafka_frame: Callable[[Sequence[KafkaRecord]], DataFrame]
             ) -> Callable[[Sequence[KafkaRecord]], DataFrame]:
    schema = value_schema(ROW_DDL)
    return lambda records: parse_events(kafka_frame(records), schema, "debezium")


def test_columns_are_row_fields_then_kafka_then_debezium_metadata(debezium: Any) -> None:
    events = debezium([(key(1), change("c", None, {"id": 1, "name": "ada"}), 0, 0)])
    assert events.columns == ["id", "name", "_kafka_key", "_kafka_topic", "_kafka_partition",
                              "_kafka_offset", "_kafka_timestamp", "_kafka_tombstone",
                              "_debezium_op", "_debezium_ts_ms", "_debezium_deleted"]


def test_each_op_exposes_the_row_as_of_the_change(debezium: Any) -> None:
    events = debezium([
        (key(1), change("r", None, {"id": 1, "name": "ada"}), 0, 0),            # snapshot read
        (key(2), change("c", None, {"id": 2, "name": "bob"}), 0, 1),
        (key(1), change("u", {"id": 1, "name": "ada"}, {"id": 1, "name": "ada l."}), 0, 2),
        (key(2), change("d", {"id": 2, "name": "bob"}, None), 0, 3),
        (key(2), None, 0, 4),                                                    # tombstone
    ])
    rows = [tuple(r) for r in events.select(
        "id", "name", "_kafka_offset", "_debezium_op", "_debezium_deleted").collect()]
    assert rows == [
        (1, "ada", 0, "r", False),
        (2, "bob", 1, "c", False),
        (1, "ada l.", 2, "u", False),
        (2, "bob", 3, "d", True),        # the `before` image identifies the deleted row
        (2, None, 4, None, True),        # only the key's fields: enough to delete by key
    ]


def test_schema_wrapped_events_and_keys_read_like_bare_ones(debezium: Any) -> None:
    events = debezium([
        (key(7, wrapped=True), change("c", None, {"id": 7, "name": "cy"}, wrapped=True,
                                      ts_ms=42), 0, 0),
        (key(7, wrapped=True), change("d", {"id": 7, "name": "cy"}, None, wrapped=True), 0, 1),
        (key(7, wrapped=True), None, 0, 2),
    ])
    rows = [tuple(r) for r in events.select(
        "id", "name", "_debezium_op", "_debezium_ts_ms", "_debezium_deleted").collect()]
    assert rows == [(7, "cy", "c", 42, False), (7, "cy", "d", 1_700_000_000_000, True),
                    (7, None, None, None, True)]


def test_a_mirror_transform_upserts_and_deletes_by_key(debezium: Any) -> None:
    events = debezium([
        (key(1), change("c", None, {"id": 1, "name": "ada"}), 0, 0),
        (key(2), change("c", None, {"id": 2, "name": "bob"}), 0, 1),
        (key(2), change("d", {"id": 2, "name": None}, None), 0, 2),  # default replica identity
    ])
    out = apply_transform(TransformConfig.model_validate({"sql": MIRROR_SQL}), events)
    assert [tuple(r) for r in out.collect()] == [(1, "ada", False), (2, "bob", False),
                                                 (2, None, True)]


@pytest.mark.parametrize(("value", "expected"), [
    (change("t", None, None), "refused record orders/0@5: Debezium op 't' cannot be mapped"),
    (change("x", None, {"id": 1, "name": "a"}), "Debezium op 'x' cannot be mapped"),
    (json.dumps({"id": 1, "name": "plain json"}),
     "refused record orders/0@5: not a Debezium change event (no 'op'"),
])
def test_an_unmappable_record_fails_the_batch_naming_it(debezium: Any, value: str,
                                                        expected: str) -> None:
    events = debezium([(key(1), change("c", None, {"id": 1, "name": "a"}), 0, 4),
                       (key(1), value, 0, 5)])
    # even a transform that reads no metadata at all must not drop the record silently
    out = apply_transform(TransformConfig.model_validate({"sql": "SELECT id FROM events"}),
                          events)
    with pytest.raises(Exception, match="refused record") as failure:
        out.collect()
    assert expected in str(failure.value)


def test_debezium_names_are_reserved_in_the_row_schema(spark: SparkSession) -> None:
    with pytest.raises(ConfigError, match="_debezium_op: names starting with"):
        value_schema("id INT, _debezium_op STRING")


def test_an_unknown_format_is_a_config_error(kafka_frame: Any) -> None:
    with pytest.raises(ConfigError, match=r"source\.format: 'protobuf' is not supported"):
        parse_events(kafka_frame([]), value_schema(ROW_DDL), "protobuf")


def test_the_error_line_is_the_refusal_not_the_py4j_wrapper() -> None:
    wrapped = Exception(
        "An error occurred while calling o330.getResult.\n"
        ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 ...\n"
        "org.apache.spark.SparkRuntimeException: [USER_RAISED_EXCEPTION] refused record "
        "t/0@9: Debezium op 't' cannot be mapped to upserts and deletes (c, u, r and d can) "
        "SQLSTATE: P0001\n\tat org.apache.spark.sql.errors.QueryExecutionErrors$.raiseError")
    assert one_line(wrapped) == ("refused record t/0@9: Debezium op 't' cannot be mapped to "
                                 "upserts and deletes (c, u, r and d can)")
    assert one_line(ValueError("bad thing\nmore")) == "ValueError: bad thing"
