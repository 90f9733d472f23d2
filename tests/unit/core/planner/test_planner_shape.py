"""The planner stays readable: small modules, and every case names its phases."""

from __future__ import annotations

from derived_views.core.planner import pipeline
from support.paths import REPO

PLANNER = REPO / "operator" / "derived_views" / "core" / "planner"
MAX_LINES = 300


def test_no_planner_module_is_over_300_lines() -> None:
    sizes = {p.name: len(p.read_text().splitlines()) for p in PLANNER.glob("*.py")}
    assert sizes and {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


def test_every_case_names_its_phases() -> None:
    assert set(pipeline.PHASES) == set(pipeline.Case)

