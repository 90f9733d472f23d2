"""The diff check against the stack's OpenSearch: two indexes built with known differences,
read side by side in `_id` order, the counts written out by hand."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

import pytest
from opensearchpy import OpenSearch

from derived_views.adapters.opensearch import diff as opensearch_diff
from derived_views.adapters.opensearch.checks import run_query_checks
from derived_views.api.spec import CutoverChecks
from derived_views.api.status import CheckOutcome
from derived_views.core import check_runs
from derived_views.core.cutover import checks
from derived_views.core.cutover.diff import ColumnChanges, DiffFound, Mode

T0 = dt.datetime(2026, 11, 24, tzinfo=dt.UTC)




def build(search: OpenSearch, name: str, docs: dict[str, dict[str, Any]],
          extra: dict[str, Any] | None = None) -> str:
    search.indices.create(index=name, body={"mappings": {"properties": {
        "customer_id": {"type": "keyword"}, "balance": {"type": "double"},
        "note": {"type": "keyword"}, **(extra or {})}}})
    lines: list[dict[str, Any]] = []
    for key, fields in docs.items():
        lines += [{"index": {"_index": name, "_id": key}}, {"customer_id": key, **fields}]
    if lines:
        answer = search.bulk(body=lines, params={"refresh": "true"})
        assert not answer["errors"]
    return name


def customers(n: int) -> dict[str, dict[str, Any]]:
    return {f"c-{i:05d}": {"balance": 10.0, "note": "n"} for i in range(n)}


def request(cand: str, active: str, diff: dict[str, Any], timeout: int = 30
            ) -> check_runs.CheckRequest:
    return check_runs.CheckRequest(
        revision="cand0000d1", schema="", index=cand, active_index=active,
        primary_key=("customer_id",), same_key=True,
        checks=CutoverChecks.model_validate({"diff": diff, "timeoutSeconds": timeout}),
        checks_hash="h")


def test_three_changed_documents_of_a_hundred(search: OpenSearch, base: str) -> None:
    active = build(search, f"{base}__actv", customers(100))
    docs = customers(100)
    for key in ("c-00007", "c-00042", "c-00099"):
        docs[key] = {"balance": 11.0, "note": "n"}
    cand = build(search, f"{base}__cand", docs)
    for threshold, outcome in (("1%", CheckOutcome.Failed), ("5%", CheckOutcome.Passed)):
        req = request(cand, active, {"maxChangedRows": threshold})
        found = run_query_checks(search, req)
        assert found["diff"][0] == DiffFound(
            mode=Mode.STREAMED, candidate_rows=100, active_rows=100, only_candidate=0,
            only_active=0, changed=3,
            columns=(ColumnChanges("balance", 3, ("c-00007", "c-00042", "c-00099")),
                     ColumnChanges("note", 0)),
            changed_examples=("c-00007", "c-00042", "c-00099"), compared=200)
        assert checks.judge_checks(req, found, T0).results[0].outcome == outcome


def test_documents_on_one_side_and_changed_fields(search: OpenSearch, base: str) -> None:
    # more than a page of each index: the pages are merged in _id order
    active = build(search, f"{base}__actv", customers(2500))
    docs = customers(2500)
    del docs["c-00010"], docs["c-01500"]
    docs.update({"c-90000": {"balance": 1.0}, "c-90001": {"balance": 1.0},
                 "c-00000a": {"balance": 1.0, "note": "x"}, "a-1": {}})
    for key in ("c-00001", "c-00002", "c-02003"):
        docs[key] = {**docs[key], "balance": -1.0}
    docs["c-02003"]["note"] = None  # null, not "n": it differs
    docs["c-02004"] = {"balance": 10.0}  # the note missing: differs from "n"
    cand = build(search, f"{base}__cand", docs)
    found, _ = run_query_checks(search, request(cand, active, {"maxChangedRows": 0}))["diff"]
    assert isinstance(found, DiffFound)
    assert (found.candidate_rows, found.active_rows) == (2502, 2500)
    assert (found.only_candidate, found.only_active, found.changed) == (4, 2, 4)
    assert found.only_candidate_examples == ("a-1", "c-00000a", "c-90000")
    assert found.only_active_examples == ("c-00010", "c-01500")
    assert found.columns == (ColumnChanges("balance", 3, ("c-00001", "c-00002", "c-02003")),
                             ColumnChanges("note", 2, ("c-02003", "c-02004")))
    assert (found.complete, found.compared) == (True, 5002)


def test_named_fields_and_fields_of_one_index(search: OpenSearch, base: str) -> None:
    active = build(search, f"{base}__actv", customers(10))
    docs = customers(10)
    docs["c-00001"] = {"balance": 2.0, "note": "n", "tier": "gold"}
    cand = build(search, f"{base}__cand", docs, extra={"tier": {"type": "keyword"}})
    found, _ = run_query_checks(search, request(cand, active, {
        "maxChangedRows": 0, "columns": ["note"]}))["diff"]
    assert isinstance(found, DiffFound)
    assert (found.changed, found.not_compared) == (0, ("tier",))
    measured, _ = run_query_checks(search, request(cand, active, {
        "maxChangedRows": 0, "columns": ["tier"]}))["diff"]
    assert measured == checks.CouldNotRun(
        "diff.columns names tier, which is not a compared column of both indexes (the primary "
        "key is matched, not compared); columns both have: balance, note")


def test_the_timeout_stops_the_comparison(search: OpenSearch, base: str,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    active = build(search, f"{base}__actv", customers(250))
    docs = customers(250)
    docs["c-00001"] = {"balance": 2.0, "note": "n"}
    docs["c-00002"] = {"balance": 2.0, "note": "n"}
    cand = build(search, f"{base}__cand", docs)
    monkeypatch.setattr(opensearch_diff, "PAGE", 100)
    pages = 0
    real_left = opensearch_diff._left

    def two_pages(deadline: float) -> float:  # the clock runs out after two pages of each
        nonlocal pages
        pages += 1
        return real_left(deadline if pages <= 4 else 0.0)

    monkeypatch.setattr(opensearch_diff, "_left", two_pages)
    req = request(cand, active, {"maxChangedRows": 1})
    found = run_query_checks(search, req)
    measured = found["diff"][0]
    assert isinstance(measured, DiffFound)
    assert (measured.complete, measured.changed) == (False, 2)
    assert measured.compared in range(300, 401)
    assert checks.judge_checks(req, found, T0).results[0].outcome == CheckOutcome.Failed
    found = run_query_checks(search, request(cand, active, {"maxChangedRows": 5}))
    result = checks.judge_checks(request(cand, active, {"maxChangedRows": 5}), found,
                                 T0).results[0]
    assert result.outcome == CheckOutcome.Error
    assert "stopped at the timeout" in (result.observed or "")


class _BehindThenCaughtUp(OpenSearch):
    """The stack's OpenSearch as the diff sees it while the active's job is a batch behind:
    the first time the diff asks the ledger where the jobs stand (its pass is over), that
    job commits its next batch, as a running job would (a real write, then the ledger row)."""

    def __init__(self, host: str, catch_up: Any) -> None:
        super().__init__(hosts=[host], timeout=30)
        self.catch_up, self.asked = catch_up, 0

    def msearch(self, *args: Any, **kwargs: Any) -> Any:
        self.asked += 1
        if self.asked == 2:  # read_heads' first msearch is its newest batches; then, the rate
            self.catch_up()
        return super().msearch(*args, **kwargs)


def _ledger_batch(search: OpenSearch, ledger: str, revision: str, batch: int, offset: int
                  ) -> None:
    search.index(index=ledger, id=f"{revision}:{batch}", params={"refresh": "wait_for"},
                 body={"revision": revision, "batch_id": batch,
                       "end_offsets": {"orders": {"0": offset}}, "bad_records": 0,
                       "committed_at": T0.isoformat(), "index_uuid": "u"})


def test_keys_that_differ_only_while_one_job_is_behind_settle(stack: Any, search: OpenSearch,
                                                               base: str) -> None:
    """Five keys differ by the lag (the candidate read offsets 100-104, the active not yet)
    and two by the transform: once the active commits up to 105 the five agree, the two do
    not, so 2 of 100 changed, 5 settled; without the ledger the seven count."""
    ledger = f"{base}__ledger"
    active_docs, cand_docs = customers(100), customers(100)
    lagging = [f"c-{i:05d}" for i in range(10, 15)]
    for key in lagging:
        cand_docs[key] = {"balance": 12.0, "note": "n"}
    for key in ("c-00050", "c-00060"):
        cand_docs[key] = {"balance": 10.0, "note": "v2"}
    active = build(search, f"{base}__actv", active_docs)
    cand = build(search, f"{base}__cand", cand_docs)
    req = dataclasses.replace(request(cand, active, {"maxChangedRows": 3}),
                              active_revision="actv0000d1")
    _ledger_batch(search, ledger, req.revision, 7, 105)
    _ledger_batch(search, ledger, "actv0000d1", 4, 100)

    without = run_query_checks(search, req, ledger=f"{base}__no_ledger")["diff"][0]
    assert isinstance(without, DiffFound) and (without.changed, without.settled) == (7, 0)

    def catch_up() -> None:
        answer = search.bulk(body=[line for key in lagging for line in (
            {"index": {"_index": active, "_id": key}},
            {"customer_id": key, "balance": 12.0, "note": "n"})], params={"refresh": "true"})
        assert not answer["errors"]
        _ledger_batch(search, ledger, "actv0000d1", 5, 105)

    spied = _BehindThenCaughtUp(stack.opensearch, catch_up)
    try:
        found = run_query_checks(spied, req, ledger=ledger)["diff"][0]
    finally:
        spied.close()
    assert isinstance(found, DiffFound)
    assert (found.changed, found.settled, found.changed_examples) == (
        2, 5, ("c-00050", "c-00060")), found
    assert found.columns == (ColumnChanges("balance", 0), ColumnChanges("note", 2,
                                                                        ("c-00050", "c-00060")))
    assert checks.judge_checks(req, {"diff": (found, 0.1)}, T0).results[0].outcome \
        == CheckOutcome.Passed
    assert "5 keys differed only while one job was behind" in checks.judge_checks(
        req, {"diff": (found, 0.1)}, T0).results[0].observed
