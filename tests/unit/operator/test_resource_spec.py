"""Spec validation and the committed CRD."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from tests_support_spec import BASE  # type: ignore[import-not-found]

from derived_views.resource import crd
from derived_views.resource.spec import DerivedViewSpec

REPO = Path(__file__).resolve().parents[3]


def test_committed_crd_matches_the_models() -> None:
    committed = (REPO / "crds" / "derivedviews.io_derivedviews.yaml").read_text()
    assert committed == crd.render(), (
        "crds/ is stale: run `python -m derived_views.resource.crd > crds/derivedviews.io_derivedviews.yaml`")


def test_every_spec_property_has_a_description() -> None:
    schema = crd.crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    undocumented: list[str] = []

    def walk(node: dict[str, Any], path: str) -> None:
        for name, prop in (node.get("properties") or {}).items():
            if not prop.get("description"):
                undocumented.append(f"{path}.{name}")
            walk(prop, f"{path}.{name}")
            if isinstance(prop.get("items"), dict):
                walk(prop["items"], f"{path}.{name}[]")

    walk(schema, "spec")
    assert undocumented == []


def test_defaults_fill_in() -> None:
    spec = DerivedViewSpec.model_validate(BASE)
    assert spec.cutover.maxLagMessages == 0
    assert spec.cutover.mode.value == "auto"
    assert spec.deletionPolicy.value == "Retain"
    assert spec.sink.postgres.schema_ == "public"


@pytest.mark.parametrize(("path", "value", "message"), [
    (("transform",), {"sql": "x", "python": {"function": "m:f"}}, "exactly one of transform.sql"),
    (("transform",), {}, "exactly one of transform.sql"),
    (("cutover",), {"stableForSeconds": 10, "deadlineSeconds": 5}, "stableForSeconds must be less"),
    (("sink", "primaryKey"), [], "at least 1 item"),
    (("source", "topics"), ["bad topic"], "String should match pattern"),
    (("sink", "postgres", "table"), "Orders", "String should match pattern"),
    (("source", "unknownField"), 1, "Extra inputs are not permitted"),
])
def test_bad_specs_are_rejected(path: tuple[str, ...], value: Any, message: str) -> None:
    body = copy.deepcopy(BASE)
    node = body
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(ValidationError, match=message):
        DerivedViewSpec.model_validate(body)
