"""The chart carries identical copies of the generated CRDs, plus Kopf's peering CRDs.

crds/*.yaml at the repository root is generated (python -m derived_views.resource.crd);
`stack/sync-chart-crds.sh` copies it into charts/derived-views/crds/.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from dvstack.chart import CHART
from dvstack.settings import REPO_ROOT

ROOT_CRDS = REPO_ROOT / "crds"
CHART_CRDS = CHART / "crds"
KOPF_PEERING_CRDS = {
    "kopf.dev_clusterkopfpeerings.yaml": ("clusterkopfpeerings.kopf.dev", "ClusterKopfPeering",
                                          "Cluster"),
    "kopf.dev_kopfpeerings.yaml": ("kopfpeerings.kopf.dev", "KopfPeering", "Namespaced"),
}
FIX = "run stack/sync-chart-crds.sh"


def load(path: Path) -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    assert len(docs) == 1, f"{path.name}: expected one document, got {len(docs)}"
    doc: dict[str, Any] = docs[0]
    return doc


def root_crds() -> list[Path]:
    return sorted(ROOT_CRDS.glob("*.yaml"))


def test_every_generated_crd_is_copied_identically_into_the_chart() -> None:
    generated = root_crds()
    if not generated:
        pytest.skip("crds/ has no *.yaml yet: no generated CRD to compare (the Kopf peering "
                    "CRDs are checked separately)")
    problems: list[str] = []
    for src in generated:
        copy = CHART_CRDS / src.name
        if not copy.is_file():
            problems.append(f"charts/derived-views/crds/{src.name} is missing")
        elif copy.read_bytes() != src.read_bytes():
            problems.append(f"charts/derived-views/crds/{src.name} differs from crds/{src.name}")
    assert not problems, "; ".join(problems) + f": {FIX}"


def test_chart_has_no_stale_crds() -> None:
    """Every CRD in the chart is a generated one or one of Kopf's: renamed CRDs leave no copy."""
    expected = {p.name for p in root_crds()} | set(KOPF_PEERING_CRDS)
    present = {p.name for p in CHART_CRDS.glob("*")}
    assert present <= expected, f"unexpected files in the chart's crds/: {present - expected}"


def test_chart_carries_the_derived_view_crd() -> None:
    crds = {load(p)["metadata"]["name"] for p in CHART_CRDS.glob("*.yaml")}
    if not root_crds():
        pytest.skip("crds/ has no generated CRD yet")
    assert "derivedviews.derivedviews.io" in crds, f"chart CRDs: {sorted(crds)}; {FIX}"


@pytest.mark.parametrize("filename", sorted(KOPF_PEERING_CRDS))
def test_kopf_peering_crds_are_in_the_chart(filename: str) -> None:
    name, kind, scope = KOPF_PEERING_CRDS[filename]
    path = CHART_CRDS / filename
    assert path.is_file(), f"the chart must install Kopf's peering CRD {name} ({filename})"
    crd = load(path)
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["kind"] == "CustomResourceDefinition"
    assert crd["metadata"]["name"] == name
    spec = crd["spec"]
    assert spec["group"] == "kopf.dev"
    assert spec["scope"] == scope
    assert spec["names"]["kind"] == kind
    assert f"{spec['names']['plural']}.{spec['group']}" == name
    versions = {v["name"]: v for v in spec["versions"]}
    assert versions["v1"]["served"] and versions["v1"]["storage"]
    # Kopf writes its keep-alives as arbitrary keys under .status, via the main resource.
    status = versions["v1"]["schema"]["openAPIV3Schema"]["properties"]["status"]
    assert status.get("x-kubernetes-preserve-unknown-fields") is True
    assert "status" not in versions["v1"].get("subresources", {})
