"""`derived-views-crds` (the chart's pre-upgrade hook) against the real API server.

Helm never upgrades `crds/`: this command is the upgrade path. An old CRD (here:
the committed one without its Message printer column and without a version stamp)
is brought to this operator's; a CRD stamped by a newer operator is left alone.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from typing import Any

import pytest
import yaml
from kubernetes import client

from derived_views.core.crd_upgrade import VERSION_ANNOTATION
from dvstack.cli import apply_crds
from support.paths import REPO

# replaces the CRD every other test's views are admitted by
pytestmark = pytest.mark.all_namespaces

CRD = REPO / "crds" / "derivedviews.io_derivedviews.yaml"
NAME = "derivedviews.derivedviews.io"


def run_hook(stack: Any, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "derived_views.cli.crds", *args],
                          env={**os.environ, "KUBECONFIG": stack.kubeconfig},
                          capture_output=True, text=True, timeout=120, check=False)


def live(kube_api_client: Any) -> dict[str, Any]:
    api = client.ApiextensionsV1Api(kube_api_client)
    out: dict[str, Any] = kube_api_client.sanitize_for_serialization(
        api.read_custom_resource_definition(NAME))
    return out


def columns(crd: dict[str, Any]) -> list[str]:
    return [c["name"] for c in crd["spec"]["versions"][0]["additionalPrinterColumns"]]


def replace_with(kube_api_client: Any, crd: dict[str, Any]) -> None:
    api = client.ApiextensionsV1Api(kube_api_client)
    current = live(kube_api_client)
    body = copy.deepcopy(crd)
    body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    api.replace_custom_resource_definition(NAME, body)


@pytest.fixture()
def old_crd(kube_api_client: Any) -> Any:
    """The committed CRD minus its Message column, as a chart's `crds/` from an older release."""
    apply_crds(kube_api_client, [CRD])
    old = yaml.safe_load(CRD.read_text())
    version = old["spec"]["versions"][0]
    version["additionalPrinterColumns"] = [
        c for c in version["additionalPrinterColumns"] if c["name"] != "Message"]
    replace_with(kube_api_client, old)
    yield old
    replace_with(kube_api_client, yaml.safe_load(CRD.read_text()))


def test_the_hook_brings_an_old_crd_to_this_operators(stack: Any, kube_api_client: Any,
                                                       old_crd: Any) -> None:
    assert "Message" not in columns(live(kube_api_client))
    proc = run_hook(stack)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "applying" in proc.stdout and "without a version" in proc.stdout, proc.stdout
    after = live(kube_api_client)
    committed = yaml.safe_load(CRD.read_text())
    assert columns(after) == columns(committed)
    assert after["spec"]["versions"][0]["schema"] == committed["spec"]["versions"][0]["schema"]
    stamped = after["metadata"]["annotations"][VERSION_ANNOTATION]
    from importlib.metadata import version
    assert stamped == version("derived-views")


def test_a_newer_operators_crd_is_left_alone(stack: Any, kube_api_client: Any,
                                             old_crd: Any) -> None:
    newer = copy.deepcopy(old_crd)
    newer["metadata"]["annotations"] = {VERSION_ANNOTATION: "999.0.0"}
    replace_with(kube_api_client, newer)
    proc = run_hook(stack)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "newer than this one" in proc.stdout, proc.stdout
    after = live(kube_api_client)
    assert "Message" not in columns(after)
    assert after["metadata"]["annotations"][VERSION_ANNOTATION] == "999.0.0"


def test_dry_run_changes_nothing(stack: Any, kube_api_client: Any, old_crd: Any) -> None:
    proc = run_hook(stack, "--dry-run")
    assert proc.returncode == 0 and "applying" in proc.stdout, proc.stdout + proc.stderr
    assert "Message" not in columns(live(kube_api_client))
