"""dvstack.testing.results: where a benchmark's figures land."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from dvstack.settings import Settings
from dvstack.testing import results


def test_a_name_lands_in_the_results_directory_with_one_json_suffix(tmp_path: Path) -> None:
    settings = cast(Settings, SimpleNamespace(state_dir=tmp_path))
    doc: dict[str, Any] = {"cores": 0.1}
    assert results.save(settings, "steady_cost", doc) == tmp_path / "results/steady_cost.json"
    assert results.save(settings, "long.json", doc) == tmp_path / "results/long.json"
    elsewhere = tmp_path / "elsewhere" / "run.json"
    elsewhere.parent.mkdir()
    assert results.save(settings, str(elsewhere), doc) == elsewhere
    assert json.loads(elsewhere.read_text()) == doc
