"""No import circles among the operator's modules or the job's, counting imports made inside
functions.

import-linter's layers contract (pyproject.toml) orders the packages; this test also covers
modules inside one package, where a circle (a contract imported by the sessions whose
registry imports them) is what the layers do not see.
"""

from __future__ import annotations

import grimp
import pytest


def _circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_circles_are_found() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


@pytest.mark.parametrize("package", ["derived_views", "dvjob"])
def test_no_import_circles(package: str) -> None:
    """The operator's package and the job's (spark_templates/dvjob, on the tests' path)."""
    graph = grimp.build_graph(package)
    modules = {m for m in graph.modules if m.startswith(package)}
    edges = {m: {i for i in graph.find_modules_directly_imported_by(m) if i in modules}
             for m in modules}
    assert _circles(edges) == []
