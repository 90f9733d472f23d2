"""`dvstack test` runs the suite in phases: side by side where tests allow it, then alone.

Most tests own what they touch (a namespace, a topic, a table, an operator that watches
only their namespaces), so they run in parallel workers (pytest-xdist, a whole file per
worker, the longest files first: `tests/conftest.py` orders them from the last run's
times). Then the tests marked `all_namespaces` (an operator over all namespaces, or the CRD
replaced: they would touch any other test's views) run one at a time, beside the tests that
use the stack's services but no Kubernetes object (`services_only`): on 2 cores the
parallel phase is CPU-bound, and this moves some of its work to where one test ran alone.
Last, a file or test marked `exclusive` needs the stack to itself: it restarts a component
every test uses, or needs the machine quiet. Those run one at a time, the fault suite's
last (`tests/conftest.py`), so that what a restart leaves behind (clients of the API server
reconnecting, a broker electing leaders) meets no other test. The unit tests (which never
touch the stack) run beside them in a pytest of their own. The phases' time tables are
merged into the one `results/test_times.json`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

PHASE_ENV = "DV_TEST_PHASE"
"""Set by `dvstack test` for each pytest it runs: one of PHASES."""
PHASES = ("shared", "exclusive", "unit", "all_namespaces", "services_only")
WORKERS_ENV = "DV_TEST_WORKERS"
DEFAULT_WORKERS = 3
"""On 2 cores: most e2e time is waiting on the log, the operator and Spark's batches."""
NO_TESTS = 5
"""pytest's exit status when nothing was collected (or all was deselected)."""
FILE_SECONDS = "file_seconds.json"
"""Each file's seconds in the last run that ran it (results/): how the next run orders files."""
_OWN_DISTRIBUTION = ("-n", "--numprocesses", "--dist", "-p")


def phases(pytest_args: Sequence[str], workers: int) -> list[list[tuple[str, list[str]]]]:
    """The pytest runs as steps, one after the other; the runs of a step at the same time,
    each as (phase, arguments). One plain run when parallelism is off or the caller chose
    its own (`-n`, `--dist`, `-p no:xdist`)."""
    args = list(pytest_args)
    if workers <= 1 or any(a.split("=", 1)[0] in _OWN_DISTRIBUTION for a in args):
        return [[("", args)]]
    return [[("shared", ["-n", str(workers), "--dist", "loadfile", "--no-loadscope-reorder",
                         *args])],
            [("all_namespaces", args), ("services_only", args)],
            [("exclusive", args), ("unit", args)]]


def in_phase(phase: str, *, exclusive: bool, all_namespaces: bool, unit: bool,
             services_only: bool) -> bool:
    """Whether a test runs in `phase` ("" is the plain run: every test). The markers
    (`exclusive`, then `all_namespaces`) decide before the folders (`unit`, `services_only`)."""
    if not phase:
        return True
    if exclusive:
        home = "exclusive"
    elif all_namespaces:
        home = "all_namespaces"
    elif unit:
        home = "unit"
    elif services_only:
        home = "services_only"
    else:
        home = "shared"
    return phase == home


def exit_status(statuses: Sequence[int]) -> int:
    """The suite's status: the first failure; a phase with nothing to run is no failure
    unless no phase ran anything."""
    ran = [s for s in statuses if s != NO_TESTS]
    if not ran:
        return NO_TESTS
    return next((s for s in ran if s != 0), 0)


def timing_file(results: Path, phase: str) -> Path:
    return results / (f"test_times-{phase}.json" if phase else "test_times.json")


def merge_timings(tables: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The phases' time tables as one: the wall is the steps' (each step as long as its
    longest run), files are distinct, a fixture set up in two phases counts both setups."""
    files = sorted((row for t in tables for row in t.get("files", [])),
                   key=lambda row: -row["seconds"])
    fixtures: dict[str, dict[str, float]] = {}
    for table in tables:
        for row in table.get("fixtures", []):
            merged = fixtures.setdefault(row["name"], {"seconds": 0.0, "setups": 0.0})
            merged["seconds"] = round(merged["seconds"] + row["seconds"], 2)
            merged["setups"] += row.get("setups", 0)
    steps: dict[int, float] = {}
    for table in tables:
        step = int(table.get("step", 0))
        steps[step] = max(steps.get(step, 0.0), table.get("wall_seconds", 0.0))
    return {"wall_seconds": round(sum(steps.values()), 1),
            "phases": {t.get("phase", ""): t.get("wall_seconds", 0.0) for t in tables},
            "files": files,
            "fixtures": [{"name": name, **row} for name, row in
                         sorted(fixtures.items(), key=lambda item: -item[1]["seconds"])]}


def clear_timings(results: Path, steps: Sequence[Sequence[str]]) -> None:
    """Remove the phases' tables of an earlier run, so a phase that selects nothing this time
    (a run of a few files) does not lend its old seconds to this run's summary."""
    for phases_of_step in steps:
        for phase in phases_of_step:
            timing_file(results, phase).unlink(missing_ok=True)


def write_merged(results: Path, steps: Sequence[Sequence[str]]) -> dict[str, Any] | None:
    """Merge what the phases of these steps wrote into `test_times.json`; None when no
    phase wrote anything."""
    tables = []
    for step, phases_of_step in enumerate(steps):
        for phase in phases_of_step:
            path = timing_file(results, phase)
            if path.is_file():
                tables.append({"phase": phase, "step": step, **json.loads(path.read_text())})
    if not tables:
        return None
    merged = merge_timings(tables)
    timing_file(results, "").write_text(json.dumps(merged, indent=2))
    return merged
