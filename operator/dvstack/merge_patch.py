"""The RFC 7386 JSON merge patch that turns one JSON object into another.

The stand-in writes statuses as merge patches (no resourceVersion races with
whoever edits the object's metadata); a patch needs nulls for removed keys and
whole lists, which this computes.
"""

from __future__ import annotations

from typing import Any


def diff(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The patch P with merge(old, P) == new, a null in `new` meaning "absent"; {} if equal."""
    patch: dict[str, Any] = {}
    for key in old.keys() - new.keys():
        patch[key] = None
    for key, value in new.items():
        if value is None and old.get(key) is None:
            continue  # absent and null read the same
        before = old.get(key)
        if isinstance(value, dict) and isinstance(before, dict):
            inner = diff(before, value)
            if inner:
                patch[key] = inner
        elif key not in old or before != value:
            patch[key] = value
    return patch
