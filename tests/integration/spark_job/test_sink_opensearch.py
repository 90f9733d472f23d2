"""The Spark job's OpenSearch sink against a real OpenSearch (docs/sinks.md, "OpenSearch").

Each test gets indexes of its own (the revision's index and a ledger index under
one random prefix), created by the sink and deleted after.  The last test drives
the foreachBatch writer with a local SparkSession, as the PostgreSQL sink's does.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from opensearchpy import NotFoundError, OpenSearch
from pyspark.sql import SparkSession
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DateType,
    DecimalType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from derived_views.adapters.opensearch import ledger as opensearch_ledger
from derived_views.core.observed import RunningBatch
from dvjob.batch_progress import Progress
from dvjob.batch_writer import BatchWriter
from dvjob.errors import NullKeyError
from dvjob.integrity import IndexLostError
from dvjob.sinks.contract import IndexOwnedElsewhereError, LedgerMismatchError
from dvjob.sinks.opensearch.mapping import index_body, ledger_body
from dvjob.sinks.opensearch.sink import (
    BulkRefusedError,
    ForeignIndexError,
    IndexMappingMismatchError,
    OpenSearchSink,
)
from dvjob.sinks.schema import SinkColumn, TableLayout, table_layout
from dvstack.testing.waiting import wait_for

pytestmark = pytest.mark.integration

VIEW = "shop/orders"
REVISION = "3f9c1a2b4d5e"
ORDERS = TableLayout(
    columns=(SinkColumn("order_id", "text"), SinkColumn("customer_id", "text"),
             SinkColumn("amount", "numeric(10,2)")),
    primary_key=("order_id",), has_delete_flag=True)
Row = tuple[Any, ...]


@pytest.fixture(scope="module")
def client(stack: Any) -> Iterator[OpenSearch]:
    url: str = stack.opensearch
    if not url:
        pytest.fail("the local stack has no OpenSearch (its stack.json predates it): run "
                    "`make stack-up`", pytrace=False)
    found = OpenSearch(hosts=[url], timeout=60)
    yield found
    found.close()


class Names:
    """One test's indexes: the revision's index and the ledger, under a random prefix."""

    def __init__(self) -> None:
        self.prefix = f"dvjob_it_{uuid.uuid4().hex[:12]}"
        self.index = f"{self.prefix}__{REVISION}"
        self.ledger = f"{self.prefix}_ledger"


@pytest.fixture
def names(client: OpenSearch) -> Iterator[Names]:
    made = Names()
    yield made
    client.indices.delete(index=f"{made.prefix}*", params={"expand_wildcards": "all"})


def make_sink(client: OpenSearch, names: Names, layout: TableLayout = ORDERS, *,
              index: str | None = None, revision: str = REVISION,
              before_commit: Callable[[int], None] | None = None, prepare: bool = True,
              chunk_actions: int = 5000) -> OpenSearchSink:
    sink = OpenSearchSink(client=client, url="http://u:secret@opensearch.test:9200",
                          index=index or names.index, ledger_index=names.ledger, view=VIEW,
                          revision=revision, layout=layout, before_commit=before_commit,
                          chunk_actions=chunk_actions)
    if prepare:
        sink.prepare()
    return sink


def documents(client: OpenSearch, index: str) -> dict[str, dict[str, Any]]:
    """id -> source, read after a refresh (searches see refreshed documents only)."""
    client.indices.refresh(index=index)
    found = client.search(index=index, body={"size": 1000, "query": {"match_all": {}}})
    return {hit["_id"]: hit["_source"] for hit in found["hits"]["hits"]}


def versions(client: OpenSearch, index: str) -> dict[str, int]:
    client.indices.refresh(index=index)
    found = client.search(index=index, body={"size": 1000, "version": True,
                                              "query": {"match_all": {}}})
    return {hit["_id"]: hit["_version"] for hit in found["hits"]["hits"]}


def ledger(client: OpenSearch, names: Names) -> list[dict[str, Any]]:
    """The batch documents (not the in-flight document), oldest first."""
    found = client.search(index=names.ledger, body={
        "size": 1000, "sort": [{"batch_id": "asc"}],
        "query": {"exists": {"field": "batch_id"}}})
    return [hit["_source"] | {"_id": hit["_id"]} for hit in found["hits"]["hits"]]


def ledger_summary(client: OpenSearch, names: Names) -> list[tuple[Any, ...]]:
    return [(e["_id"], e["revision"], e["batch_id"], e["end_offsets"], e["rows_upserted"],
             e["rows_deleted"], e["bad_records"]) for e in ledger(client, names)]


def index_uuid(client: OpenSearch, index: str) -> str:
    settings = client.indices.get_settings(index=index, name="index.uuid")
    return str(settings[index]["settings"]["index"]["uuid"])


def order(order_id: str | None, customer: str | None, amount: str | None,
          deleted: bool = False) -> Row:
    return (order_id, customer, None if amount is None else Decimal(amount), deleted)


def source(order_id: str, customer: str | None, amount: float | None) -> dict[str, Any]:
    return {"order_id": order_id, "customer_id": customer, "amount": amount}


def must_not_be_read() -> Iterator[Row]:
    raise AssertionError("the rows of a skipped batch were read")
    yield ()  # pragma: no cover - makes this a generator


def test_index_and_ledger_are_created_with_mapping_and_identity(
        client: OpenSearch, names: Names) -> None:
    output = StructType([StructField("shop", StringType()), StructField("day", DateType()),
                         StructField("avg_amount", DecimalType(10, 2)),
                         StructField("first_seen", TimestampType()),
                         StructField("tags", ArrayType(StringType())),
                         StructField("_dv_deleted", BooleanType())])
    layout = table_layout(output, ["shop", "day"])
    make_sink(client, names, layout)
    mapping = client.indices.get_mapping(index=names.index)[names.index]["mappings"]
    assert mapping["_meta"] == {"derived_views": {"view": VIEW, "revision": REVISION}}
    assert mapping["dynamic"] == "false"
    assert mapping["properties"] == {
        "shop": {"type": "keyword"}, "day": {"type": "date"}, "avg_amount": {"type": "double"},
        "first_seen": {"type": "date"}, "tags": {"type": "object", "enabled": False}}
    ledger_mapping = client.indices.get_mapping(index=names.ledger)[names.ledger]["mappings"]
    assert ledger_mapping["dynamic"] == "false"
    assert {k: v.get("type", "object") for k, v in ledger_mapping["properties"].items()} == {
        "revision": "keyword", "batch_id": "long", "end_offsets": "object",
        "rows_upserted": "long", "rows_deleted": "long", "bad_records": "long",
        "committed_at": "date", "index_uuid": "keyword", "history_start": "object"}
    assert ledger_mapping["properties"]["end_offsets"]["enabled"] is False
    assert ledger_mapping["properties"]["history_start"]["enabled"] is False


def test_a_ledger_from_before_the_history_start_gains_its_field(
        client: OpenSearch, names: Names) -> None:
    """A ledger index created by an older job lacks the field: the start-up adds it, unindexed
    like end_offsets, and the older documents stay readable (no history start recorded)."""
    older = {k: v for k, v in ledger_body()["mappings"]["properties"].items()
             if k != "history_start"}
    client.indices.create(index=names.ledger, body={"mappings": {"dynamic": "false",
                                                                 "properties": older}})
    client.index(index=names.ledger, id=f"{REVISION}:0", params={"refresh": "true"}, body={
        "revision": REVISION, "batch_id": 0, "end_offsets": {"orders": {"0": 1}},
        "rows_upserted": 1, "rows_deleted": 0, "bad_records": 0,
        "committed_at": "2026-03-01T12:00:00+00:00"})
    assert opensearch_ledger.read_heads(client, names.ledger, [REVISION]).positions[
        REVISION].history_start is None
    sink = make_sink(client, names, index=f"{names.prefix}__other", revision="other")
    mapping = client.indices.get_mapping(index=names.ledger)[names.ledger]["mappings"]
    assert mapping["properties"]["history_start"] == {"type": "object", "enabled": False}
    sink.write_batch(0, [order("o1", "c1", "1.00")], {"orders": {"0": 9}},
                     history_start={"orders": {"0": 4}})
    heads = opensearch_ledger.read_heads(client, names.ledger, [REVISION, "other"]).positions
    assert heads[REVISION].history_start is None
    assert heads["other"].history_start == {("orders", 0): 4}


def test_start_up_is_idempotent_but_refuses_another_revision_s_index(
        client: OpenSearch, names: Names) -> None:
    make_sink(client, names)
    make_sink(client, names)  # a restarted job
    with pytest.raises(ForeignIndexError, match=rf"index {names.index} exists but belongs to "
                       rf"view {VIEW} revision {REVISION}, not view {VIEW} revision a71e: "
                       "refusing to write into it"):
        make_sink(client, names, revision="a71e")
    other = f"{names.prefix}__plain"
    client.indices.create(index=other, body={"mappings": {"properties": {"x": {"type": "long"}}}})
    with pytest.raises(ForeignIndexError, match=r"was not created by derived views"):
        make_sink(client, names, index=other)


def test_the_index_records_its_view_s_uid_and_another_view_s_job_writes_nothing(
        client: OpenSearch, names: Names) -> None:
    mine = OpenSearchSink(client=client, url="http://opensearch.test:9200", index=names.index,
                          ledger_index=names.ledger, view=VIEW, revision=REVISION,
                          layout=ORDERS, uid="uid-shop")
    mine.prepare()
    meta = client.indices.get_mapping(index=names.index)[names.index]["mappings"]["_meta"]
    assert meta == {"derived_views": {"view": VIEW, "revision": REVISION, "uid": "uid-shop"}}
    mine.write_batch(0, [("o1", "c1", Decimal("2.00"), False)], {"orders": {"0": 1}})
    mine.prepare()  # its own restart
    for uid, said in (("uid-again", "uid uid-again"), (None, "names no owner")):
        again = OpenSearchSink(client=client, url="http://opensearch.test:9200",
                               index=names.index, ledger_index=names.ledger, view=VIEW,
                               revision=REVISION, layout=ORDERS, uid=uid)
        with pytest.raises(IndexOwnedElsewhereError, match=rf"belongs to view {VIEW} \(uid "
                           rf"uid-shop\), but .*{said}.*nothing was written"):
            again.prepare()
    assert list(documents(client, names.index)) == ["o1"]


def test_start_up_refuses_the_revision_s_index_with_other_fields(
        client: OpenSearch, names: Names) -> None:
    make_sink(client, names)
    other = TableLayout(columns=(SinkColumn("order_id", "text"), SinkColumn("total", "bigint")),
                        primary_key=("order_id",), has_delete_flag=False)
    with pytest.raises(IndexMappingMismatchError, match=r"exists with fields amount \(double\), "
                       r"customer_id \(keyword\), order_id \(keyword\), but this revision writes "
                       r"order_id \(keyword\), total \(long\)"):
        make_sink(client, names, other)


def test_first_batch_writes_documents_then_its_ledger_document(
        client: OpenSearch, names: Names) -> None:
    sink = make_sink(client, names)
    assert sink.committed_batches() == 0
    outcome = sink.write_batch(0, [order("o1", "c1", "10.00"), order("o2", "c2", "20.50"),
                                   order("o3", "c1", "5.25")], {"orders": {"0": 2, "1": 1}})
    assert (outcome.skipped, outcome.rows_upserted, outcome.rows_deleted) == (False, 3, 0)
    assert documents(client, names.index) == {
        "o1": source("o1", "c1", 10.0), "o2": source("o2", "c2", 20.5),
        "o3": source("o3", "c1", 5.25)}
    assert versions(client, names.index) == {"o1": 1, "o2": 1, "o3": 1}
    [entry] = ledger(client, names)
    assert entry["_id"] == f"{REVISION}:0"
    assert entry["end_offsets"] == {"orders": {"0": 2, "1": 1}}
    assert (entry["revision"], entry["batch_id"], entry["rows_upserted"], entry["rows_deleted"],
            entry["bad_records"]) == (REVISION, 0, 3, 0, 0)
    assert entry["index_uuid"] == index_uuid(client, names.index)
    assert datetime.fromisoformat(entry["committed_at"]).tzinfo is not None
    assert sink.committed_batches() == 1
    assert sink.describe() == (f"index {names.index} (ledger {names.ledger}) at "
                               "http://opensearch.test:9200")


def test_decimals_keep_their_digits_in_the_source(client: OpenSearch, names: Names) -> None:
    sink = make_sink(client, names)
    sink.write_batch(0, [order("o1", "c1", "0.10")], {"orders": {"0": 1}})
    raw = client.transport.perform_request("GET", f"/{names.index}/_source/o1")
    assert raw == {"order_id": "o1", "customer_id": "c1", "amount": 0.1}
    found = client.search(index=names.index, body={"query": {"range": {"amount": {"gte": 0.1}}}})
    assert found["hits"]["total"]["value"] == 1


def test_a_later_batch_updates_documents_by_key(client: OpenSearch, names: Names) -> None:
    sink = make_sink(client, names)
    sink.write_batch(0, [order("o1", "c1", "10.00"), order("o2", "c2", "20.00")],
                     {"orders": {"0": 2}})
    outcome = sink.write_batch(1, [order("o1", "c1", "15.00"), order("o3", "c3", "5.00")],
                               {"orders": {"0": 4}})
    assert (outcome.rows_upserted, outcome.rows_deleted) == (2, 0)
    assert documents(client, names.index) == {
        "o1": source("o1", "c1", 15.0), "o2": source("o2", "c2", 20.0),
        "o3": source("o3", "c3", 5.0)}
    assert versions(client, names.index) == {"o1": 2, "o2": 1, "o3": 2}
    assert [e[2:] for e in ledger_summary(client, names)] == [
        (0, {"orders": {"0": 2}}, 2, 0, 0), (1, {"orders": {"0": 4}}, 2, 0, 0)]
    assert sink.committed_batches() == 2


def test_a_replayed_batch_is_skipped_without_reading_its_rows(
        client: OpenSearch, names: Names) -> None:
    sink = make_sink(client, names)
    sink.write_batch(0, [order("o1", "c1", "10.00")], {"orders": {"0": 1}})
    outcome = sink.write_batch(0, must_not_be_read(), {"orders": {"0": 1}})
    assert outcome.skipped
    assert (outcome.rows_upserted, outcome.rows_deleted) == (0, 0)
    assert documents(client, names.index) == {"o1": source("o1", "c1", 10.0)}
    assert len(ledger(client, names)) == 1


def test_a_replay_over_another_range_is_refused(client: OpenSearch, names: Names) -> None:
    sink = make_sink(client, names)
    sink.write_batch(0, [order("o1", "c1", "10.00")], {"orders": {"0": 1}})
    with pytest.raises(LedgerMismatchError, match=r"batch 0 of revision 3f9c1a2b4d5e is in the "
                       r"ledger with end offsets \{'orders': \{'0': 1\}\}, but the checkpoint now "
                       r"says \{'orders': \{'0': 5\}\}"):
        sink.write_batch(0, must_not_be_read(), {"orders": {"0": 5}})
    assert documents(client, names.index) == {"o1": source("o1", "c1", 10.0)}


def test_other_revisions_do_not_share_batch_ids(client: OpenSearch, names: Names) -> None:
    make_sink(client, names).write_batch(0, [order("o1", "c1", "1.00")], {"orders": {"0": 1}})
    other = make_sink(client, names, index=f"{names.prefix}__a71e", revision="a71e")
    assert other.committed_batches() == 0
    outcome = other.write_batch(0, [order("o1", "c1", "2.00")], {"orders": {"0": 1}})
    assert not outcome.skipped
    assert documents(client, f"{names.prefix}__a71e") == {"o1": source("o1", "c1", 2.0)}
    assert [e[0] for e in ledger_summary(client, names)] == [f"{REVISION}:0", "a71e:0"]
    assert other.committed_batches() == 1


def test_the_operator_s_pruning_summary_is_no_batch(client: OpenSearch, names: Names) -> None:
    sink = make_sink(client, names)
    sink.write_batch(0, [order("o1", "c1", "1.00")], {"orders": {"0": 1}})
    sink.write_batch(1, [order("o2", "c2", "2.00")], {"orders": {"0": 2}})
    # As the operator prunes (derived_views.adapters.opensearch.ledger): fold, then delete.
    client.index(index=names.ledger, id=f"{REVISION}:pruned", params={"refresh": "true"},
                 body={"revision": REVISION, "folded_below": 1, "bad_records": 0})
    client.delete(index=names.ledger, id=f"{REVISION}:0", params={"refresh": "true"})
    assert sink.committed_batches() == 1
    make_sink(client, names)  # a restarted job still finds its index intact
    outcome = sink.write_batch(2, [order("o3", "c3", "3.00")], {"orders": {"0": 3}})
    assert not outcome.skipped
    assert sink.committed_batches() == 2


def test_deletes_and_each_key_s_last_row_wins(client: OpenSearch, names: Names) -> None:
    sink = make_sink(client, names)
    sink.write_batch(0, [order("o1", "c1", "10.00"), order("o2", "c2", "20.00"),
                         order("o3", "c3", "30.00")], {"orders": {"0": 3}})
    outcome = sink.write_batch(1, [
        order("o2", None, None, deleted=True),         # delete
        order("o4", None, None, deleted=True),         # delete of a key never seen: no effect
        order("o3", None, None, deleted=True),         # deleted, then written again: kept
        order("o3", "c3", "33.00"),
        order("o1", "c1", "11.00"),                    # written, then deleted: gone
        order("o1", None, None, deleted=True),
    ], {"orders": {"0": 9}})
    assert (outcome.rows_upserted, outcome.rows_deleted) == (1, 2)
    assert documents(client, names.index) == {"o3": source("o3", "c3", 33.0)}
    assert ledger_summary(client, names)[-1][2:] == (1, {"orders": {"0": 9}}, 1, 2, 0)


def test_a_key_s_rows_in_different_chunks_apply_in_order(
        client: OpenSearch, names: Names) -> None:
    sink = make_sink(client, names, chunk_actions=2)
    sink.write_batch(0, [order("o1", "c1", "1.00"), order("o2", "c2", "2.00"),
                         order("o1", None, None, deleted=True), order("o2", "c2", "3.00"),
                         order("o3", "c3", "4.00"), order("o1", "c1", "5.00")],
                     {"orders": {"0": 6}})
    assert documents(client, names.index) == {
        "o1": source("o1", "c1", 5.0), "o2": source("o2", "c2", 3.0),
        "o3": source("o3", "c3", 4.0)}


def test_composite_keys_and_odd_values(client: OpenSearch, names: Names) -> None:
    layout = TableLayout(columns=(SinkColumn("shop", "text"), SinkColumn("day", "date"),
                                  SinkColumn("n", "bigint"), SinkColumn("tags", "jsonb",
                                                                        "json_text")),
                         primary_key=("shop", "day"), has_delete_flag=True)
    sink = make_sink(client, names, layout)
    sink.write_batch(0, [("Zürich \"1\"", date(2024, 7, 1), 3, '["a",{"b":1}]', False),
                         ("bern", date(2024, 7, 1), 4, None, False)], {"orders": {"0": 2}})
    outcome = sink.write_batch(1, [("bern", date(2024, 7, 1), None, None, True)],
                               {"orders": {"0": 3}})
    assert (outcome.rows_upserted, outcome.rows_deleted) == (0, 1)
    assert documents(client, names.index) == {
        '["Zürich \\"1\\"","2024-07-01"]': {"shop": 'Zürich "1"', "day": "2024-07-01", "n": 3,
                                            "tags": ["a", {"b": 1}]}}


def test_a_crash_after_the_bulk_re_applies_the_batch(client: OpenSearch, names: Names) -> None:
    crashes = [1]

    def crash_once(batch_id: int) -> None:
        if batch_id in crashes:
            crashes.remove(batch_id)
            raise RuntimeError("driver killed")

    sink = make_sink(client, names, before_commit=crash_once)
    sink.write_batch(0, [order("o1", "c1", "10.00"), order("o2", "c2", "20.00")],
                     {"orders": {"0": 2}})
    batch1 = [order("o1", "c1", "11.00"), order("o2", None, None, deleted=True),
              order("o3", "c3", "30.00")]
    with pytest.raises(RuntimeError, match="driver killed"):
        sink.write_batch(1, batch1, {"orders": {"0": 5}})
    # The rows are in (a reader may see them before the ledger), the ledger lacks batch 1.
    assert documents(client, names.index) == {"o1": source("o1", "c1", 11.0),
                                              "o3": source("o3", "c3", 30.0)}
    assert sink.committed_batches() == 1
    # Spark re-runs batch 1 with the same rows: the same versions are written again.
    restarted = make_sink(client, names)
    outcome = restarted.write_batch(1, batch1, {"orders": {"0": 5}})
    assert not outcome.skipped
    assert (outcome.rows_upserted, outcome.rows_deleted) == (2, 0)  # o2 was gone already
    assert documents(client, names.index) == {"o1": source("o1", "c1", 11.0),
                                              "o3": source("o3", "c3", 30.0)}
    assert versions(client, names.index) == {"o1": 2, "o3": 2}
    assert [e[2:] for e in ledger_summary(client, names)] == [
        (0, {"orders": {"0": 2}}, 2, 0, 0), (1, {"orders": {"0": 5}}, 2, 0, 0)]
    assert restarted.committed_batches() == 2


def test_an_older_batch_never_overwrites_a_newer_one(client: OpenSearch, names: Names) -> None:
    sink = make_sink(client, names)
    sink.write_batch(0, [order("o1", "c1", "10.00"), order("o2", "c2", "20.00")],
                     {"orders": {"0": 2}})
    sink.write_batch(1, [order("o1", "c1", "15.00"), order("o2", None, None, deleted=True)],
                     {"orders": {"0": 4}})
    client.delete(index=names.ledger, id=f"{REVISION}:0", params={"refresh": "true"})
    outcome = sink.write_batch(0, [order("o1", "c1", "10.00"), order("o2", "c2", "20.00")],
                               {"orders": {"0": 2}})
    assert (outcome.skipped, outcome.rows_upserted) == (False, 0)  # version conflicts: fine
    assert documents(client, names.index) == {"o1": source("o1", "c1", 15.0)}


def test_a_failure_mid_batch_leaves_no_ledger_document(client: OpenSearch, names: Names) -> None:
    sink = make_sink(client, names, chunk_actions=1)

    def rows_then_executor_lost() -> Iterator[Row]:
        yield order("o1", "c1", "99.00")
        yield order("o2", "c2", "20.00")
        raise RuntimeError("executor lost")

    with pytest.raises(RuntimeError, match="executor lost"):
        sink.write_batch(0, rows_then_executor_lost(), {"orders": {"0": 3}})
    assert ledger(client, names) == []
    outcome = sink.write_batch(0, [order("o1", "c1", "99.00"), order("o2", "c2", "20.00")],
                               {"orders": {"0": 3}})
    assert (outcome.skipped, outcome.rows_upserted) == (False, 2)
    assert sink.committed_batches() == 1


def in_flight(client: OpenSearch, names: Names) -> dict[str, Any] | None:
    try:
        found = client.get(index=names.ledger, id=f"{REVISION}:in-flight")
    except NotFoundError:
        return None
    return dict(found["_source"])


def write_blocked(client: OpenSearch, index: str) -> bool:
    found = client.indices.get_settings(index=index, name="index.blocks.write")
    return bool(found.get(index, {}).get("settings"))


def test_a_batch_says_how_far_it_reaches_before_its_first_row_is_sent(
        client: OpenSearch, names: Names) -> None:
    sink = make_sink(client, names)
    seen: list[dict[str, Any] | None] = []

    def rows() -> Iterator[Row]:
        seen.append(in_flight(client, names))  # read when the bulk asks for the first row
        yield order("o1", "c1", "1.00")

    sink.write_batch(0, rows(), {"orders": {"0": 1}})
    assert seen[0] is not None
    assert (seen[0]["revision"], seen[0]["in_flight_batch"], seen[0]["end_offsets"]) == (
        REVISION, 0, {"orders": {"0": 1}})
    assert sink.committed_batches() == 1  # the in-flight document is no batch


def test_rows_a_cutover_s_write_block_refuses_are_sent_once_it_is_lifted(
        client: OpenSearch, names: Names) -> None:
    sink = make_sink(client, names, chunk_actions=2)
    sink.write_batch(0, [order("o1", "c1", "1.00")], {"orders": {"0": 1}})
    client.indices.add_block(index=names.index, block="write")
    outcome: list[Any] = []
    writing = threading.Thread(target=lambda: outcome.append(sink.write_batch(
        1, [order("o1", "c1", "2.00"), order("o2", "c2", "3.00"), order("o3", "c3", "4.00")],
        {"orders": {"0": 4}})))
    writing.start()
    try:
        wait_for(lambda: (in_flight(client, names) or {}).get("in_flight_batch") == 1,
                 timeout=30, what="the job to mark batch 1 in flight")
        assert [e["batch_id"] for e in ledger(client, names)] == [0]
        assert documents(client, names.index) == {"o1": source("o1", "c1", 1.0)}
    finally:
        client.indices.put_settings(index=names.index, body={"index.blocks.write": None})
        writing.join(timeout=60)
    assert outcome and outcome[0].rows_upserted == 3
    assert [e["batch_id"] for e in ledger(client, names)] == [0, 1]
    assert documents(client, names.index) == {
        "o1": source("o1", "c1", 2.0), "o2": source("o2", "c2", 3.0),
        "o3": source("o3", "c3", 4.0)}


def test_a_null_key_fails_the_whole_batch(client: OpenSearch, names: Names) -> None:
    sink = make_sink(client, names)
    with pytest.raises(NullKeyError, match="batch 0: the transform emitted a row with NULL in primary-key column "
                                           "'order_id'"):
        sink.write_batch(0, [order("o1", "c1", "1.00"), order(None, "c2", "2.00")],
                         {"orders": {"0": 2}})
    assert ledger(client, names) == []


def test_a_document_opensearch_refuses_fails_the_batch_naming_it(
        client: OpenSearch, names: Names) -> None:
    layout = TableLayout(columns=(SinkColumn("id", "text"), SinkColumn("at", "date")),
                         primary_key=("id",), has_delete_flag=False)
    sink = make_sink(client, names, layout)
    with pytest.raises(BulkRefusedError, match=r"batch 0: OpenSearch refused 1 document\(s\) of "
                       rf"index {names.index}; the first, id 'b' \(status 400\): "
                       r"mapper_parsing_exception: failed to parse field \[at\]"):
        sink.write_batch(0, [("a", date(2024, 1, 1), False), ("b", "never", False)],
                         {"t": {"0": 2}})
    assert ledger(client, names) == []


def test_a_deleted_index_is_not_recreated_while_the_ledger_holds_batches(
        client: OpenSearch, names: Names) -> None:
    sink = make_sink(client, names)
    sink.write_batch(0, [order("o1", "c1", "5.00")], {"orders": {"0": 1}})
    client.indices.delete(index=names.index)
    with pytest.raises(IndexLostError, match=rf"index {names.index} is missing but the ledger "
                       rf"holds committed batches 0..0 of revision {REVISION}"):
        make_sink(client, names)  # the restarted job's start-up
    assert not client.indices.exists(index=names.index)
    with pytest.raises(IndexLostError, match="is missing"):
        sink.write_batch(1, must_not_be_read(), {"orders": {"0": 2}})
    assert not client.indices.exists(index=names.index)  # not auto-created by a bulk


def test_an_index_deleted_mid_batch_is_not_recorded(client: OpenSearch, names: Names) -> None:
    sink = make_sink(client, names, chunk_actions=1)

    def rows_while_someone_deletes_the_index() -> Iterator[Row]:
        yield order("o1", "c1", "1.00")
        client.indices.delete(index=names.index)
        yield order("o2", "c2", "2.00")  # its bulk auto-creates an index of guessed types

    with pytest.raises(IndexLostError, match=rf"index {names.index} was deleted while batch 0 "
                       "was written; refusing to record the batch"):
        sink.write_batch(0, rows_while_someone_deletes_the_index(), {"orders": {"0": 2}})
    assert ledger(client, names) == []
    with pytest.raises(ForeignIndexError, match="was not created by derived views"):
        make_sink(client, names)  # the restarted job does not adopt the guessed index


def test_a_re_created_index_is_refused_while_the_ledger_holds_batches(
        client: OpenSearch, names: Names) -> None:
    sink = make_sink(client, names)
    sink.write_batch(0, [order("o1", "c1", "5.00")], {"orders": {"0": 1}})
    recorded = index_uuid(client, names.index)
    client.indices.delete(index=names.index)
    client.indices.create(index=names.index, body=index_body(ORDERS, view=VIEW,
                                                             revision=REVISION))
    live = index_uuid(client, names.index)
    message = (rf"index {names.index} is not the index its batches were written to \(uuid "
               rf"{live}, the ledger recorded {recorded}\) and the ledger holds committed "
               rf"batches 0..0 of revision {REVISION}: it was deleted and re-created")
    with pytest.raises(IndexLostError, match=message):
        make_sink(client, names)
    with pytest.raises(IndexLostError, match=message):
        sink.write_batch(1, must_not_be_read(), {"orders": {"0": 2}})
    assert documents(client, names.index) == {}


# ---- the foreachBatch writer on real Spark ---------------------------------------------

@pytest.fixture(scope="module")
def spark() -> SparkSession:
    """Left running for other tests in this process; Python's exit stops it."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    return (SparkSession.builder.master("local[1]").appName("dvjob-integration-tests")
            .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
            .getOrCreate())


def write_offset_log(checkpoint: Path, batch_id: int, source_line: str) -> None:
    """An offset log file as Spark writes it before running the batch."""
    (checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
    (checkpoint / "offsets" / str(batch_id)).write_text(
        'v1\n{"batchWatermarkMs":0,"batchTimestampMs":1719835200000,"conf":{}}\n' + source_line)


OUTPUT_SCHEMA = StructType([
    StructField("order_id", StringType()), StructField("amount", DecimalType(10, 2)),
    StructField("ts", TimestampType()), StructField("tags", ArrayType(StringType())),
    StructField("day", DateType()), StructField("_dv_deleted", BooleanType())])


def test_foreach_batch_writer_end_to_end_on_spark(
        spark: SparkSession, client: OpenSearch, names: Names, tmp_path: Path) -> None:
    layout = table_layout(OUTPUT_SCHEMA, ["order_id"])
    sink = make_sink(client, names, layout)
    lines: list[str] = []
    writer = BatchWriter(sink=sink, layout=layout, checkpoint_location=tmp_path.as_uri(),
                         report=lines.append)
    noon_utc = datetime(2024, 7, 1, 12, 0, 0, 123456, tzinfo=UTC)
    batch0 = spark.createDataFrame([
        ("o1", Decimal("10.00"), noon_utc, ["gift", "rush"], date(2024, 7, 1), False),
        ("o2", Decimal("20.00"), None, [], None, None),
    ], OUTPUT_SCHEMA)
    write_offset_log(tmp_path, 0, '{"orders":{"0":2,"1":0}}')
    # Where the replay began, as Spark keeps it in the checkpoint (orders/0 started at 1).
    (tmp_path / "sources" / "0").mkdir(parents=True)
    (tmp_path / "sources" / "0" / "0").write_bytes(b'\x00v1\n{"orders":{"0":1,"1":0}}')
    previous = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "Asia/Kolkata")  # the zone must not matter
    try:
        writer(batch0, 0)
        writer(batch0, 0)  # Spark replays the batch after a restart
    finally:
        spark.conf.set("spark.sql.session.timeZone", previous or "UTC")
    assert [json.loads(line.split(" ", 2)[2])["status"] for line in lines] == [
        "committed", "skipped"]
    assert documents(client, names.index) == {
        "o1": {"order_id": "o1", "amount": 10.0, "ts": "2024-07-01T12:00:00.123456+00:00",
               "tags": ["gift", "rush"], "day": "2024-07-01"},
        "o2": {"order_id": "o2", "amount": 20.0, "ts": None, "tags": [], "day": None}}
    found = client.search(index=names.index, body={"query": {"range": {"ts": {
        "gte": "2024-07-01T17:30:00.123+05:30", "lte": "2024-07-01T12:00:00.123Z"}}}})
    assert [hit["_id"] for hit in found["hits"]["hits"]] == ["o1"]

    batch1 = spark.createDataFrame([("o1", None, None, None, None, True)], OUTPUT_SCHEMA)
    write_offset_log(tmp_path, 1, '{"orders":{"0":3,"1":0}}')
    writer(batch1, 1)
    assert list(documents(client, names.index)) == ["o2"]
    assert [e[2:] for e in ledger_summary(client, names)] == [
        (0, {"orders": {"0": 2, "1": 0}}, 2, 0, 0), (1, {"orders": {"0": 3, "1": 0}}, 0, 1, 0)]
    assert [e["history_start"] for e in ledger(client, names)] == [
        {"orders": {"0": 1, "1": 0}}] * 2  # in every batch's document
    head = opensearch_ledger.read_heads(client, names.ledger, [REVISION]).positions[REVISION]
    assert head.history_start == {("orders", 0): 1, ("orders", 1): 0}


def test_progress_reports_are_read_by_the_operator_and_are_no_batch(
        client: OpenSearch, names: Names) -> None:
    """The job's report of its running batch, as the operator's ledger reading sees it: a
    real-time read (no refresh asked), overwritten by the next report, never a batch."""
    sink = make_sink(client, names)
    sink.write_batch(0, [order("o1", "c1", "1.00")], {"orders": {"0": 1}})
    started = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
    for read, after in ((40, 3), (90, 6)):
        sink.report_progress(Progress(1, read, {"orders": {"0": 101}}, started,
                                      started.replace(second=after)))
    heads = opensearch_ledger.read_heads(client, names.ledger, [REVISION])
    assert heads.positions[REVISION].batch_id == 0
    assert heads.running == {REVISION: RunningBatch(
        batch_id=1, records_read=90, end_offsets={("orders", 0): 101}, started_at=started,
        reported_at=started.replace(second=6))}
    assert sink.committed_batches() == 1
    opensearch_ledger.drop_revision(client, names.ledger, REVISION)
    assert opensearch_ledger.read_heads(client, names.ledger, [REVISION]).running == {}
