"""`dv plan`'s classification of a change, over hand-built specs and statuses: each kind, with
revision ids written out (samples.R1, R2: checked in test_revision) or taken from what the
operator's own planner records for the same spec, never recomputed here."""

from __future__ import annotations

import dataclasses
from typing import Any

from derived_views.api.spec import DerivedViewSpec
from derived_views.api.status import DerivedViewStatus, Phase
from derived_views.core import actions as A
from derived_views.core.plan import plan
from derived_views.core.preview.change import ChangeKind, LiveView, change_of
from derived_views.core.settings import Settings, SparkSettings
from support.world.hand_observed import CONTENT_V1, CONTENT_V2, ENDS, I1, R1, R2, observed, record
from support.world.samples import SQL_V1, SQL_V2, SQL_V3, T0, make_settings, make_spec, spec_body

SETTINGS = make_settings()
ACTIVE_V1 = {"revision": R1, "phase": "Active",
             "active": {"revision": R1, "index": I1, "since": "2026-03-01T11:00:00Z"},
             "revisions": [record(R1, "Active", content=CONTENT_V1)]}


def live(spec: DerivedViewSpec | None, status: dict[str, Any]) -> LiveView:
    return LiveView(spec, DerivedViewStatus.model_validate(status))


def test_a_new_view_replays_its_first_revision() -> None:
    change = change_of(make_spec(), None, SETTINGS, T0)
    assert change.kind is ChangeKind.REPLAY
    assert (change.revision, change.active) == (R1, None)
    assert "orders_by_customer__71250ff800" in change.what
    assert "+ spec.transform.sql: " + repr(SQL_V1) in change.content_diff


def test_the_same_spec_changes_nothing() -> None:
    change = change_of(make_spec(), live(make_spec(), ACTIVE_V1), SETTINGS, T0)
    assert (change.kind, change.fields, change.content_diff) == (ChangeKind.NONE, (), ())


def test_a_gate_change_is_applied_in_place_without_a_restart() -> None:
    changed = make_spec(cutover={"maxLagMessages": 50})
    change = change_of(changed, live(make_spec(), ACTIVE_V1), SETTINGS, T0)
    assert change.kind is ChangeKind.SETTINGS
    assert change.fields == ("spec.cutover.maxLagMessages",)
    assert change.revision == R1
    assert not change.restarts_jobs


def test_a_spark_change_restarts_the_jobs_from_their_checkpoints() -> None:
    changed = make_spec(spark={"executor": {"instances": 3}})
    change = change_of(changed, live(make_spec(), ACTIVE_V1), SETTINGS, T0)
    assert change.kind is ChangeKind.SETTINGS
    assert change.fields == ("spec.spark.executor.instances",)
    assert change.restarts_jobs
    assert "restart from their checkpoints" in change.what


def test_a_gate_change_restarts_the_jobs_when_it_moves_the_interval() -> None:
    """maxLagSeconds sets the micro-batch interval unless the installation fixes one."""
    changed = make_spec(cutover={"maxLagSeconds": 20})
    assert change_of(changed, live(make_spec(), ACTIVE_V1), SETTINGS, T0).restarts_jobs
    fixed = dataclasses.replace(SETTINGS, spark=SparkSettings(trigger_seconds=2.0))
    assert not change_of(changed, live(make_spec(), ACTIVE_V1), fixed, T0).restarts_jobs


def test_only_the_checks_are_re_judged() -> None:
    changed = make_spec(cutover={"checks": {"rowCount": {"maxDifference": 10}}})
    change = change_of(changed, live(make_spec(), ACTIVE_V1), SETTINGS, T0)
    assert change.kind is ChangeKind.CHECKS
    assert change.fields == ("spec.cutover.checks",)  # the block added, not its defaults
    assert "no replay" in change.what
    again = make_spec(cutover={"checks": {"rowCount": {"maxDifference": 20}}})
    assert change_of(again, live(changed, ACTIVE_V1), SETTINGS, T0).fields == (
        "spec.cutover.checks.rowCount.maxDifference",)


def test_a_block_added_beside_new_content_is_one_field() -> None:
    changed = make_spec(SQL_V2, cutover={"checks": {"rowCount": {"maxDifference": 10}}})
    change = change_of(changed, live(make_spec(), ACTIVE_V1), SETTINGS, T0)
    assert (change.kind, change.fields) == (ChangeKind.REPLAY, ("spec.cutover.checks",))


def test_new_sql_is_a_new_revision_with_its_content_diff_against_the_active() -> None:
    changed = make_spec(SQL_V2, cutover={"maxLagMessages": 50})
    change = change_of(changed, live(make_spec(), ACTIVE_V1), SETTINGS, T0)
    assert change.kind is ChangeKind.REPLAY
    assert (change.revision, change.active) == (R2, R1)
    assert change.content_diff == (f"- spec.transform.sql: {SQL_V1!r}",
                                   f"+ spec.transform.sql: {SQL_V2!r}")
    assert change.fields == ("spec.cutover.maxLagMessages",)
    assert "beside the active 71250ff800" in change.what


def test_the_revision_is_the_one_the_operator_starts() -> None:
    """The preview's id equals the record the planner writes for the same spec and status."""
    spec = make_spec(SQL_V3)
    actions = plan(spec, observed(ACTIVE_V1, indexes={I1}, alias=I1, apps={R1: "RUNNING"},
                                  ledger={R1: ENDS}), T0)
    update = next(a for a in actions if isinstance(a, A.UpdateStatus))
    started = [r.revision for r in update.status.revisions if r.phase == Phase.Pending]
    change = change_of(spec, live(make_spec(), ACTIVE_V1), SETTINGS, T0)
    assert [change.revision] == started


def test_content_back_to_a_retiring_revision_is_a_rollback() -> None:
    status = {"revision": R2, "phase": "Active",
              "active": {"revision": R2, "index": "orders_by_customer__" + R2,
                         "since": "2026-03-01T11:59:00Z"},
              "revisions": [record(R2, "Active", content=CONTENT_V2),
                            record(R1, "Retiring", content=CONTENT_V1,
                                   followUntil="2026-03-01T12:05:00Z")]}
    change = change_of(make_spec(SQL_V1), live(make_spec(SQL_V2), status), SETTINGS, T0)
    assert (change.kind, change.revision, change.active) == (ChangeKind.ROLLBACK, R1, R2)
    assert "no restart, no replay" in change.what
    later = T0.replace(hour=13)  # past followUntil: its job resumes from its checkpoint
    assert "resumes from its checkpoint" in change_of(
        make_spec(SQL_V1), live(make_spec(SQL_V2), status), SETTINGS, later).what


def test_back_to_the_active_during_a_migration_supersedes_the_candidate() -> None:
    status = {**ACTIVE_V1, "revision": R2,
              "revisions": [*ACTIVE_V1["revisions"], record(R2, "Backfilling",
                                                            content=CONTENT_V2)]}
    change = change_of(make_spec(SQL_V1), live(make_spec(SQL_V2), status), SETTINGS, T0)
    assert (change.kind, change.revision) == (ChangeKind.ROLLBACK, R1)
    assert f"candidate {R2} is superseded" in change.what


def test_a_retired_revision_whose_index_is_gone_is_rebuilt() -> None:
    status = {**ACTIVE_V1, "revisions": [*ACTIVE_V1["revisions"], record(R2, "Retired")]}
    change = change_of(make_spec(SQL_V2), live(make_spec(), status), SETTINGS, T0)
    assert change.kind is ChangeKind.REPLAY
    assert "rebuilt from offset 0" in change.what


def test_a_live_spec_that_does_not_read_is_compared_by_its_status_revision() -> None:
    change = change_of(make_spec(SQL_V2), live(None, ACTIVE_V1), Settings(), T0)
    assert (change.kind, change.revision, change.fields) == (ChangeKind.REPLAY, R2, ())


def test_a_pinned_reader_schema_shows_as_its_subject_and_version() -> None:
    body = spec_body(source={"format": "avro", "schema": None, "avro": {
        "registry": {"secretRef": {"name": "registry"}},
        "readerSchema": {"subject": "orders-value", "version": 3}}})
    body["source"].pop("schema")
    change = change_of(DerivedViewSpec.model_validate(body), None, SETTINGS, T0)
    assert "+ spec.source.avro.readerSchema.subject: 'orders-value'" in change.content_diff
    assert "+ spec.source.avro.readerSchema.version: 3" in change.content_diff
