"""The functional core stays functional: no I/O libraries, no clock reads.

Static checks over the source of derived_views.api and .core, subpackages
included (core.planner), so a stray import fails here rather than in review.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from support.paths import REPO

PACKAGE = REPO / "operator" / "derived_views"
SOURCES = sorted(p for folder in ("api", "core") for p in (PACKAGE / folder).rglob("*.py"))

FORBIDDEN_IMPORTS = {"kubernetes", "kopf", "confluent_kafka", "psycopg", "socket", "subprocess",
                     "requests", "urllib", "http", "time", "random", "os", "uuid"}
CLOCK_CALLS = {"now", "utcnow", "today", "time", "monotonic", "perf_counter", "time_ns"}
# Modules allowed one narrow kind of I/O: the CRD generator's CLI writes its output; the
# renderer's load_template reads the template once, for the shell.
IO_ALLOWED = {"crd.py": {"write_text"}, "sparkapplication.py": {"read_text"}}


def imported_roots(tree: ast.AST) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_there_are_sources_to_check() -> None:
    assert len(SOURCES) >= 15
    assert PACKAGE / "core" / "planner" / "pipeline.py" in SOURCES  # subpackages are walked


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_no_io_libraries(path: Path) -> None:
    assert imported_roots(ast.parse(path.read_text())) & FORBIDDEN_IMPORTS == set()


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_no_clock_reads_and_no_file_access(path: Path) -> None:
    tree = ast.parse(path.read_text())
    allowed = IO_ALLOWED.get(path.name, set())
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            assert node.func.attr not in CLOCK_CALLS, f"{path.name}:{node.lineno} reads a clock"
            if node.func.attr in {"read_text", "write_text", "read_bytes", "write_bytes"}:
                assert node.func.attr in allowed, f"{path.name}:{node.lineno} touches a file"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            assert node.func.id != "open", f"{path.name}:{node.lineno} opens a file"
