"""Where benchmarks and tests leave their figures: `<state dir>/results/<name>.json`, which
benchmarks/report.py and the closing notes read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dvstack.settings import Settings


def save(settings: Settings, name: str, doc: Any) -> Path:
    """`name` as a benchmark's --save-as gives it: a name ending in .json gets no second."""
    out = settings.state_dir / "results" / f"{name.removesuffix('.json')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2))
    return out
