"""Every reason the operator writes comes from core.reasons: no module spells one inline.

Tools match on reasons, so a second spelling (`TopicsMissing` beside `TopicMissing`) is a
bug a reader cannot see; this walks the operator's syntax trees for the places a reason is
given (a Verdict's reason, a record's `reason=`, an Event's reason, a refused switch's
reason) and fails on a string literal there.
"""

from __future__ import annotations

import ast
from pathlib import Path

from derived_views.core import reasons

PACKAGE = Path(reasons.__file__).resolve().parents[1]
_GIVEN_FIRST = {"event", "on_change", "SwitchRefused", "SwitchBlocker"}
"""Calls whose reason is an argument at a fixed place (on_change's is its fourth)."""


def _cli_outcome(first: ast.expr) -> bool:
    """The CLI's progress Verdict (an Outcome and a line for people) is not a condition."""
    return (isinstance(first, ast.Attribute) and isinstance(first.value, ast.Name)
            and first.value.id == "Outcome")


def _reason_literals(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = (node.func.attr if isinstance(node.func, ast.Attribute)
                else node.func.id if isinstance(node.func, ast.Name) else "")
        given: list[ast.expr] = [k.value for k in node.keywords if k.arg == "reason"]
        if name == "Verdict" and len(node.args) >= 2 and not _cli_outcome(node.args[0]):
            given.append(node.args[1])
        elif name == "on_change" and len(node.args) >= 4:
            given.append(node.args[3])
        elif name in _GIVEN_FIRST - {"on_change"} and node.args:
            given.append(node.args[0])
        found += [(node.lineno, arg.value) for arg in given
                  if isinstance(arg, ast.Constant) and isinstance(arg.value, str)]
    return found


def test_no_module_spells_a_reason_inline() -> None:
    inline = [f"{path.relative_to(PACKAGE.parent)}:{line}: {value!r}"
              for path in sorted(PACKAGE.rglob("*.py"))
              for line, value in _reason_literals(ast.parse(path.read_text()))]
    assert inline == [], "give these reasons from derived_views.core.reasons:\n" + "\n".join(
        inline)


def test_the_walk_finds_an_inline_reason() -> None:
    """The check above can fail: each place a reason is given is recognised."""
    source = ('Verdict("True", "Oops", "m")\ndraft.set(r, reason="Oops")\n'
              'draft.event("Oops", "m")\non_change(d, a, b, "Oops", "m")\n'
              'raise SwitchRefused("Oops", "m")\n')
    assert [value for _, value in _reason_literals(ast.parse(source))] == ["Oops"] * 5


def test_each_reason_has_one_name() -> None:
    values = [v for k, v in vars(reasons).items() if k.isupper() and isinstance(v, str)]
    assert len(values) == len(set(values)) > 40
    assert all(v.isidentifier() and v[0].isupper() for v in values)
