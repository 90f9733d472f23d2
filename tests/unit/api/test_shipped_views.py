"""Every DerivedView the repository shows a user (docs, tutorial) is a valid spec."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from derived_views.api.spec import DerivedViewSpec
from support.paths import REPO

ROOT = REPO
VIEWS = sorted(p for p in (ROOT / "docs").rglob("*.yaml")
               if any(d.get("kind") == "DerivedView"
                      for d in yaml.safe_load_all(p.read_text()) if isinstance(d, dict)))


def test_the_tutorial_shows_both_sinks() -> None:
    names = {p.name for p in VIEWS}
    assert {"orders-by-customer.yaml", "orders-by-customer-search.yaml"} <= names


@pytest.mark.parametrize("path", VIEWS, ids=lambda p: p.name)
def test_shipped_view_is_valid(path: Path) -> None:
    for doc in yaml.safe_load_all(path.read_text()):
        if isinstance(doc, dict) and doc.get("kind") == "DerivedView":
            DerivedViewSpec.model_validate(doc["spec"])
