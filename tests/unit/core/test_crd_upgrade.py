"""The CRD upgrade hook's decision: apply forward, never downgrade, never orphan stored objects."""

from __future__ import annotations

from typing import Any

import pytest

from derived_views.core.crd_upgrade import VERSION_ANNOTATION, decide, version_key, with_version


def crd(served: tuple[str, ...] = ("v1alpha1",), annotation: str | None = None,
        stored: tuple[str, ...] = ("v1alpha1",)) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "derivedviews.derivedviews.io"}
    if annotation is not None:
        meta["annotations"] = {VERSION_ANNOTATION: annotation, "other": "kept"}
    return {"metadata": meta,
            "spec": {"versions": [{"name": v, "served": True} for v in served]},
            "status": {"storedVersions": list(stored)}}


@pytest.mark.parametrize(("text", "key"), [
    ("0.1.0", (0, 1, 0)), ("v1.10.2", (1, 10, 2)), ("2.0.0-rc.1", (2, 0, 0)),
    ("1.2+build.5", (1, 2)), ("latest", None), ("", None)])
def test_version_key(text: str, key: tuple[int, ...] | None) -> None:
    assert version_key(text) == key


def test_a_missing_crd_is_created() -> None:
    assert decide(None, crd(), "0.2.0").action == "create"


@pytest.mark.parametrize("live_version", [None, "0.1.0", "0.1.9", "0.2.0"])
def test_same_or_older_or_unversioned_is_applied(live_version: str | None) -> None:
    decision = decide(crd(annotation=live_version), crd(), "0.2.0")
    assert decision.action == "apply"
    assert (live_version or "without a version") in decision.reason


def test_numeric_not_lexical_order() -> None:
    """0.10.0 is newer than 0.9.0: a string comparison would downgrade it."""
    assert decide(crd(annotation="0.10.0"), crd(), "0.9.0").action == "skip"
    assert decide(crd(annotation="0.9.0"), crd(), "0.10.0").action == "apply"


def test_a_newer_operators_crd_is_left_alone() -> None:
    decision = decide(crd(annotation="1.0.0"), crd(), "0.2.0")
    assert decision.action == "skip" and "1.0.0" in decision.reason


def test_dropping_a_version_objects_are_stored_in_is_refused() -> None:
    live = crd(served=("v1alpha1", "v1beta1"), stored=("v1alpha1", "v1beta1"))
    decision = decide(live, crd(served=("v1beta1",)), "0.3.0")
    assert decision.action == "refuse"
    assert "v1alpha1" in decision.reason and "storedVersions" in decision.reason


def test_an_unversioned_operator_refuses() -> None:
    assert decide(crd(), crd(), "dev").action == "refuse"


def test_stamp_keeps_other_annotations() -> None:
    stamped = with_version(crd(annotation="0.1.0"), "0.2.0")
    assert stamped["metadata"]["annotations"] == {VERSION_ANNOTATION: "0.2.0", "other": "kept"}
