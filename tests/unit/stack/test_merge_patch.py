"""The stand-in writes statuses as RFC 7386 merge patches (core.patch, the operator's own):
nulls for removed keys, lists whole."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from derived_views.core.patch import merge_patch as diff


def apply(target: Any, patch: Any) -> Any:
    """RFC 7386 section 2, as written there."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = apply(result.get(key), value)
    return result


def test_removed_keys_become_null_and_lists_are_replaced() -> None:
    old = {"state": {"waiting": {"reason": "X"}}, "conditions": [{"a": 1}], "keep": 1}
    new = {"state": {"running": {"startedAt": "T"}}, "conditions": [{"a": 1}, {"b": 2}],
           "keep": 1}
    assert diff(old, new) == {"state": {"waiting": None, "running": {"startedAt": "T"}},
                              "conditions": [{"a": 1}, {"b": 2}]}


def test_equal_objects_and_absent_nulls_need_no_patch() -> None:
    assert diff({"a": {"b": 1}}, {"a": {"b": 1}}) == {}
    assert diff({"a": 1}, {"a": 1, "gone": None}) == {}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner,
                                                                 max_size=3),
    max_leaves=10)
objects = st.dictionaries(st.text(max_size=2), json_values, max_size=4)


def without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    return value


@given(objects, objects)
def test_applying_the_diff_gives_the_new_object(old: dict[str, Any], new: dict[str, Any]) -> None:
    old, new = without_nulls(old), without_nulls(new)
    assert apply(old, diff(old, new)) == new
