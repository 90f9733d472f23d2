"""The Argo CD health script, run by Lua 5.1 (lupa) over hand-written statuses."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from support.argocd_lua import SCRIPT_PATH, health
from support.paths import REPO

GITOPS = REPO / "gitops" / "argocd"
SCRIPT = SCRIPT_PATH.read_text()
CM_KEY = "resource.customizations.health.derivedviews.io_DerivedView"


def cond(type_: str, status: str, reason: str = "AsExpected", message: str = "") -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": "2026-11-23T08:00:00Z", "observedGeneration": 2}


def view(status: dict[str, Any] | None, generation: int = 2,
         annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "orders", "namespace": "shop", "generation": generation}
    if annotations is not None:
        meta["annotations"] = annotations
    obj: dict[str, Any] = {"apiVersion": "derivedviews.io/v1alpha1", "kind": "DerivedView",
                           "metadata": meta, "spec": {}}
    if status is not None:
        obj["status"] = status
    return obj


SERVING = {"revision": "aaa111", "index": "orders__aaa111", "since": "2026-11-23T07:00:00Z"}
READY = cond("Ready", "True", "Serving", "public.orders serves revision aaa111")
CALM = [cond("Reconciling", "False"), cond("Stalled", "False"), cond("CaughtUp", "True"),
        cond("Degraded", "False")]

CASES = [
    ("created, operator not there yet", view(None), "Progressing",
     "Waiting for the operator to observe the view"),
    ("spec edited, old status still Ready", view(
        {"observedGeneration": 1, "active": SERVING, "conditions": [READY, *CALM]},
        generation=2), "Progressing", "Waiting for the operator to observe generation 2"),
    ("first backfill", view({"observedGeneration": 2, "phase": "Backfilling", "conditions": [
        cond("Ready", "False", "Backfilling", "no revision serves yet"),
        cond("Reconciling", "True", "Backfilling", "revision bbb222 replays from offset 0"),
        cond("Stalled", "False"), cond("CaughtUp", "False"), cond("Degraded", "False")],
        "candidate": {"revision": "bbb222", "lag": {"messages": 5000}}}),
     "Progressing", "revision bbb222 replays from offset 0; candidate bbb222 is 5000 messages"),
    ("serving, nothing to do", view({"observedGeneration": 2, "phase": "Active",
                                     "active": SERVING, "conditions": [READY, *CALM]}),
     "Healthy", "public.orders serves revision aaa111"),
    ("migration: active serves, candidate replays", view({
        "observedGeneration": 2, "phase": "Backfilling", "active": SERVING,
        "candidate": {"revision": "ccc333", "lag": {"messages": 120}},
        "conditions": [cond("Ready", "False", "Backfilling", "revision aaa111 serves while"),
                       cond("Reconciling", "True", "Backfilling", "building ccc333"),
                       cond("Stalled", "False"), cond("CaughtUp", "False"),
                       cond("Degraded", "False")]}),
     "Progressing", "building ccc333; candidate ccc333 is 120 messages behind"),
    ("job failed, active keeps serving", view({
        "observedGeneration": 2, "phase": "Failed", "active": SERVING,
        "conditions": [cond("Ready", "False", "JobFailed", "revision ccc333's job failed"),
                       cond("Reconciling", "False"),
                       cond("Stalled", "True", "JobFailed", "revision ccc333's job failed"),
                       cond("CaughtUp", "False"),
                       cond("Degraded", "True", "JobFailed", "revision ccc333's job failed")]}),
     "Degraded", "JobFailed: revision ccc333's job failed (revision aaa111 keeps serving)"),
    ("invalid spec, never served", view({
        "observedGeneration": 2, "conditions": [
            cond("Ready", "False", "InvalidSpec", "spec.sink: bad"),
            cond("Reconciling", "False"),
            cond("Stalled", "True", "InvalidSpec", "spec.sink: bad")]}),
     "Degraded", "InvalidSpec: spec.sink: bad"),
    ("only Degraded set", view({"observedGeneration": 2, "conditions": [
        cond("Degraded", "True", "JobFailed", "boom")]}), "Degraded", "JobFailed: boom"),
    ("paused wins over everything", view(
        {"observedGeneration": 2, "conditions": [cond("Stalled", "True", "JobFailed", "x")]},
        annotations={"derivedviews.io/paused": "true"}), "Suspended", "Paused by the"),
    ("paused annotation set to false is not a pause", view(
        {"observedGeneration": 2, "active": SERVING, "conditions": [READY, *CALM]},
        annotations={"derivedviews.io/paused": "false"}), "Healthy", "serves revision aaa111"),
    ("status without conditions", view({"observedGeneration": 2}), "Progressing",
     "Waiting for the view to become Ready"),
]


@pytest.mark.parametrize(("obj", "status", "message"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_health(obj: dict[str, Any], status: str, message: str) -> None:
    got_status, got_message = health(obj)
    assert got_status == status
    assert message in got_message


def test_the_argocd_cm_patch_inlines_the_same_script() -> None:
    patch = yaml.safe_load((GITOPS / "argocd-cm-patch.yaml").read_text())
    assert patch["data"][CM_KEY].strip() == SCRIPT.strip()
