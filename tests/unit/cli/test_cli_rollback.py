"""`dv rollback`: the target revision and the spec patch, against hand-written expectations."""

from __future__ import annotations

from typing import Any

import pytest

from derived_views.api.status import DerivedViewStatus, RevisionContent
from derived_views.cli.rollback import (
    RollbackError,
    guarded_patch,
    rollback_target,
    spec_patch,
)
from derived_views.core.patch import apply_merge_patch, spec_diff

SQL_CONTENT = {"topics": ["orders"], "format": "json", "schema": "id STRING, amount DOUBLE",
               "sql": "SELECT id, amount FROM events", "primaryKey": ["id"]}
PY_CONTENT = {"topics": ["orders", "refunds"], "format": "debezium", "schema": "id STRING",
              "pythonFunction": "views.orders:build", "pyFiles": ["s3://b/views.zip"],
              "primaryKey": ["id", "day"]}


def record(revision: str, phase: str, since: str, content: dict[str, Any] | None
           ) -> dict[str, Any]:
    out: dict[str, Any] = {
        "revision": revision, "index": f"orders__{revision}", "phase": phase,
        "since": since, "sparkApplication": f"orders-{revision}",
        "checkpointLocation": f"/ck/{revision}", "startedAt": since}
    if content is not None:
        out["content"] = content
    return out


def status(revisions: list[dict[str, Any]], last_from: str | None = None,
           spec_revision: str = "cccccccccc") -> DerivedViewStatus:
    fields: dict[str, Any] = {"revision": spec_revision, "revisions": revisions}
    if last_from is not None:
        fields["lastCutover"] = {"from": last_from, "to": spec_revision,
                                 "switchedAt": "2026-03-01T12:00:00Z"}
    return DerivedViewStatus.model_validate(fields)


CURRENT = record("cccccccccc", "Active", "2026-03-01T12:00:00Z", SQL_CONTENT)
OLDER = record("aaaaaaaaaa", "Retired", "2026-03-01T10:00:00Z", PY_CONTENT)
NEWER = record("bbbbbbbbbb", "Retiring", "2026-03-01T12:00:00Z", SQL_CONTENT)


def test_default_is_the_revision_the_last_cutover_came_from() -> None:
    target = rollback_target(status([CURRENT, OLDER, NEWER], last_from="aaaaaaaaaa"), None)
    assert target.revision == "aaaaaaaaaa"
    assert target.content.python_function == "views.orders:build"


def test_without_a_usable_cutover_record_the_latest_retained_revision() -> None:
    gone = record("dddddddddd", "Retired", "2026-03-01T11:00:00Z", None)
    s = status([CURRENT, OLDER, NEWER, gone], last_from="dddddddddd")
    assert rollback_target(s, None).revision == "bbbbbbbbbb"


def test_explicit_revision() -> None:
    assert rollback_target(status([CURRENT, OLDER, NEWER]), "aaaaaaaaaa").revision == \
        "aaaaaaaaaa"


@pytest.mark.parametrize(("revisions", "to", "message"), [
    ([CURRENT], None, "no retained revision has stored content to roll back to"),
    ([CURRENT, record("aaaaaaaaaa", "Retired", "2026-03-01T10:00:00Z", None)], None,
     "no retained revision has stored content to roll back to"),
    ([CURRENT, OLDER], "ffffffffff",
     "revision ffffffffff is not tracked by the view; revisions with content: aaaaaaaaaa"),
    ([CURRENT, record("aaaaaaaaaa", "Retired", "2026-03-01T10:00:00Z", None)], "aaaaaaaaaa",
     "revision aaaaaaaaaa has no stored content any more (phase Retired); no revision has "
     "stored content"),
    ([CURRENT, OLDER], "cccccccccc", "the spec already is revision cccccccccc"),
])
def test_clear_errors(revisions: list[dict[str, Any]], to: str | None, message: str) -> None:
    with pytest.raises(RollbackError) as raised:
        rollback_target(status(revisions), to)
    assert str(raised.value).startswith(message)


SPEC: dict[str, Any] = {
    "source": {"kafka": {"bootstrapServers": "k:9092"}, "topics": ["orders"], "format": "json",
               "schema": "id STRING, amount DOUBLE", "maxOffsetsPerTrigger": 1000},
    "transform": {"sql": "SELECT id, amount FROM events"},
    "sink": {"postgres": {"secretRef": {"name": "db"}, "table": "orders"},
             "primaryKey": ["id"]},
    "cutover": {"mode": "manual"},
}


def test_patch_from_sql_to_python_removes_the_sql() -> None:
    patch = spec_patch(SPEC, RevisionContent.model_validate(PY_CONTENT))
    assert patch == {
        "source": {"topics": ["orders", "refunds"], "format": "debezium", "schema": "id STRING"},
        "transform": {"python": {"function": "views.orders:build",
                                 "pyFiles": ["s3://b/views.zip"]}, "sql": None},
        "sink": {"primaryKey": ["id", "day"]},
    }
    after = apply_merge_patch(SPEC, patch)
    assert after["transform"] == {"python": {"function": "views.orders:build",
                                             "pyFiles": ["s3://b/views.zip"]}}
    assert after["source"]["kafka"] == {"bootstrapServers": "k:9092"}
    assert after["source"]["maxOffsetsPerTrigger"] == 1000
    assert after["cutover"] == {"mode": "manual"}
    assert SPEC["transform"] == {"sql": "SELECT id, amount FROM events"}  # input untouched


def test_patch_from_python_to_sql_removes_the_python() -> None:
    python_spec = apply_merge_patch(SPEC, {"transform": {"sql": None, "python": {
        "function": "m:f"}}})
    patch = spec_patch(python_spec, RevisionContent.model_validate(SQL_CONTENT))
    assert patch["transform"] == {"sql": "SELECT id, amount FROM events", "python": None}


def test_guarded_patch_carries_the_resource_version() -> None:
    assert guarded_patch({"sink": {"primaryKey": ["id"]}}, "4711") == {
        "metadata": {"resourceVersion": "4711"}, "spec": {"sink": {"primaryKey": ["id"]}}}


def test_spec_diff_lists_changed_leaves_only() -> None:
    after = apply_merge_patch(SPEC, spec_patch(SPEC, RevisionContent.model_validate(PY_CONTENT)))
    assert spec_diff(SPEC, after) == [
        "- spec.sink.primaryKey: ['id']",
        "+ spec.sink.primaryKey: ['id', 'day']",
        "- spec.source.format: 'json'",
        "+ spec.source.format: 'debezium'",
        "- spec.source.schema: 'id STRING, amount DOUBLE'",
        "+ spec.source.schema: 'id STRING'",
        "- spec.source.topics: ['orders']",
        "+ spec.source.topics: ['orders', 'refunds']",
        "+ spec.transform.python.function: 'views.orders:build'",
        "+ spec.transform.python.pyFiles: ['s3://b/views.zip']",
        "- spec.transform.sql: 'SELECT id, amount FROM events'",
    ]


def test_same_content_gives_an_empty_diff() -> None:
    same = apply_merge_patch(SPEC, spec_patch(SPEC, RevisionContent.model_validate(SQL_CONTENT)))
    assert spec_diff(SPEC, same) == []

