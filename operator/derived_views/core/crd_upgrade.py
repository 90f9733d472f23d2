"""Whether to apply this operator's DerivedView CRD over the one in the cluster.

Helm installs a chart's `crds/` once and never upgrades it, so a new operator would
run against an old schema (missing fields pruned from every view it writes, old
printer columns). The chart's pre-upgrade hook applies the CRD this operator was
built with; two rules keep that safe where several releases share one cluster:
an older operator never downgrades a newer CRD, and a CRD that would stop
serving a version objects are still stored in is refused (it would make them
unreadable).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

VERSION_ANNOTATION = "derivedviews.io/operator-version"

CrdStep = Literal["create", "apply", "skip", "refuse"]


@dataclass(frozen=True)
class CrdDecision:
    action: CrdStep
    reason: str


def version_key(version: str) -> tuple[int, ...] | None:
    """`1.2.3` (a pre-release or build suffix is ignored) -> (1, 2, 3); None if not a version."""
    match = re.fullmatch(r"v?(\d+(?:\.\d+)*)(?:[-+].*)?", version.strip())
    return tuple(int(p) for p in match.group(1).split(".")) if match else None


def with_version(crd: dict[str, Any], operator_version: str) -> dict[str, Any]:
    """The CRD stamped with the operator version that applies it."""
    metadata = dict(crd.get("metadata", {}))
    metadata["annotations"] = {**metadata.get("annotations", {}),
                               VERSION_ANNOTATION: operator_version}
    return {**crd, "metadata": metadata}


def decide(live: dict[str, Any] | None, ours: dict[str, Any], operator_version: str) -> CrdDecision:
    name = ours["metadata"]["name"]
    if live is None:
        return CrdDecision("create", f"{name} does not exist: creating it")
    served = {v["name"] for v in ours["spec"]["versions"] if v.get("served")}
    stored = set(live.get("status", {}).get("storedVersions", []))
    if stored - served:
        return CrdDecision("refuse", (
            f"{name}: objects are stored as {sorted(stored - served)}, which this CRD would no "
            f"longer serve; migrate them to {sorted(served)} first (read and write every "
            f"DerivedView, then drop the version from status.storedVersions)"))
    theirs_raw = live.get("metadata", {}).get("annotations", {}).get(VERSION_ANNOTATION)
    mine, theirs = version_key(operator_version), version_key(theirs_raw or "")
    if mine is None:
        return CrdDecision("refuse", f"operator version {operator_version!r} is not a version")
    if theirs is not None and theirs > mine:
        return CrdDecision("skip", (
            f"{name} was applied by operator {theirs_raw}, newer than this one "
            f"({operator_version}): left as it is"))
    before = f"operator {theirs_raw}" if theirs_raw else "a copy without a version (crds/)"
    return CrdDecision("apply", f"{name}: applying operator {operator_version}'s CRD over {before}")
