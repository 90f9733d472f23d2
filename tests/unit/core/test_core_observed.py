"""Turning API objects into observations, and what the shell is told to look up."""

from __future__ import annotations

import datetime as dt

from core_samples import SQL_V1, SQL_V2, make_spec

from derived_views.api.status import DerivedViewStatus
from derived_views.core.observed import (
    index_tables_to_observe,
    revisions_to_observe,
    spark_application_from_object,
    status_from_object,
    topics_to_observe,
    view_from_object,
)


def test_view_from_object() -> None:
    view = view_from_object({"metadata": {
        "name": "orders", "namespace": "shop", "uid": "u-1", "generation": 7,
        "annotations": {"derivedviews.io/paused": "true"}, "finalizers": ["derivedviews.io/cleanup"],
        "deletionTimestamp": "2026-03-01T12:00:00Z"}})
    assert (view.name, view.namespace, view.uid, view.generation) == ("orders", "shop", "u-1", 7)
    assert view.annotations == {"derivedviews.io/paused": "true"}
    assert view.finalizers == ("derivedviews.io/cleanup",)
    assert view.deletion_timestamp == dt.datetime(2026, 3, 1, 12, tzinfo=dt.UTC)


def test_spark_application_from_object() -> None:
    app = spark_application_from_object({
        "metadata": {"name": "orders-abc", "labels": {"derivedviews.io/revision": "abc"},
                     "deletionTimestamp": "2026-03-01T12:00:00Z"},
        "status": {"applicationState": {"state": "FAILED", "errorMessage": "boom"},
                   "executionAttempts": 4, "submissionAttempts": 1}})
    assert app is not None
    assert (app.name, app.revision, app.state, app.error_message) == (
        "orders-abc", "abc", "FAILED", "boom")
    assert (app.execution_attempts, app.submission_attempts, app.deleting) == (4, 1, True)
    assert app.stopped and not app.running


def test_a_new_spark_application_has_no_state_yet() -> None:
    app = spark_application_from_object({"metadata": {
        "name": "x", "labels": {"derivedviews.io/revision": "r"}}})
    assert app is not None and app.state == "" and not app.stopped and not app.deleting


def test_objects_without_the_revision_label_are_not_ours() -> None:
    assert spark_application_from_object({"metadata": {"name": "x"}}) is None


def test_status_from_object_ignores_unknown_fields() -> None:
    status = status_from_object({"status": {"observedGeneration": 3, "somethingNew": 1}})
    assert status.observed_generation == 3
    assert status_from_object({}) == DerivedViewStatus()


def test_what_to_observe_covers_the_spec_and_tracked_revisions() -> None:
    status = DerivedViewStatus.model_validate({"revisions": [{
        "revision": "5d31ce3608", "index": "orders_by_customer__5d31ce3608", "phase": "Active",
        "since": "2026-03-01T12:00:00Z", "sparkApplication": "a", "checkpointLocation": "c",
        "startedAt": "2026-03-01T12:00:00Z",
        "content": {"topics": ["payments"], "format": "json", "schema": "a INT",
                    "sql": SQL_V2, "primaryKey": ["a"]}}]})
    spec = make_spec(SQL_V1)
    assert revisions_to_observe(spec, status) == {"71250ff800", "5d31ce3608"}
    assert index_tables_to_observe(spec, status) == {"orders_by_customer__71250ff800",
                                                     "orders_by_customer__5d31ce3608"}
    assert topics_to_observe(spec, status) == {"orders", "payments"}
