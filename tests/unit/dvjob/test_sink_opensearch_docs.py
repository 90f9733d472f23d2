"""OpenSearch documents from index rows: ids, JSON values, the mapping, the bulk chunks."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from dvjob.errors import ConfigError, JobError, NullKeyError
from dvjob.offsets import EndOffsets
from dvjob.sinks.contract import FAIL_ON_NULL_KEY
from dvjob.sinks.opensearch.docs import (
    Documents,
    bulk_body,
    bulk_chunks,
    delete_line,
    index_line,
    refusal_cause,
    sort_items,
    value_json,
)
from dvjob.sinks.opensearch.mapping import index_body, ledger_body, ledger_id
from dvjob.sinks.schema import SinkColumn, TableLayout, table_layout

ORDERS = TableLayout(
    columns=(SinkColumn("order_id", "text"), SinkColumn("customer_id", "text"),
             SinkColumn("amount", "numeric(10,2)")),
    primary_key=("order_id",), has_delete_flag=True)


def layout_of(*columns: SinkColumn, key: Sequence[str] = ("k",)) -> TableLayout:
    return TableLayout(columns=columns, primary_key=tuple(key), has_delete_flag=True)


@pytest.mark.parametrize(("column", "value", "text"), [
    (SinkColumn("c", "text"), 'say "hi" ü', '"say \\"hi\\" \\u00fc"'),
    (SinkColumn("c", "bigint"), 2 ** 62, str(2 ** 62)),
    (SinkColumn("c", "smallint"), -3, "-3"),
    (SinkColumn("c", "double precision"), 0.1, "0.1"),
    (SinkColumn("c", "double precision"), 1e300, "1e+300"),
    (SinkColumn("c", "real"), 1.5, "1.5"),
    (SinkColumn("c", "boolean"), True, "true"),
    (SinkColumn("c", "numeric(38,10)"), Decimal("12345678901234567890.0123456789"),
     "12345678901234567890.0123456789"),
    (SinkColumn("c", "numeric(10,2)"), Decimal("1E+2"), "100"),
    (SinkColumn("c", "date"), date(2024, 7, 1), '"2024-07-01"'),
    (SinkColumn("c", "timestamp"), datetime(2024, 7, 1, 12, 0, 0, 5), '"2024-07-01T12:00:00.000005"'),
    (SinkColumn("c", "timestamptz", "timestamp_text"), "2024-07-01 17:30:00.123456+05:30",
     '"2024-07-01T12:00:00.123456+00:00"'),
    (SinkColumn("c", "timestamptz", "timestamp_text"), "2024-07-01 12:00:00.000000+00:00",
     '"2024-07-01T12:00:00.000000+00:00"'),
    (SinkColumn("c", "bytea"), bytearray(b"\x00\x01\xff"), '"AAH/"'),
    (SinkColumn("c", "jsonb", "json_text"), '{"a":[1,2.50]}', '{"a":[1,2.50]}'),
])
def test_values_become_json_by_their_column_s_type(column: SinkColumn, value: Any,
                                                    text: str) -> None:
    assert value_json(column)(value) == text
    json.loads(text)  # valid JSON on its own


@pytest.mark.parametrize(("column", "value"), [
    (SinkColumn("c", "double precision"), float("nan")),
    (SinkColumn("c", "real"), float("-inf")),
    (SinkColumn("c", "numeric(10,2)"), Decimal("NaN")),
])
def test_numbers_json_cannot_carry_are_refused(column: SinkColumn, value: Any) -> None:
    with pytest.raises(ValueError, match="not a number OpenSearch can store"):
        value_json(column)(value)


def test_a_source_holds_every_column_null_included_but_not_the_delete_flag() -> None:
    docs = Documents(ORDERS)
    assert docs.source(("o1", None, Decimal("10.50"), False)) == (
        '{"order_id":"o1","customer_id":null,"amount":10.50}')


def test_a_bad_value_names_its_column() -> None:
    layout = layout_of(SinkColumn("k", "text"), SinkColumn("score", "double precision"))
    with pytest.raises(ValueError, match=r'column "score": nan is not a number'):
        Documents(layout).source(("a", float("nan"), False))


@pytest.mark.parametrize(("columns", "key", "row", "doc_id"), [
    ((SinkColumn("k", "text"),), ("k",), ("Zürich/1",), "Zürich/1"),
    ((SinkColumn("k", "bigint"),), ("k",), (42,), "42"),
    ((SinkColumn("k", "boolean"),), ("k",), (False,), "false"),
    ((SinkColumn("k", "date"),), ("k",), (date(2024, 7, 1),), "2024-07-01"),
    ((SinkColumn("k", "numeric(10,2)"),), ("k",), (Decimal("1.50"),), "1.50"),
    ((SinkColumn("k", "timestamptz", "timestamp_text"),), ("k",),
     ("2024-07-01 12:00:00.000000+00:00",), "2024-07-01T12:00:00.000000+00:00"),
    ((SinkColumn("shop", "text"), SinkColumn("n", "bigint"), SinkColumn("day", "date")),
     ("shop", "day"), ('Zü "1"', 7, date(2024, 7, 1)), '["Zü \\"1\\"","2024-07-01"]'),
    ((SinkColumn("a", "bigint"), SinkColumn("b", "text")), ("b", "a"), (1, "x"), '["x",1]'),
])
def test_document_ids_are_the_key_itself_or_a_compact_json_array(
        columns: tuple[SinkColumn, ...], key: tuple[str, ...], row: tuple[Any, ...],
        doc_id: str) -> None:
    assert Documents(layout_of(*columns, key=key)).document_id((*row, False)) == doc_id


def test_the_mapping_follows_the_layout_and_names_the_revision() -> None:
    output = StructType([StructField(n, t) for n, t in [
        ("shop", StringType()), ("note", StringType()), ("orders", LongType()),
        ("n", IntegerType()), ("s", ShortType()), ("b", ByteType()), ("revenue", DoubleType()),
        ("ratio", FloatType()), ("avg_amount", DecimalType(10, 2)), ("day", DateType()),
        ("first_seen", TimestampType()), ("local_seen", TimestampNTZType()),
        ("tags", ArrayType(StringType())), ("attrs", MapType(StringType(), LongType())),
        ("flag", BooleanType()), ("raw", BinaryType()), ("_dv_deleted", BooleanType())]])
    body = index_body(table_layout(output, ["shop"]), view="shop/orders", revision="r1")
    assert body["settings"] == {"index": {"auto_expand_replicas": "0-1"}}
    mappings = body["mappings"]
    assert mappings["dynamic"] == "false"
    assert mappings["_meta"] == {"derived_views": {"view": "shop/orders", "revision": "r1"}}
    assert mappings["properties"] == {
        "shop": {"type": "keyword"}, "note": {"type": "keyword", "ignore_above": 8191},
        "orders": {"type": "long"}, "n": {"type": "integer"}, "s": {"type": "short"},
        "b": {"type": "short"}, "revenue": {"type": "double"}, "ratio": {"type": "float"},
        "avg_amount": {"type": "double"}, "day": {"type": "date"},
        "first_seen": {"type": "date"}, "local_seen": {"type": "date"},
        "tags": {"type": "object", "enabled": False}, "attrs": {"type": "object", "enabled": False},
        "flag": {"type": "boolean"}, "raw": {"type": "binary"}}


def test_the_ledger_s_fields_are_the_contract() -> None:
    mappings = ledger_body()["mappings"]
    assert mappings["dynamic"] == "false"
    assert mappings["properties"] == {
        "revision": {"type": "keyword"}, "batch_id": {"type": "long"},
        "end_offsets": {"type": "object", "enabled": False},
        "rows_upserted": {"type": "long"}, "rows_deleted": {"type": "long"},
        "bad_records": {"type": "long"}, "committed_at": {"type": "date"},
        "index_uuid": {"type": "keyword"},
        "history_start": {"type": "object", "enabled": False}}
    assert ledger_id("3f9c", 12) == "3f9c:12"


@pytest.mark.parametrize(("name", "why"), [
    ("a.b", "reads '.' in a field name as an object path"),
    ("_id", "reserves field names starting with '_'"),
    (" ", "non-blank"),
])
def test_column_names_opensearch_would_misread_are_refused(name: str, why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        Documents(layout_of(SinkColumn("k", "text"), SinkColumn(name, "bigint")))


def test_a_type_without_a_mapping_is_refused() -> None:
    with pytest.raises(ConfigError, match="column 'k': type interval has no OpenSearch mapping"):
        Documents(layout_of(SinkColumn("k", "interval")))


def lines(chunks: list[list[tuple[str, str | None]]]) -> list[list[Any]]:
    return [[(json.loads(action), source and json.loads(source)) for action, source in chunk]
            for chunk in chunks]


def chunked(rows: list[tuple[Any, ...]], *, batch_id: int = 4, max_actions: int = 100,
            max_bytes: int = 1 << 20, bad: Any = FAIL_ON_NULL_KEY) -> list[list[Any]]:
    return lines(list(bulk_chunks(iter(rows), Documents(ORDERS), batch_id=batch_id, bad=bad,
                                  max_actions=max_actions, max_bytes=max_bytes)))


def test_bulk_actions_carry_the_batch_s_version() -> None:
    assert chunked([("o1", "c1", Decimal("1.00"), False), ("o2", None, None, True)]) == [[
        ({"index": {"_id": "o1", "version": 5, "version_type": "external_gte"}},
         {"order_id": "o1", "customer_id": "c1", "amount": 1.0}),
        ({"delete": {"_id": "o2", "version": 5, "version_type": "external_gte"}}, None)]]
    assert index_line("a", 1) == '{"index":{"_id":"a","version":1,"version_type":"external_gte"}}'
    assert delete_line("a", 1) == '{"delete":{"_id":"a","version":1,"version_type":"external_gte"}}'


def test_each_id_appears_once_per_chunk_with_its_last_row() -> None:
    rows = [("o1", "c1", Decimal("1"), False), ("o2", "c2", Decimal("2"), False),
            ("o1", None, None, True), ("o3", "c3", Decimal("3"), False),
            ("o1", "c1", Decimal("4"), False)]
    assert [[(a, s and s["amount"]) for a, s in chunk] for chunk in chunked(rows)] == [[
        ({"index": {"_id": "o1", "version": 5, "version_type": "external_gte"}}, 4),
        ({"index": {"_id": "o2", "version": 5, "version_type": "external_gte"}}, 2),
        ({"index": {"_id": "o3", "version": 5, "version_type": "external_gte"}}, 3)]]


def test_chunks_are_cut_by_actions_and_by_bytes_in_row_order() -> None:
    rows = [(f"o{i}", "c", Decimal(i), False) for i in range(5)]
    assert [[a["index"]["_id"] for a, _ in c] for c in chunked(rows, max_actions=2)] == [
        ["o0", "o1"], ["o2", "o3"], ["o4"]]
    assert [len(c) for c in chunked(rows, max_bytes=1)] == [1, 1, 1, 1, 1]


def test_rows_are_read_as_chunks_are_taken() -> None:
    read: list[int] = []

    def rows() -> Any:
        for i in range(6):
            read.append(i)
            yield (f"o{i}", "c", Decimal(i), False)

    chunks = bulk_chunks(rows(), Documents(ORDERS), batch_id=0, bad=FAIL_ON_NULL_KEY, max_actions=2,
                         max_bytes=1 << 20)
    next(chunks)
    assert read == [0, 1]


def test_a_null_key_fails_the_batch_or_goes_to_the_bad_record_policy() -> None:
    rows = [("o1", "c1", Decimal(1), False), (None, "c2", Decimal(2), False)]
    with pytest.raises(NullKeyError, match="batch 4: the transform emitted a row with NULL in primary-key column "
                                           "'order_id'; filter such rows out"):
        chunked(rows)

    class Counting:
        def __init__(self) -> None:
            self.seen: list[tuple[int, str]] = []

        def null_key(self, batch_id: int, column: str, row: Sequence[Any]) -> None:
            self.seen.append((batch_id, column))

        def settle(self, batch_id: int, end_offsets: EndOffsets) -> int:
            return len(self.seen)

    counting = Counting()
    assert [len(c) for c in chunked(rows, bad=counting)] == [1]
    assert counting.seen == [(4, "order_id")]


@pytest.mark.parametrize(("key", "message"), [
    ("", "primary key is the empty string"),
    ("x" * 513, "is 513 bytes, OpenSearch allows 512"),
    ("é" * 257, "is 514 bytes, OpenSearch allows 512"),
])
def test_ids_opensearch_refuses_fail_the_batch(key: str, message: str) -> None:
    with pytest.raises(JobError, match=f"batch 4: .*{message}"):
        chunked([(key, "c", Decimal(1), False)])


def test_a_row_of_the_wrong_width_fails_the_batch() -> None:
    with pytest.raises(JobError, match="batch 4: row has 2 values, expected 4"):
        chunked([("o1", False)])


def test_a_bulk_answer_is_sorted_by_what_the_writer_does_next() -> None:
    sent = [("i1", "s1"), ("i2", "s2"), ("d3", None), ("d4", None), ("i5", "s5"), ("i6", "s6"),
            ("i7", "s7"), ("i8", "s8")]
    block = {"type": "cluster_block_exception",
             "reason": "index [v__a] blocked by: [FORBIDDEN/8/index write (api)];"}
    items = [{"index": {"result": "created", "status": 201}},
             {"index": {"status": 409, "error": {"type": "version_conflict_engine_exception"}}},
             {"delete": {"result": "deleted", "status": 200}},
             {"delete": {"result": "not_found", "status": 404}},
             {"index": {"status": 429, "error": {"type": "es_rejected_execution_exception"}}},
             {"index": {"status": 403, "error": block}},
             {"index": {"result": "updated", "status": 200}},
             {"index": {"status": 400, "error": {"type": "mapper_parsing_exception",
                                                "reason": "failed to parse field [at]"}}}]
    answer = sort_items(sent, items)
    assert (answer.upserted, answer.deleted) == (2, 1)
    assert answer.busy == [("i5", "s5")]
    assert answer.blocked == [("i6", "s6")]
    assert answer.block_reason == block["reason"]
    assert [refusal_cause(item) for item in answer.refused] == [
        "mapper_parsing_exception: failed to parse field [at]"]


def test_a_bulk_answer_of_another_length_is_refused() -> None:
    with pytest.raises(JobError, match="1 items to a bulk of 2 actions"):
        sort_items([("a", None), ("b", None)], [{"delete": {"result": "deleted"}}])


def test_a_bulk_body_is_ndjson_ending_in_a_newline() -> None:
    assert bulk_body([(index_line("a", 3), '{"k":1}'), (delete_line("b", 3), None)]) == (
        '{"index":{"_id":"a","version":3,"version_type":"external_gte"}}\n{"k":1}\n'
        '{"delete":{"_id":"b","version":3,"version_type":"external_gte"}}\n')
