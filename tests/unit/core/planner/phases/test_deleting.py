"""Deleting a view (phases/deleting.py): Retain keeps the alias and indexes, Delete drops
them once the jobs are gone, and gives up after the grace when the sink is gone.

The planner, scenario by scenario, in the simulated world of tests/support/world; expected
revisions, names and times are written out by hand (revision hashes come from
tests/unit/core/test_revision.py's independently computed values).
"""

from __future__ import annotations

from derived_views.core import actions as A
from support.world.samples import I1, I2, SQL_V1, SQL_V2, spec_body
from support.world.scenarios import (
    kinds,
)
from support.world.world import served_world


def test_deletion_with_retain_stops_jobs_and_keeps_alias_and_indexes() -> None:
    world = served_world()
    world.deletion_timestamp = world.now
    actions = world.reconcile()
    assert kinds(actions) == ["RecordIntent", "DeleteSparkApplication", "EmitEvent",
                              "RemoveFinalizer"]
    assert actions[-1] == A.RemoveFinalizer("derivedviews.io/cleanup")
    assert world.gone and world.alias == I1 and world.tables == {I1}


def test_deletion_with_delete_drops_alias_and_indexes_once_jobs_are_gone() -> None:
    world = served_world(delete_lingers=True)
    world.edit(spec_body(SQL_V1, deletionPolicy="Delete"))
    world.reconcile()
    world.edit(spec_body(SQL_V2, deletionPolicy="Delete"))
    for _ in range(3):
        world.reconcile()
        world.tick()
    world.deletion_timestamp = world.now
    actions = world.reconcile()
    assert kinds(actions) == ["RecordIntent", "DeleteSparkApplication", "DeleteSparkApplication",
                              "UpdateStatus"]
    assert not world.gone
    world.tick()
    actions = world.reconcile()
    assert kinds(actions) == ["RecordIntent", "DropAlias", "DropIndex", "DropIndex",
                              "ReleaseSecret", "EmitEvent", "RemoveFinalizer"]
    assert [a.index for a in actions if isinstance(a, A.DropIndex)] == sorted([I1, I2])
    assert world.gone and world.alias is None and world.tables == set()
    assert world.held_secrets == set()


def test_deletion_with_delete_and_no_sink_gives_up_after_the_grace_period() -> None:
    world = served_world()
    world.edit(spec_body(SQL_V1, deletionPolicy="Delete"))
    world.reconcile()
    world.sink_up = False
    world.deletion_timestamp = world.now
    world.reconcile()
    assert not world.gone
    world.tick(seconds=290)
    world.reconcile()
    assert not world.gone
    world.tick(seconds=10)
    actions = world.reconcile()
    assert world.gone
    assert any(isinstance(a, A.EmitEvent) and a.reason == "LeftBehind" for a in actions)


def test_deletion_without_our_finalizer_plans_nothing() -> None:
    world = served_world()
    world.finalizers.clear()
    world.deletion_timestamp = world.now
    assert world.reconcile() == []
