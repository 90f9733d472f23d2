"""Each kind of bad record, found per record before the transform; the batch range re-read."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from pyspark.sql import DataFrame

from dvjob.config import TransformConfig, parse_config
from dvjob.errors import ConfigError
from dvjob.offsets import start_offsets
from dvjob.source.bad_records import range_reader_options, range_text, writer_options
from dvjob.source.parse import BAD_CAUSE, bad_records, parse_events, value_schema
from dvjob.transform import apply_transform
from support.spark_job.kafka_records import KafkaRecord

KafkaFrame = Callable[[Sequence[KafkaRecord]], DataFrame]
DDL = "order_id STRING, customer_id STRING, amount DOUBLE, tags ARRAY<STRING>"
GOOD = '{"order_id":"o1","customer_id":"c1","amount":2.5,"tags":["a"]}'
CASES = [  # value -> cause (None: good)
    (GOOD, None),
    ('{"order_id":"o2","customer_id":"c1","amount":1}', None),   # an int fits DOUBLE
    (None, None),                                                  # a tombstone is a delete
    ("not json {", "value is not a JSON object"),
    ("", "value is not a JSON object"),
    ("[1, 2]", "value is not a JSON object"),
    ("42", "value is not a JSON object"),
    ('{"order_id":"o3","customer_id":"c1","amount":"lots"}',
     "field 'amount' does not match source.schema type DOUBLE"),
    ('{"order_id":"o4","customer_id":"c1","amount":1.0,"tags":"x"}',
     "field 'tags' does not match source.schema type ARRAY<STRING>"),
    ('{"order_id":"o5","customer_id":"c\\u0000","amount":1.0}',
     "field 'customer_id' contains a NUL character (U+0000), which PostgreSQL text cannot hold"),
    ('{"order_id":"o6","customer_id":"c1","amount":1.0,"tags":["\\u0000"]}',
     "field 'tags' contains a NUL character"),
]


def causes(kafka_frame: KafkaFrame) -> list[Any]:
    frame = kafka_frame([(f"k{i}", value, 0, i) for i, (value, _) in enumerate(CASES)])
    bad = bad_records(frame, value_schema(DDL), "json").orderBy("offset").collect()
    by_offset = {row["offset"]: row[BAD_CAUSE] for row in bad}
    return [by_offset.get(i) for i in range(len(CASES))]


def test_each_kind_is_named(kafka_frame: KafkaFrame) -> None:
    found = causes(kafka_frame)
    for (value, expected), cause in zip(CASES, found, strict=True):
        if expected is None:
            assert cause is None, (value, cause)
        else:
            assert cause is not None and cause.startswith(expected), (value, cause)


def test_skip_keeps_bad_records_away_from_aggregates(kafka_frame: KafkaFrame) -> None:
    frame = kafka_frame([(f"k{i}", value, 0, i) for i, (value, _) in enumerate(CASES)])
    events = parse_events(frame, value_schema(DDL), "json", "skip")
    out = apply_transform(TransformConfig(sql=(
        "SELECT count(*) AS n, sum(amount) AS total FROM events WHERE NOT _kafka_tombstone")),
        events)
    assert [tuple(r) for r in out.collect()] == [(2, 3.5)]  # o1 and o2 only


def test_fail_raises_naming_the_record(kafka_frame: KafkaFrame) -> None:
    frame = kafka_frame([("k0", GOOD, 1, 7), ("k1", "nope", 1, 8)])
    events = parse_events(frame, value_schema(DDL), "json", "fail")
    with pytest.raises(Exception, match="refused record") as failure:
        events.select("order_id").collect()
    assert ("refused record orders/1@8: value is not a JSON object; source.badRecords.policy "
            "is fail") in str(failure.value)


def test_debezium_envelope_of_the_wrong_type_is_bad(kafka_frame: KafkaFrame) -> None:
    change = json.dumps({"op": "c", "before": None, "after": {"id": "one", "name": "a"}})
    frame = kafka_frame([('{"id":1}', change, 0, 0), ('{"id":1}', "{", 0, 1),
                         ("not json", None, 0, 2)])
    bad = {r["offset"]: r[BAD_CAUSE] for r in
           bad_records(frame, value_schema("id INT, name STRING"), "debezium").collect()}
    assert bad[0].startswith("value does not match source.schema")
    assert bad[1] == "value is not a JSON object"
    assert bad[2].startswith("tombstone whose key is not a JSON object")


def test_a_batch_starts_where_the_previous_ended_or_at_the_earliest() -> None:
    end = {"orders": {"0": 10, "1": 4}, "new": {"0": 2}}
    assert start_offsets({"orders": {"0": 6}}, end) == {"orders": {"0": 6, "1": -2},
                                                         "new": {"0": -2}}
    assert start_offsets(None, {"orders": {"0": 3}}) == {"orders": {"0": -2}}
    assert range_text({"orders": {"0": 6, "1": -2}}, {"orders": {"1": 4, "0": 10}}) == (
        "orders/0 [6, 10), orders/1 [earliest, 4)")


def test_the_re_read_is_the_stream_reader_bounded_to_the_batch() -> None:
    stream = {"kafka.bootstrap.servers": "k:9092", "subscribe": "orders",
              "startingOffsets": "earliest", "maxOffsetsPerTrigger": "5",
              "kafka.sasl.mechanism": "PLAIN"}
    start, end = {"orders": {"0": 6, "1": -2}}, {"orders": {"0": 10, "1": 4}}
    options = range_reader_options(stream, start, end)
    assert options == {"kafka.bootstrap.servers": "k:9092", "kafka.sasl.mechanism": "PLAIN",
                       "assign": '{"orders": [0, 1]}', "startingOffsets": json.dumps(start),
                       "endingOffsets": json.dumps(end), "includeHeaders": "true"}
    assert writer_options(stream, "dead") == {"kafka.bootstrap.servers": "k:9092",
                                              "kafka.sasl.mechanism": "PLAIN", "topic": "dead"}


def config(bad: dict[str, Any]) -> str:
    return json.dumps({
        "view": "v", "revision": "r1", "checkpointLocation": "/c", "trigger": {"availableNow": True},
        "source": {"bootstrapServers": "k:9092", "topics": ["orders"], "schema": "a INT",
                   "badRecords": bad},
        "transform": {"sql": "SELECT a FROM events"},
        "sink": {"table": "t", "primaryKey": ["a"]}})


@pytest.mark.parametrize(("bad", "expected"), [
    ({"policy": "deadLetter"}, "deadLetterTopic is required with policy deadLetter"),
    ({"policy": "skip", "deadLetterTopic": "d"}, "deadLetterTopic is required"),
    ({"policy": "deadLetter", "deadLetterTopic": "orders"}, "must not be one of the source"),
    ({"policy": "drop"}, "source.badRecords.policy"),
])
def test_the_job_refuses_a_bad_policy(bad: dict[str, Any], expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        parse_config(config(bad))
