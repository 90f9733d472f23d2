"""The operator's OpenSearch session against the stack's OpenSearch: the alias switch, the
drops, the ledger heads and their pruning, and the cutover checks.

Ledger documents are written here as docs/sinks.md says the job writes them, so the
operator's reading of them is checked against the contract, not against its own writes.
"""

from __future__ import annotations

import datetime as dt
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from opensearchpy import NotFoundError, OpenSearch

from derived_views.adapters.opensearch import ledger as opensearch_ledger
from derived_views.adapters.opensearch.session import OpenSearchSession
from derived_views.adapters.sink_contract import (
    AliasConflict,
    SinkPools,
    SinkSecretInvalid,
    SinkUnavailable,
    SwitchDeferred,
)
from derived_views.api.spec import CutoverChecks, DerivedViewSpec
from derived_views.api.status import DerivedViewStatus
from derived_views.core.check_runs import CheckRequest
from derived_views.core.cutover.checks import KeySampleFound, RowCounts
from derived_views.core.cutover.monotonic import Guard
from derived_views.core.observed import IndexOwner
from derived_views.core.settings import CheckpointSettings, Settings, SinkSettings, SparkSettings
from dvstack.testing.waiting import wait_for

SHOP, OTHER = IndexOwner("shop", "orders", "uid-shop"), IndexOwner("other", "view", "uid-other")
CONFIG = Settings(spark=SparkSettings(template="", image="i"), checkpoints=CheckpointSettings(base="/c"))
T0 = dt.datetime(2026, 11, 1, 12, 0, tzinfo=dt.UTC)




@pytest.fixture()
def ledger(search: OpenSearch) -> Iterator[str]:
    name = f"it_ledger_{uuid.uuid4().hex[:8]}"
    yield name
    search.indices.delete(index=name, params={"ignore_unavailable": "true"})


def _session(stack: Any, ledger: str) -> OpenSearchSession:
    config = Settings(spark=SparkSettings(template="", image="i"), checkpoints=CheckpointSettings(base="/c"), sinks=SinkSettings(ledger_table=ledger))
    return OpenSearchSession.open({"url": stack.opensearch}, config, SinkPools(2))


def _index(search: OpenSearch, name: str, view: str, docs: dict[str, int],
           uid: str | None = None) -> str:
    meta = {"view": view, "revision": name.rsplit("__", 1)[1]}
    if uid is not None:  # as the job records it since owners are recorded
        meta["uid"] = uid
    search.indices.create(index=name, body={"mappings": {
        "_meta": {"derived_views": meta},
        "properties": {"k": {"type": "keyword"}, "v": {"type": "long"}}}})
    for key, value in docs.items():
        search.index(index=name, id=key, body={"k": key, "v": value})
    search.indices.refresh(index=name)
    return str(search.indices.get_settings(index=name)[name]["settings"]["index"]["uuid"])


def _batch_doc(revision: str, batch: int, at: dt.datetime, offset: int, bad: int = 0,
               uuid_: str = "u") -> dict[str, Any]:
    return {"revision": revision, "batch_id": batch, "end_offsets": {"t": {"0": offset}},
            "rows_upserted": 1, "rows_deleted": 0, "bad_records": bad,
            "committed_at": at.isoformat(), "index_uuid": uuid_}


def _batch(search: OpenSearch, ledger: str, revision: str, batch: int, at: dt.datetime,
           offset: int, bad: int = 0, uuid_: str = "u") -> None:
    search.index(index=ledger, id=f"{revision}:{batch}", params={"refresh": "wait_for"},
                 body=_batch_doc(revision, batch, at, offset, bad, uuid_))


def _one_a_second(search: OpenSearch, ledger: str, revision: str, batches: range) -> None:
    """Batch b committed at T0 + b seconds, ending at offset b, with one bad record each: one
    bulk request and one refresh (a wait_for per document waits a refresh interval each)."""
    lines: list[dict[str, Any]] = []
    for b in batches:
        lines += [{"index": {"_index": ledger, "_id": f"{revision}:{b}"}},
                  _batch_doc(revision, b, T0 + dt.timedelta(seconds=b), offset=b, bad=1)]
    answer = search.bulk(body=lines, params={"refresh": "true"})
    assert not answer["errors"], answer


def _spec(base: str) -> DerivedViewSpec:
    return DerivedViewSpec.model_validate({
        "source": {"kafka": {"bootstrapServers": "k:9092"}, "topics": ["t"],
                   "schema": "k STRING, v BIGINT"},
        "transform": {"sql": "SELECT k, v FROM events"},
        "sink": {"opensearch": {"secretRef": {"name": "s"}, "index": base},
                 "primaryKey": ["k"]}})


def test_unreachable_and_unusable_secrets_are_told_apart() -> None:
    with pytest.raises(SinkSecretInvalid, match="key url is missing"):
        OpenSearchSession.open({}, CONFIG, SinkPools(1))
    with pytest.raises(SinkUnavailable, match=r"OpenSearch at http://127\.0\.0\.1:9"):
        OpenSearchSession.open({"url": "http://127.0.0.1:9"}, CONFIG, SinkPools(1))


def test_switch_is_one_atomic_step_that_checks_where_the_alias_was(
        stack: Any, search: OpenSearch, base: str, ledger: str) -> None:
    session = _session(stack, ledger)
    a, b, c = (f"{base}__{r}" for r in ("aaaa", "bbbb", "cccc"))
    for name in (a, b, c):
        _index(search, name, "shop/orders", {"x": 1})
    session.switch_alias("", base, a, None, owner=SHOP)
    assert search.indices.get_alias(name=base) == {a: {"aliases": {base: {}}}}
    session.switch_alias("", base, a, None, owner=SHOP)  # idempotent
    with pytest.raises(AliasConflict, match="expected"):
        session.switch_alias("", base, c, b, owner=SHOP)
    session.switch_alias("", base, b, a, owner=SHOP)
    assert search.indices.get_alias(name=base) == {b: {"aliases": {base: {}}}}
    with pytest.raises(AliasConflict, match="belongs to DerivedView shop/orders"):
        session.switch_alias("", base, c, b, owner=OTHER)
    with pytest.raises(RuntimeError, match="alias's target"):
        session.drop_index("", b, "bbbb", owner_uid=SHOP.uid)
    # its switch recorded the UID on the index, which had its view's name only
    session.drop_index("", a, "aaaa", owner_uid=SHOP.uid)
    assert not search.indices.exists(index=a)
    session.drop_index("", a, "aaaa", owner_uid=SHOP.uid)  # gone already: nothing to do
    session.drop_alias("", base)
    assert not search.indices.exists_alias(name=base)
    session.drop_alias("", base)


def _meta(search: OpenSearch, index: str) -> Any:
    return search.indices.get_mapping(index=index)[index]["mappings"]["_meta"]


def test_an_alias_is_judged_by_the_uid_its_index_records(
        stack: Any, search: OpenSearch, base: str, ledger: str) -> None:
    """A view deleted with deletionPolicy Retain and applied again (same namespace and name,
    another UID, other SQL: another index) never switches the alias it left; an index from
    before UIDs were recorded is judged by name, and the switch records the UID on it."""
    session = _session(stack, ledger)
    old, new, legacy = (f"{base}__{r}" for r in ("aaaa", "bbbb", "cccc"))
    _index(search, old, "shop/orders", {"x": 1}, uid="uid-shop")
    _index(search, new, "shop/orders", {"x": 2}, uid="uid-shop-again")
    _index(search, legacy, "shop/orders", {"x": 3})
    session.switch_alias("", base, old, None, owner=SHOP)
    again = IndexOwner("shop", "orders", "uid-shop-again")
    with pytest.raises(AliasConflict, match=r"alias .* belongs to DerivedView shop/orders "
                                            r"\(uid uid-shop\), not to"):
        session.switch_alias("", base, new, old, owner=again)
    assert search.indices.get_alias(name=base) == {old: {"aliases": {base: {}}}}
    with pytest.raises(AliasConflict, match=r"index .* belongs to DerivedView shop/orders "
                                            r"\(uid uid-shop-again\)"):
        session.switch_alias("", base, new, old, owner=SHOP)
    with pytest.raises(ValueError, match="needs its view's uid"):
        session.switch_alias("", base, old, old, owner=IndexOwner("shop", "orders", ""))
    search.indices.put_mapping(index=legacy, body={"_meta": {
        "derived_views": {"view": "shop/orders", "revision": "cccc"}, "theirs": {"k": 1}}})
    session.switch_alias("", base, legacy, old, owner=SHOP)
    assert _meta(search, legacy) == {"theirs": {"k": 1}, "derived_views": {
        "view": "shop/orders", "revision": "cccc", "uid": "uid-shop"}}
    with pytest.raises(AliasConflict, match=r"\(uid uid-shop\), not to"):
        session.switch_alias("", base, new, legacy, owner=again)


def test_observe_reads_indexes_alias_owner_and_ledger_heads(
        stack: Any, search: OpenSearch, base: str, ledger: str) -> None:
    from derived_views.core.revision import revision_of

    spec = _spec(base)
    revision = revision_of(spec)
    index = f"{base}__{revision}"
    identity = _index(search, index, "shop/orders", {"x": 1, "y": 2})
    for batch in range(3):
        _batch(search, ledger, revision, batch, T0 + dt.timedelta(seconds=20 * batch),
               offset=10 * (batch + 1), bad=batch, uuid_=identity)
    session = _session(stack, ledger)
    session.switch_alias("", base, index, None, owner=SHOP)
    seen = session.observe(spec, DerivedViewStatus(), dropping=False)
    sink = seen
    assert sink.indexes == frozenset({index}) and sink.alias_target == index
    # the index recorded its view's name only: the switch added the UID
    assert sink.alias_owner == SHOP
    assert sink.index_oids == {index: identity}
    assert seen.index_rows == {index: 2}
    assert sink.bad_records == {revision: 0 + 1 + 2}
    head = sink.ledger[revision]
    assert (head.batch_id, head.end_offsets, head.index_oid) == (2, {("t", 0): 30}, identity)
    assert head.committed_at == T0 + dt.timedelta(seconds=40)
    # the newest batch at least 30 s before the newest (batch 0, 40 s earlier)
    assert head.earlier is not None and head.earlier.batch_id == 0


def test_pruning_keeps_what_the_rate_and_resuming_need_and_every_bad_record(
        stack: Any, search: OpenSearch, ledger: str) -> None:
    revision = "r1"
    _one_a_second(search, ledger, revision, range(60))  # the rate window reaches back 30
    positions, bad, oldest, _ = opensearch_ledger.read_heads(search, ledger, [revision])
    assert bad == {revision: 60} and oldest == {revision: 0}
    assert positions[revision].earlier is not None
    assert positions[revision].earlier.batch_id == 29
    deleted = opensearch_ledger.prune(search, ledger, positions, oldest)
    assert deleted == 29  # batches 0..28; from 29 (the rate's) on stay
    positions, bad, oldest, _ = opensearch_ledger.read_heads(search, ledger, [revision])
    assert bad == {revision: 60} and oldest == {revision: 29}
    assert opensearch_ledger.prune(search, ledger, positions, oldest) == 0
    # a crash after the summary was written but before the delete: nothing counted twice
    _one_a_second(search, ledger, revision, range(60, 100))
    positions, bad, oldest, _ = opensearch_ledger.read_heads(search, ledger, [revision])
    head = positions[revision]
    assert head.earlier is not None and head.earlier.batch_id is not None
    opensearch_ledger._fold(search, ledger, revision, head.earlier.batch_id)
    assert opensearch_ledger.read_heads(search, ledger, [revision])[1] == {revision: 100}
    opensearch_ledger.prune(search, ledger, positions, oldest)
    positions, bad, oldest, _ = opensearch_ledger.read_heads(search, ledger, [revision])
    assert bad == {revision: 100} and oldest[revision] == head.earlier.batch_id
    opensearch_ledger.drop_revision(search, ledger, revision)
    assert opensearch_ledger.read_heads(search, ledger, [revision]) == ({}, {}, {}, {})
    with pytest.raises(NotFoundError):
        search.get(index=ledger, id=f"{revision}:pruned")


def test_checks_count_and_sample_both_indexes(stack: Any, search: OpenSearch, base: str,
                                              ledger: str) -> None:
    candidate, active = f"{base}__cand", f"{base}__act"
    _index(search, candidate, "shop/orders", {str(i): i for i in range(50)})
    _index(search, active, "shop/orders", {str(i): i for i in range(3, 52)})
    request = CheckRequest(
        revision="cand", schema="", index=candidate, active_index=active, primary_key=("k",),
        same_key=True, checks_hash="h", checks=CutoverChecks.model_validate(
            {"rowCount": {"maxDifference": 0}, "keySample": {"size": 100}}))
    found = _session(stack, ledger).run_checks(request)
    assert found["rowCount"][0] == RowCounts(candidate=50, active=49)
    sample = found["keySample"][0]
    assert isinstance(sample, KeySampleFound)
    assert (sample.sampled_active, sample.missing_from_candidate) == (49, 2)  # 50, 51
    assert (sample.sampled_candidate, sample.missing_from_active) == (50, 3)  # 0, 1, 2
    assert set(sample.examples) <= {"0", "1", "2", "50", "51"}


def test_observe_reads_each_index_s_owner_and_a_drop_refuses_another_view_s(
        stack: Any, search: OpenSearch, base: str, ledger: str) -> None:
    from derived_views.core.revision import revision_of

    spec = _spec(base)
    revision = revision_of(spec)
    index = f"{base}__{revision}"
    _index(search, index, "billing/orders", {"x": 1}, uid="uid-billing")
    _batch(search, ledger, revision, 0, T0, offset=1)
    session = _session(stack, ledger)
    seen = session.observe(spec, DerivedViewStatus(), dropping=True)
    assert seen.index_owners == {index: IndexOwner("billing", "orders", "uid-billing")}
    with pytest.raises(RuntimeError, match="belongs to DerivedView billing/orders"):
        session.drop_index("", index, revision, owner_uid="uid-shop")
    assert search.indices.exists(index=index)
    search.indices.refresh(index=ledger)
    assert search.count(index=ledger)["count"] == 1  # its ledger documents stay too
    session.drop_index("", index, revision, owner_uid="uid-billing")
    assert not search.indices.exists(index=index)


def test_an_index_from_before_uids_is_owned_by_the_view_it_names(
        stack: Any, search: OpenSearch, base: str, ledger: str) -> None:
    from derived_views.core.revision import revision_of

    spec = _spec(base)
    index = f"{base}__{revision_of(spec)}"
    _index(search, index, "shop/orders", {"x": 1})
    seen = _session(stack, ledger).observe(spec, DerivedViewStatus(), dropping=False)
    assert seen.index_owners == {index: IndexOwner("shop", "orders", "")}


PARTS = frozenset({("t", 0)})


def _in_flight(search: OpenSearch, ledger: str, revision: str, offset: int) -> None:
    """The job's in-flight document (docs/sinks.md), written before a batch's first row."""
    search.index(index=ledger, id=f"{revision}:in-flight", body={
        "revision": revision, "in_flight_batch": 9, "end_offsets": {"t": {"0": offset}},
        "written_at": T0.isoformat()})


def _write_blocked(search: OpenSearch, index: str) -> bool:
    found = search.indices.get_settings(index=index, name="index.blocks.write")
    return bool(found.get(index, {}).get("settings"))


def _serving_and_candidate(stack: Any, search: OpenSearch, base: str, ledger: str
                           ) -> tuple[OpenSearchSession, str, str]:
    session = _session(stack, ledger)
    a, c = f"{base}__aaaa", f"{base}__cccc"
    for name in (a, c):
        _index(search, name, "shop/orders", {"x": 1})
    session.switch_alias("", base, a, None, owner=SHOP)
    _batch(search, ledger, "aaaa", 0, T0, offset=10)
    _batch(search, ledger, "cccc", 0, T0, offset=10)
    return session, a, c


def test_a_batch_in_flight_on_the_serving_index_holds_the_switch_back(
        stack: Any, search: OpenSearch, base: str, ledger: str) -> None:
    """Rows of a batch being written are searchable before its ledger document: the candidate
    must reach the batch in flight, not only the serving ledger."""
    session, a, c = _serving_and_candidate(stack, search, base, ledger)
    _in_flight(search, ledger, "aaaa", offset=14)
    guard = Guard("aaaa", "cccc", PARTS, wait_seconds=0.5)
    with pytest.raises(SwitchDeferred, match=r"behind the serving revision aaaa .* t/0 by 4"):
        session.switch_alias("", base, c, a, owner=SHOP, not_behind=guard)
    assert search.indices.get_alias(name=base) == {a: {"aliases": {base: {}}}}
    assert not _write_blocked(search, a)  # the hold is lifted when the switch gives up
    assert opensearch_ledger.hold_of(search, ledger, base) is None
    _batch(search, ledger, "cccc", 1, T0, offset=14)
    session.switch_alias("", base, c, a, owner=SHOP, not_behind=guard)
    assert search.indices.get_alias(name=base) == {c: {"aliases": {base: {}}}}
    assert not _write_blocked(search, a)


def test_the_switch_blocks_the_serving_index_s_writes_while_it_waits(
        stack: Any, search: OpenSearch, base: str, ledger: str) -> None:
    session, a, c = _serving_and_candidate(stack, search, base, ledger)
    outcome: list[BaseException | None] = []

    def switch() -> None:
        try:
            session.switch_alias("", base, c, a, owner=SHOP,
                                 not_behind=Guard("aaaa", "cccc", PARTS, wait_seconds=60))
            outcome.append(None)
        except BaseException as exc:  # reported by the test thread
            outcome.append(exc)

    # Level by the ledgers, so nothing is awaited before the hold; but the serving job was
    # writing a batch: readers may have seen its rows, and the candidate must reach them.
    _in_flight(search, ledger, "aaaa", offset=12)
    switching = threading.Thread(target=switch)
    switching.start()
    try:
        wait_for(lambda: _write_blocked(search, a), timeout=30,
                 what="the switch to block the serving index's writes")
        # The serving job's next rows are refused while the switch waits; readers still read.
        answer = search.bulk(body=[{"index": {"_id": "y"}}, {"k": "y", "v": 2}], index=a)
        assert answer["items"][0]["index"]["error"]["type"] == "cluster_block_exception"
        assert search.count(index=a)["count"] == 1
        assert opensearch_ledger.hold_of(search, ledger, base) is not None
        assert search.indices.get_alias(name=base) == {a: {"aliases": {base: {}}}}
        _batch(search, ledger, "cccc", 1, T0, offset=12)  # the candidate reaches the serving
    finally:
        switching.join(timeout=60)
    assert outcome == [None]
    assert search.indices.get_alias(name=base) == {c: {"aliases": {base: {}}}}
    assert not _write_blocked(search, a)
    assert opensearch_ledger.hold_of(search, ledger, base) is None


def test_a_hold_left_by_a_dead_operator_is_lifted_by_the_next_observation(
        stack: Any, search: OpenSearch, base: str, ledger: str) -> None:
    session, a, _c = _serving_and_candidate(stack, search, base, ledger)
    search.indices.put_settings(index=a, body={"index.blocks.write": True})
    search.index(index=ledger, id=f"hold:{base}", body={
        "hold_of": base, "index": a, "since": T0.isoformat()}, params={"refresh": "true"})
    recent = f"{base}-recent"  # a hold as young as a switch in progress is left alone
    search.index(index=ledger, id=f"hold:{recent}", body={
        "hold_of": recent, "index": a, "since": dt.datetime.now(dt.UTC).isoformat()})
    session.observe(_spec(base), DerivedViewStatus(), dropping=False)
    assert not _write_blocked(search, a)
    assert opensearch_ledger.hold_of(search, ledger, base) is None
    assert opensearch_ledger.hold_of(search, ledger, recent) is not None
