"""Reading a batch's end offsets from Spark's offset log, and where the replay began from
the Kafka source's initial offsets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from dvjob.offsets import (
    OffsetLogError,
    initial_offsets_path,
    offset_log_path,
    parse_initial_offsets,
    parse_offset_log,
    read_end_offsets,
    read_history_start,
)

METADATA = ('{"batchWatermarkMs":0,"batchTimestampMs":1714564800000,'
            '"conf":{"spark.sql.shuffle.partitions":"4"}}')


def test_one_kafka_source_over_two_topics() -> None:
    text = f'v1\n{METADATA}\n{{"orders":{{"0":1234,"1":99}},"refunds":{{"0":0}}}}'
    assert parse_offset_log(text) == {"orders": {"0": 1234, "1": 99}, "refunds": {"0": 0}}


def test_several_source_lines_are_merged_and_a_trailing_newline_is_fine() -> None:
    text = f'v1\n{METADATA}\n{{"orders":{{"2":7}}}}\n{{"refunds":{{"0":3}}}}\n'
    assert parse_offset_log(text) == {"orders": {"2": 7}, "refunds": {"0": 3}}


@pytest.mark.parametrize(("text", "expected"), [
    ("", "expected version line 'v1', found ''"),
    (f'v2\n{METADATA}\n{{"orders":{{"0":1}}}}', "expected version line 'v1', found 'v2'"),
    (f"v1\n{METADATA}", "no source offsets"),
    ('v1\n[1, 2]\n{"orders":{"0":1}}', "second line is not the batch metadata JSON object"),
    ('v1\nnot json\n{"orders":{"0":1}}', "second line is not the batch metadata JSON object"),
    (f"v1\n{METADATA}\n-", "a source has no offset"),
    (f"v1\n{METADATA}\n5", "is not Kafka offsets"),  # a rate source's offset
    (f'v1\n{METADATA}\n{{"logOffset":0}}', "topic 'logOffset' has no partition offsets"),  # files
    (f"v1\n{METADATA}\n{{orders", "is not JSON"),
    (f'v1\n{METADATA}\n{{"orders":{{}}}}', "topic 'orders' has no partition offsets"),
    (f'v1\n{METADATA}\n{{"orders":{{"p0":1}}}}', "partition 'p0' is not a partition number"),
    (f'v1\n{METADATA}\n{{"orders":{{"0":-2}}}}', "offset -2 is not a non-negative integer"),
    (f'v1\n{METADATA}\n{{"orders":{{"0":1.5}}}}', "offset 1.5 is not a non-negative integer"),
    (f'v1\n{METADATA}\n{{"orders":{{"0":true}}}}', "offset True is not a non-negative integer"),
    (f'v1\n{METADATA}\n{{"orders":{{"0":1}}}}\n{{"orders":{{"1":1}}}}',
     "topic 'orders' appears in two sources"),
])
def test_malformed_offset_logs_fail_clearly(text: str, expected: str) -> None:
    with pytest.raises(OffsetLogError) as raised:
        parse_offset_log(text, where="offsets/3")
    assert str(raised.value).startswith("offsets/3: ")
    assert expected in str(raised.value)


topics = st.text(alphabet="abcdefghijklmnopqrstuvwxyz._-0123456789", min_size=1, max_size=20)
partitions = st.dictionaries(st.integers(0, 10_000), st.integers(0, 2**62), min_size=1, max_size=8)


@given(st.dictionaries(topics, partitions, min_size=1, max_size=5))
def test_offsets_round_trip_through_spark_s_format(offsets: dict[str, dict[int, int]]) -> None:
    line = json.dumps({topic: {str(p): o for p, o in parts.items()} for topic, parts in offsets.items()},
                      separators=(",", ":"))
    parsed = parse_offset_log(f"v1\n{METADATA}\n{line}")
    assert {topic: {int(p): o for p, o in parts.items()} for topic, parts in parsed.items()} == offsets


def test_path_of_a_batch() -> None:
    assert offset_log_path("s3a://bucket/ck/", 12) == "s3a://bucket/ck/offsets/12"
    assert offset_log_path("/ck", 0) == "/ck/offsets/0"


def test_read_through_spark_from_a_path_or_a_uri(spark: SparkSession, tmp_path: Path) -> None:
    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "7").write_text(f'v1\n{METADATA}\n{{"orders":{{"0":40,"1":2}}}}')
    expected = {"orders": {"0": 40, "1": 2}}
    assert read_end_offsets(spark, str(tmp_path), 7) == expected
    assert read_end_offsets(spark, tmp_path.as_uri() + "/", 7) == expected


def test_missing_offset_log_is_a_clear_error(spark: SparkSession, tmp_path: Path) -> None:
    with pytest.raises(OffsetLogError, match=r"cannot read offset log .*/offsets/3: "):
        read_end_offsets(spark, str(tmp_path), 3)


def test_the_header_spark_writes_is_understood(spark: SparkSession, tmp_path: Path) -> None:
    """A real offset log from this Spark version: the header parses, and the
    rate source's offset (not Kafka's) is rejected by name, not misread."""
    checkpoint = tmp_path / "checkpoint"
    query = (spark.readStream.format("rate").option("rowsPerSecond", 1).load()
             .writeStream.format("noop").option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    with pytest.raises(OffsetLogError, match="is not Kafka offsets"):
        read_end_offsets(spark, str(checkpoint), 0)


SPARK_INITIAL_OFFSETS = b'\x00v1\n{"orders":{"0":7,"1":2,"2":0},"refunds":{"0":3}}'
"""`<checkpoint>/sources/0/0` as PySpark 4.0.0 (spark-sql-kafka-0-10 4.0.0) wrote it for a
query subscribed to `orders` (3 partitions) and `refunds` (1), started with
startingOffsets=earliest after AdminClient.delete_records had moved the log start of orders/0
to 7, orders/1 to 2 and refunds/0 to 3: a zero byte, `v1`, the JSON, no newline at the end."""


def test_the_initial_offsets_spark_writes_are_the_history_start() -> None:
    assert parse_initial_offsets(SPARK_INITIAL_OFFSETS.decode("utf-8")) == {
        "orders": {"0": 7, "1": 2, "2": 0}, "refunds": {"0": 3}}


def test_initial_offsets_without_the_zero_byte_or_with_a_newline_are_read_alike() -> None:
    text = SPARK_INITIAL_OFFSETS.decode("utf-8")
    assert parse_initial_offsets(text[1:] + "\n") == parse_initial_offsets(text)


def test_initial_offsets_of_topics_that_did_not_exist_yet_are_empty() -> None:
    """A query started before any of its topics existed resolves `earliest` to nothing."""
    assert parse_initial_offsets("\x00v1\n{}") == {}


@pytest.mark.parametrize(("text", "expected"), [
    ("", "expected version line 'v1', found ''"),
    ("\x00v1", "no offsets after the version line"),
    ("\x00v1\n", "no offsets after the version line"),
    ('\x00v2\n{"orders":{"0":1}}', "expected version line 'v1', found 'v2'"),
    ('\x00{"orders":{"0":1}}', "expected version line 'v1'"),  # Spark 2.1.0's, unversioned
    ("\x00v1\n{orders", "is not JSON"),
    ("\x00v1\n[1]", "is not Kafka offsets"),
    ('\x00v1\n{"orders":{"0":-2}}', "offset -2 is not a non-negative integer"),
    ('\x00v1\n{"orders":{}}', "topic 'orders' has no partition offsets"),
])
def test_malformed_initial_offsets_fail_clearly(text: str, expected: str) -> None:
    with pytest.raises(OffsetLogError) as raised:
        parse_initial_offsets(text, where="sources/0/0")
    assert str(raised.value).startswith("sources/0/0: ")
    assert expected in str(raised.value)


def test_initial_offsets_are_read_through_spark_from_a_path_or_a_uri(
        spark: SparkSession, tmp_path: Path) -> None:
    (tmp_path / "sources" / "0").mkdir(parents=True)
    (tmp_path / "sources" / "0" / "0").write_bytes(SPARK_INITIAL_OFFSETS)
    expected = {"orders": {"0": 7, "1": 2, "2": 0}, "refunds": {"0": 3}}
    assert read_history_start(spark, str(tmp_path)) == expected
    assert read_history_start(spark, tmp_path.as_uri() + "/") == expected
    assert initial_offsets_path("s3a://bucket/ck/") == "s3a://bucket/ck/sources/0/0"


def test_a_checkpoint_without_initial_offsets_has_no_history_start(
        spark: SparkSession, tmp_path: Path) -> None:
    """Nothing is claimed for a checkpoint whose query never started (or another source's)."""
    assert read_history_start(spark, str(tmp_path)) is None
