"""JSON merge patches (RFC 7386) between two status documents, and the changed leaves of
two documents as people read them.

Kopf and the API server apply status changes as merge patches, where a
missing key means "leave as is": a field that must disappear (a candidate
that was promoted, a lag partition that went away) needs an explicit null.

`spec_diff` says what changes between two spec documents, one line per changed leaf: what
`dv rollback` prints before it patches, and what `dv plan` shows before an apply.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


def merge_patch(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """The patch that turns `old` into `new`: changed keys, nulls for removed ones.

    Objects are diffed key by key; lists and scalars are replaced whole. A null in `new`
    means absent, so a key absent (or null) on both sides needs no entry.
    """
    patch: dict[str, Any] = {}
    for key, value in new.items():
        if value is None and old.get(key) is None:
            continue
        if key not in old:
            patch[key] = value
        elif isinstance(value, Mapping) and isinstance(old[key], Mapping):
            nested = merge_patch(old[key], value)
            if nested:
                patch[key] = nested
        elif old[key] != value:
            patch[key] = value
    for key in old:
        if key not in new:
            patch[key] = None
    return patch


def apply_merge_patch(target: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """What the API server does with a merge patch (for tests and simulations)."""
    result = dict(target)
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, Mapping):
            current = result.get(key)
            result[key] = apply_merge_patch(current if isinstance(current, Mapping) else {}, value)
        else:
            result[key] = value
    return result


@dataclass(frozen=True)
class LeafChange:
    """One changed leaf: its dotted path and its value before and after, as text (None:
    absent on that side)."""

    path: str
    before: str | None
    after: str | None


def changed_leaves(before: Mapping[str, Any], after: Mapping[str, Any],
                   prefix: str = "spec") -> list[LeafChange]:
    """The leaves that differ between two documents, sorted by path."""
    old, new = _leaves(before, prefix), _leaves(after, prefix)
    return [LeafChange(path, old.get(path), new.get(path))
            for path in sorted(set(old) | set(new)) if old.get(path) != new.get(path)]


def spec_diff(before: Mapping[str, Any], after: Mapping[str, Any],
              prefix: str = "spec") -> list[str]:
    """Changed leaves as `- path: old` / `+ path: new` lines, sorted by path."""
    lines = []
    for change in changed_leaves(before, after, prefix):
        if change.before is not None:
            lines.append(f"- {change.path}: {change.before}")
        if change.after is not None:
            lines.append(f"+ {change.path}: {change.after}")
    return lines


def _leaves(value: Any, prefix: str) -> dict[str, str]:
    """Mappings are walked; lists and scalars are leaves, shown as JSON-ish text."""
    if isinstance(value, Mapping):
        out: dict[str, str] = {}
        for key, child in value.items():
            out.update(_leaves(child, f"{prefix}.{key}"))
        return out
    return {prefix: _show(value)}


def _show(value: Any) -> str:
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    return str(value)
