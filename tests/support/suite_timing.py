"""Where the suite's time goes: seconds per test file and per fixture, written at the end.

CI allows 90 minutes, and the next issues each add end-to-end tests, so the slow parts
must be named before they are cut. Each run writes `<state dir>/results/test_times.json`
(`test_times-<phase>.json` for the phases of `dvstack test`, which merges them) and prints
the slowest files and fixtures in pytest's summary; under pytest-xdist the workers hand
their fixtures' times to the controller. A fixture's time is its
own setup (the stack start, a Spark job, an operator), counted once per setup; a file's
time is the setup, call and teardown of its tests, so a session fixture's setup counts
in the file whose test needed it first.
"""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from support.results import FILE_SECONDS, PHASE_ENV, results_dir, timing_name

SHOWN = 15
"""Rows of each table printed in the summary (the JSON holds them all; fixtures under 0.1 s,
such as parametrize's, are not printed)."""

_files: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
_fixtures: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
_started = time.monotonic()


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef: Any, request: pytest.FixtureRequest
                         ) -> Generator[None, Any, None]:
    began = time.monotonic()
    yield
    row = _fixtures[f"{fixturedef.argname} ({fixturedef.scope})"]
    row["seconds"] += time.monotonic() - began
    row["setups"] += 1


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    row = _files[report.nodeid.split("::", 1)[0]]
    row[report.when] += report.duration
    row["seconds"] += report.duration
    if report.when == "call":
        row["tests"] += 1


def _table(rows: dict[str, dict[str, float]]) -> list[dict[str, Any]]:
    ordered = sorted(rows.items(), key=lambda item: -item[1]["seconds"])
    return [{"name": name, **{k: round(v, 2) for k, v in row.items()}} for name, row in ordered]


def pytest_sessionfinish(session: pytest.Session) -> None:
    """A pytest-xdist worker hands its fixtures' times to the controller, which reports."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["dv_fixtures"] = json.dumps(_fixtures)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    for name, row in json.loads(getattr(node, "workeroutput", {}).get("dv_fixtures", "{}")).items():
        for key, value in row.items():
            _fixtures[name][key] += value


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _files:
        return
    files, fixtures = _table(_files), _table(_fixtures)
    wall = time.monotonic() - _started
    results = results_dir()
    path = results / timing_name(os.environ.get(PHASE_ENV, ""))
    path.write_text(json.dumps(
        {"wall_seconds": round(wall, 1), "files": files, "fixtures": fixtures}, indent=2))
    _remember_file_seconds(results / FILE_SECONDS, files)
    write = terminalreporter.write_line
    terminalreporter.section("where the time went")
    write(f"pytest wall time {wall:.0f} s; all rows in {Path('results') / path.name} "
          "under the stack's state directory")
    write(f"{'seconds':>8} {'tests':>5}  file (setup + call + teardown)")
    for row in files[:SHOWN]:
        write(f"{row['seconds']:8.1f} {int(row.get('tests', 0)):5d}  {row['name']}")
    write(f"{'seconds':>8} {'setups':>6}  fixture (its own setup)")
    for row in [f for f in fixtures if f["seconds"] >= 0.1][:SHOWN]:
        write(f"{row['seconds']:8.1f} {int(row['setups']):6d}  {row['name']}")


def _remember_file_seconds(path: Path, files: list[dict[str, Any]]) -> None:
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        known = {}
    known.update({row["name"]: row["seconds"] for row in files})
    partial = path.with_name(f"{path.name}.{os.getpid()}")  # two phases may end together
    partial.write_text(json.dumps(known, indent=1, sort_keys=True))
    partial.replace(path)
