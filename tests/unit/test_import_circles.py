"""No import circles among the operator's modules or the job's, counting imports made inside
functions.

import-linter's layers contract (pyproject.toml) orders the packages; this test also covers
modules inside one package, where a circle (a contract imported by the sessions whose
registry imports them) is what the layers do not see.
"""

from __future__ import annotations

import grimp
import pytest

from support.house import cycles


def test_circles_are_found() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


@pytest.mark.parametrize("package", ["derived_views", "dvjob"])
def test_no_importcycles(package: str) -> None:
    """The operator's package and the job's (spark_templates/dvjob, on the tests' path)."""
    graph = grimp.build_graph(package)
    modules = {m for m in graph.modules if m.startswith(package)}
    edges = {m: {i for i in graph.find_modules_directly_imported_by(m) if i in modules}
             for m in modules}
    assert cycles(edges) == []
