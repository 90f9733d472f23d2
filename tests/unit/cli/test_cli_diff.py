"""`dv diff`: which indexes it compares (default: the candidate against the active), what it
refuses to compare, and its JSON (measurements written by hand)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from derived_views.api.status import DerivedViewStatus
from derived_views.cli.diff import DiffError, diff_json, diff_request
from derived_views.core.cutover.diff import ColumnChanges, DiffFound, Mode
from support.world.hand_observed import record
from support.world.samples import make_spec

CONTENT = {"topics": ["orders"], "format": "json", "sql": "SELECT 1",
           "schema": "order_id STRING, customer_id STRING", "primaryKey": ["customer_id"]}


def status(*, key: list[str] | None = None, old: str = "Retired") -> DerivedViewStatus:
    return DerivedViewStatus.model_validate({
        "active": {"revision": "r1", "index": "orders_by_customer__r1",
                   "since": "2026-03-01T10:00:00Z"},
        "candidate": {"revision": "r2", "index": "orders_by_customer__r2",
                      "phase": "CaughtUp", "since": "2026-03-01T11:00:00Z"},
        "revisions": [record("r0", old, content=CONTENT),
                      record("r1", "Active", content=CONTENT),
                      record("r2", "CaughtUp",
                             content={**CONTENT, "primaryKey": key or ["customer_id"]})]})


def spec(checks: dict[str, Any] | None = None) -> Any:
    return make_spec(cutover={"checks": checks} if checks else {})


def test_the_candidate_against_the_active_by_default() -> None:
    compared = diff_request("shop/orders", spec({"diff": {"maxChangedRows": "1%"},
                                                 "timeoutSeconds": 90}),
                            status(), None, None)
    request = compared.request
    assert (compared.revision, compared.against) == ("r2", "r1")
    assert (request.index, request.active_index) == ("orders_by_customer__r2",
                                                     "orders_by_customer__r1")
    assert request.primary_key == ("customer_id",) and request.parity
    assert request.checks.timeout_seconds == 90
    assert compared.judged is not None and compared.judged.max_changed_rows == "1%"


def test_without_a_configured_diff_it_compares_unjudged() -> None:
    compared = diff_request("shop/orders", spec(), status(), "r1", "r2")
    assert compared.judged is None and compared.request.checks.diff is not None
    assert (compared.request.index, compared.request.checks.timeout_seconds) == (
        "orders_by_customer__r1", 60)


@pytest.mark.parametrize(("revision", "against", "view_status", "message"), [
    ("r9", None, status(), "shop/orders has no revision r9 (its revisions: r0, r1, r2)"),
    ("r0", None, status(), "revision r0 of shop/orders is Retired: its index may be dropped"),
    ("r2", "r2", status(), "revision r2 against itself: name another with --against"),
    (None, None, status(key=["order_id"]),
     "revisions r2 and r1 of shop/orders do not have the same primary key: their rows cannot "
     "be matched"),
    (None, None, DerivedViewStatus(), "shop/orders has no candidate: name a revision with "
                                      "--revision"),
])
def test_what_it_refuses(revision: str | None, against: str | None,
                         view_status: DerivedViewStatus, message: str) -> None:
    with pytest.raises(DiffError) as refused:
        diff_request("shop/orders", spec(), view_status, revision, against)
    assert str(refused.value) == message


def test_the_json() -> None:
    compared = diff_request("shop/orders", spec({"diff": {"maxChangedRows": 5}}), status(),
                            None, None)
    found = DiffFound(Mode.HASHED, 101, 100, 1, 0, 2, (ColumnChanges("amount", 2, ("c-1",)),),
                      only_candidate_examples=("c-new",), changed_examples=("c-1", "c-2"),
                      ranges=1024, differing_ranges=3)
    shown = json.loads(diff_json(compared, found, 1.23456))
    assert shown == {
        "view": "shop/orders",
        "revision": {"revision": "r2", "index": "orders_by_customer__r2"},
        "against": {"revision": "r1", "index": "orders_by_customer__r1"},
        "mode": "hashed", "rows": {"revision": 101, "against": 100}, "different": 3,
        "onlyInRevision": {"rows": 1, "examples": ["c-new"]},
        "onlyInAgainst": {"rows": 0, "examples": []},
        "changed": {"rows": 2, "examples": ["c-1", "c-2"]},
        "columns": [{"column": "amount", "rows": 2, "examples": ["c-1"]}],
        "notCompared": [], "inFlight": 0, "settled": 0, "complete": True, "seconds": 1.235,
        "verdict": {"outcome": "Passed", "expected": "at most 5 rows differ"},
        "ranges": {"hashed": 1024, "differing": 3}}
