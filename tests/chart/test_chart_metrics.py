"""The chart's metrics wiring and Grafana dashboard, rendered by the real helm."""

from __future__ import annotations

import json
import re
from typing import Any

from derived_views.process.metrics import Metrics
from support.chart_render import Render, RenderError
from support.paths import REPO

DASHBOARD = REPO / "charts" / "derived-views" / "dashboards" \
    / "derived-views.json"
# What the operator exports (hand-written; checked against a live registry below).
EXPORTED = {"derived_views_ready", "derived_views_lag_messages", "derived_views_lag_seconds",
            "derived_views_lag_eta_seconds", "derived_views_lag_batch_read_messages",
            "derived_views_index_rows", "derived_views_bad_records",
            "derived_views_cutovers_total", "derived_views_check_failures_total",
            "derived_views_cutover_switch_seconds_bucket",
            "derived_views_cutover_gate_to_switch_seconds_bucket",
            "derived_views_reconcile_errors_total",
            "derived_views_reconcile_duration_seconds_bucket",
            "derived_views_end_offsets_fetches_total", "derived_views_settled_views"}


def kinds(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {f"{o['kind']}/{o['metadata']['name']}": o for o in objects}


def container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    sts = next(o for o in objects if o["kind"] == "StatefulSet")
    c: dict[str, Any] = sts["spec"]["template"]["spec"]["containers"][0]
    return c


def test_metrics_are_on_by_default_with_a_service(render: Render) -> None:
    objects = render()
    c = container(objects)
    assert {"name": "DV_METRICS_PORT", "value": "9090"} in c["env"]
    assert {"name": "metrics", "containerPort": 9090, "protocol": "TCP"} in c["ports"]
    svc = kinds(objects)["Service/rel-derived-views-metrics"]
    assert svc["spec"]["ports"] == [{"name": "metrics", "port": 9090, "targetPort": "metrics",
                                     "protocol": "TCP"}]
    assert svc["spec"]["selector"] == {"app.kubernetes.io/name": "derived-views",
                                       "app.kubernetes.io/instance": "rel"}
    assert not [k for k in kinds(objects) if k.startswith(("ServiceMonitor/", "ConfigMap/"))]


def test_metrics_off_removes_port_env_and_service(render: Render) -> None:
    objects = render({"metrics": {"enabled": False}})
    c = container(objects)
    assert "DV_METRICS_PORT" not in {e["name"] for e in c["env"]}
    assert [p["name"] for p in c["ports"]] == ["health"]
    assert not [k for k in kinds(objects) if k.startswith("Service/")]


def test_service_monitor_and_dashboard_when_asked(render: Render) -> None:
    objects = kinds(render({"metrics": {
        "port": 9400, "serviceMonitor": {"enabled": True, "interval": "15s",
                                         "labels": {"release": "kube-prometheus"}},
        "dashboard": {"enabled": True}}}))
    monitor = objects["ServiceMonitor/rel-derived-views"]
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus"
    assert monitor["spec"]["endpoints"] == [{"port": "metrics", "path": "/metrics",
                                             "interval": "15s", "honorLabels": True}]
    assert monitor["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] == "metrics"
    assert objects["Service/rel-derived-views-metrics"]["metadata"]["labels"][
        "app.kubernetes.io/component"] == "metrics"
    board = objects["ConfigMap/rel-derived-views-dashboard"]
    assert board["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(board["data"]["derived-views.json"]) == json.loads(DASHBOARD.read_text())


def test_unknown_metrics_keys_are_rejected(render_error: RenderError) -> None:
    assert "additional properties 'scrape' not allowed" in render_error(
        {"metrics": {"scrape": True}})


def test_dashboard_queries_only_name_exported_metrics() -> None:
    board = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in board["panels"] for t in p["targets"]]
    named = {m for e in exprs for m in re.findall(r"\bderived_views_[a-z_]+", e)}
    assert named <= EXPORTED, named - EXPORTED
    # every metric family the operator exports shows up on the dashboard
    families = {f.name for f in Metrics().registry.collect()}
    assert {re.sub(r"_(total|bucket)$", "", n) for n in EXPORTED} == families
    assert {re.sub(r"_(total|bucket)$", "", n) for n in named} == families
