"""Merge patches: hand-written cases, and a round trip property."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from derived_views.core.patch import apply_merge_patch, merge_patch


def test_changed_added_and_removed_keys() -> None:
    old = {"phase": "Backfilling", "candidate": {"revision": "a", "lag": {"messages": 5,
                                                                          "partitions": {"t/0": 5}}},
           "revisions": [1, 2]}
    new = {"phase": "Active", "active": {"revision": "a"}, "revisions": [1, 2]}
    assert merge_patch(old, new) == {"phase": "Active", "active": {"revision": "a"},
                                     "candidate": None}


def test_nested_objects_are_diffed_and_lists_replaced() -> None:
    old = {"lag": {"messages": 5, "partitions": {"t/0": 3, "t/1": 2}}, "l": [1, 2]}
    new = {"lag": {"messages": 3, "partitions": {"t/0": 3}}, "l": [1]}
    assert merge_patch(old, new) == {"lag": {"messages": 3, "partitions": {"t/1": None}},
                                     "l": [1]}


def test_equal_documents_need_no_patch() -> None:
    assert merge_patch({"a": {"b": 1}}, {"a": {"b": 1}}) == {}


def test_a_null_for_a_key_absent_on_both_sides_needs_no_patch() -> None:
    assert merge_patch({"a": 1}, {"a": 1, "gone": None}) == {}


def test_a_container_state_is_replaced_key_by_key() -> None:
    """The stand-in kubelet's status writes: one state key goes, another comes."""
    old = {"state": {"waiting": {"reason": "X"}}, "conditions": [{"a": 1}], "keep": 1}
    new = {"state": {"running": {"startedAt": "T"}}, "conditions": [{"a": 1}, {"b": 2}],
           "keep": 1}
    assert merge_patch(old, new) == {"state": {"waiting": None, "running": {"startedAt": "T"}},
                                     "conditions": [{"a": 1}, {"b": 2}]}


def rfc7386_apply(target: Any, patch: Any) -> Any:
    """RFC 7386 section 2, as written there (independent of apply_merge_patch)."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = rfc7386_apply(result.get(key), value)
    return result


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(st.text(max_size=2), children, max_size=3),
    max_leaves=10)
documents = st.dictionaries(st.text(max_size=2), json_values, max_size=4)


def strip_nulls(value: Any) -> Any:
    """Merge patches cannot store nulls in objects: compare documents without them."""
    if isinstance(value, dict):
        return {k: strip_nulls(v) for k, v in value.items() if v is not None}
    return value


@given(documents, documents)
def test_applying_the_patch_gives_the_new_document(old: dict[str, Any],
                                                   new: dict[str, Any]) -> None:
    old, new = strip_nulls(old), strip_nulls(new)
    assert apply_merge_patch(old, merge_patch(old, new)) == new
    assert rfc7386_apply(old, merge_patch(old, new)) == new
