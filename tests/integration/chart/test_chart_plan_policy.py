"""`dv plan` judges views by the tenancy policy of an operator the chart installed.

The policy lives where the chart puts it (the operator StatefulSet's environment), not in the
CLI: a plan run with the CLI's defaults would refuse any Kafka cluster but loopback, so a
view on a cluster only the release lists passes only when that release's policy was read.
The operator pods never run here (see conftest); the StatefulSet is enough to read.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dvstack.chart import Release
from support.cli_harness import G, V, cli_environment, spec_v1

SHOP_KAFKA = "kafka.shop.svc:9093"


def _manifest(tmp: Path, namespace: str, bootstrap: str) -> Path:
    spec = spec_v1()
    spec["source"]["kafka"]["bootstrapServers"] = bootstrap
    path = tmp / f"{namespace}.yaml"
    path.write_text(json.dumps({"apiVersion": f"{G}/{V}", "kind": "DerivedView",
                                "metadata": {"name": "orders", "namespace": namespace},
                                "spec": spec}))
    return path


def _plan(stack: Any, path: Path, operator_namespace: str,
          *extra: str) -> tuple[int, dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-m", "derived_views.cli", "--kubeconfig", stack.kubeconfig, "plan",
         "-f", str(path), "-o", "json", "--no-server-dry-run", "--no-read-sources",
         "--operator-namespace", operator_namespace, *extra],
        capture_output=True, text=True, timeout=60, env=cli_environment(), check=False)
    assert done.stdout, done.stderr
    return done.returncode, json.loads(done.stdout)


def test_plan_reads_the_policy_a_release_installed(
        stack: Any, make_namespace: Callable[[str], str],
        install: Callable[..., Release], tmp_path: Path) -> None:
    ns = make_namespace("op")
    shop, billing = make_namespace("shop"), make_namespace("billing")
    install(ns, {"watch": {"mode": "namespaces", "namespaces": [shop, billing]},
                 "tenancy": {"kafka": {"clusters": [
                     {"namespaces": [shop], "bootstrapServers": [SHOP_KAFKA]}]}}})

    # The release's StatefulSet is found by the chart's label: its name is not the default.
    code, report = _plan(stack, _manifest(tmp_path, shop, SHOP_KAFKA), ns)
    assert not [w for w in report["warnings"] if "tenancy policy" in w], report["warnings"]
    view = report["views"][0]
    assert [r for r in view["refusals"] if r["reason"] == "PolicyViolation"] == [], view
    assert view["change"]["kind"] == "replay", view

    # The same cluster from a namespace the release does not list it for: the operator's words.
    code, report = _plan(stack, _manifest(tmp_path, billing, SHOP_KAFKA), ns)
    assert code == 1, report
    messages = [r["message"] for r in report["views"][0]["refusals"]
                if r["reason"] == "PolicyViolation"]
    assert any(f"is not a Kafka cluster the platform lists for namespace {billing}"
               in " ".join(m.split()) for m in messages), messages


def test_without_an_installed_operator_the_plan_says_it_used_the_defaults(
        stack: Any, make_namespace: Callable[[str], str], tmp_path: Path) -> None:
    empty, shop = make_namespace("none"), make_namespace("shop")
    code, report = _plan(stack, _manifest(tmp_path, shop, SHOP_KAFKA), empty)
    assert any("the installed tenancy policy was not read" in w and empty in w
               for w in report["warnings"]), report["warnings"]
    assert code == 1, report  # the chart's default lists loopback only
    assert any(r["reason"] == "PolicyViolation" for r in report["views"][0]["refusals"]), report
