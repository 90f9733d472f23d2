"""The operator's metrics, read back as Prometheus exposition text from hand-written statuses."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from derived_views.api.status import DerivedViewStatus
from derived_views.process.metrics import Metrics, gate_to_switch_seconds

T = "2026-11-23T08:00:00Z"


def lag(messages: int, seconds: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"messages": messages, "partitions": {}}
    if seconds is not None:
        out["seconds"] = seconds
    return out


def revision(rev: str, phase: str) -> dict[str, Any]:
    return {"revision": rev, "index": f"orders__{rev}", "phase": phase, "since": T,
            "sparkApplication": f"orders-{rev}", "checkpointLocation": f"/ckpt/{rev}",
            "startedAt": T}


def migrating() -> DerivedViewStatus:
    return DerivedViewStatus.model_validate({
        "observedGeneration": 3, "phase": "Backfilling",
        "active": {"revision": "aaa", "index": "orders__aaa", "since": T, "lag": lag(0, 0)},
        "candidate": {"revision": "bbb", "index": "orders__bbb", "phase": "Backfilling",
                      "since": T, "lag": lag(1500, 42)},
        "revisions": [revision("aaa", "Active"), revision("bbb", "Backfilling"),
                      revision("old", "Retired")],
        "conditions": [{"type": "Ready", "status": "True", "reason": "Serving",
                        "lastTransitionTime": T}],
        "lastCutover": {"from": None, "to": "aaa", "gateHeldAt": "2026-11-23T07:00:00Z",
                        "switchedAt": "2026-11-23T07:00:03Z"},
    })


def scrape(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(metrics.registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def key(name: str, **labels: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return name, tuple(sorted(labels.items()))


V = {"view_namespace": "shop", "view": "orders"}


def test_a_migrating_view_reports_both_revisions() -> None:
    metrics = Metrics()
    metrics.observe_view("shop", "orders", migrating(),
                         {"orders__aaa": 500, "orders__bbb": 120, "orders__old": 7})
    got = scrape(metrics)
    assert got[key("derived_views_ready", **V)] == 1.0
    assert got[key("derived_views_lag_messages", **V, revision="aaa", role="active")] == 0.0
    assert got[key("derived_views_lag_messages", **V, revision="bbb", role="candidate")] == 1500.0
    assert got[key("derived_views_lag_seconds", **V, revision="bbb", role="candidate")] == 42.0
    assert got[key("derived_views_index_rows", **V, revision="aaa", index="orders__aaa")] == 500.0
    assert got[key("derived_views_index_rows", **V, revision="bbb", index="orders__bbb")] == 120.0
    # a retired revision's table is on its way out: not reported even if still there
    assert not [k for k in got if k[0] == "derived_views_index_rows" and ("revision", "old") in k[1]]


def test_series_of_a_vanished_revision_are_removed() -> None:
    metrics = Metrics()
    metrics.observe_view("shop", "orders", migrating(), {"orders__aaa": 500, "orders__bbb": 120})
    after = DerivedViewStatus.model_validate({
        "phase": "Active",
        "active": {"revision": "bbb", "index": "orders__bbb", "since": T, "lag": lag(3)},
        "revisions": [revision("bbb", "Active")]})
    metrics.observe_view("shop", "orders", after, {"orders__bbb": 130})
    got = scrape(metrics)
    lags = {k: v for k, v in got.items() if k[0] == "derived_views_lag_messages"}
    assert lags == {key("derived_views_lag_messages", **V, revision="bbb", role="active"): 3.0}
    assert key("derived_views_lag_seconds", **V, revision="bbb", role="candidate") not in got
    assert got[key("derived_views_ready", **V)] == 0.0  # no Ready condition in this status


def test_cutovers_errors_and_forgetting_a_view() -> None:
    metrics = Metrics()
    metrics.observe_view("shop", "orders", migrating(), {})
    metrics.observe_view("shop", "other", migrating(), {})
    metrics.cutover("shop", "orders", 0.02)
    metrics.cutover("shop", "orders", 0.03)
    metrics.gate_to_switch("shop", "orders", migrating())
    metrics.reconcile_error("shop", "orders", "act")
    metrics.reconcile_duration(0.2)
    got = scrape(metrics)
    assert got[key("derived_views_cutovers_total", **V)] == 2.0
    assert got[key("derived_views_cutover_switch_seconds_count", **V)] == 2.0
    assert got[key("derived_views_cutover_switch_seconds_sum", **V)] == pytest.approx(0.05)
    assert got[key("derived_views_cutover_gate_to_switch_seconds_sum", **V)] == 3.0
    assert got[key("derived_views_reconcile_errors_total", **V, stage="act")] == 1.0
    assert got[key("derived_views_reconcile_duration_seconds_count")] == 1.0
    metrics.forget_view("shop", "orders")
    left = scrape(metrics)
    assert not [k for k in left if ("view", "orders") in k[1]]
    assert left[key("derived_views_ready", view_namespace="shop", view="other")] == 1.0


def test_gate_to_switch_needs_both_times() -> None:
    assert gate_to_switch_seconds(migrating()) == 3.0
    assert gate_to_switch_seconds(DerivedViewStatus()) is None
    partial = DerivedViewStatus.model_validate(
        {"lastCutover": {"to": "aaa", "switchedAt": T}})
    assert gate_to_switch_seconds(partial) is None
