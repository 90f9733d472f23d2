"""Where tests leave their figures: `<state dir>/results/<name>.json`, beside the stack's
(the state dir is DV_STATE_DIR, else the checkout's `.stack`, as dvstack.settings has it),
without importing the stack: unit tests never do."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
PHASE_ENV = "DV_TEST_PHASE"
"""Set by `dvstack test` for each pytest it runs (the stack's names, held equal to these by
tests/stack/test_test_phases.py)."""
FILE_SECONDS = "file_seconds.json"
"""Each file's seconds in the last run that ran it: how the next run orders files."""


def timing_name(phase: str) -> str:
    """The time table of a phase's pytest (`dvstack test` merges them)."""
    return f"test_times-{phase}.json" if phase else "test_times.json"


def results_dir() -> Path:
    where = Path(os.environ.get("DV_STATE_DIR") or REPO / ".stack") / "results"
    where.mkdir(parents=True, exist_ok=True)
    return where


def write_result(name: str, data: Any) -> Path:
    """`<results>/<name>.json`, indented."""
    path = results_dir() / f"{name}.json"
    path.write_text(json.dumps(data, indent=2, default=str))
    return path
