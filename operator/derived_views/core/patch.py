"""JSON merge patches (RFC 7386) between two status documents.

Kopf and the API server apply status changes as merge patches, where a
missing key means "leave as is": a field that must disappear (a candidate
that was promoted, a lag partition that went away) needs an explicit null.
"""

from __future__ import annotations

from collections.abc import Mapping
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
