"""Deletion never hangs on a missing dependency, and says what it left behind.

Expected names are written out by hand from the samples (schema public, table
orders_by_customer, revisions R1/R2), not derived from the planner's helpers.
"""

from __future__ import annotations

from derived_views.core import actions as A
from derived_views.core.settings import CheckpointSettings
from support.world.samples import I1, I2, R1, SQL_V1, SQL_V2, make_settings, spec_body
from support.world.world import World, served_world

HELD = "views-db"


def _delete_policy_world() -> World:
    world = served_world()
    world.edit(spec_body(SQL_V1, deletionPolicy="Delete"))
    world.reconcile()
    return world


def _events(actions: list[A.Action], reason: str) -> list[A.EmitEvent]:
    return [a for a in actions if isinstance(a, A.EmitEvent) and a.reason == reason]


def test_delete_policy_holds_the_sink_secret_once_and_records_it() -> None:
    world = served_world()
    assert world.held_secrets == set()  # Retain: nothing to keep for cleanup
    world.edit(spec_body(SQL_V1, deletionPolicy="Delete"))
    first = world.reconcile()
    assert A.HoldSecret(HELD) in first
    assert world.held_secrets == {HELD}
    assert world.parsed_status().held_secrets == [HELD]
    world.tick()
    assert not any(isinstance(a, A.HoldSecret) for a in world.reconcile())


def test_the_hold_follows_the_policy_and_the_secret_ref() -> None:
    world = _delete_policy_world()
    sink = {"postgres": {"secretRef": {"name": "other-db"}, "table": "orders_by_customer"},
            "primaryKey": ["customer_id"]}
    world.edit(spec_body(SQL_V1, deletionPolicy="Delete", sink=sink))
    world.reconcile()
    assert world.held_secrets == {"other-db"}
    world.edit(spec_body(SQL_V1, deletionPolicy="Retain", sink=sink))
    world.reconcile()
    assert world.held_secrets == set()
    assert world.parsed_status().held_secrets == []


def test_the_checkpoint_secret_is_held_too_for_s3a_checkpoints() -> None:
    # the samples checkpoint to s3a://checkpoints/dv; the operator deletes a dropped
    # revision's checkpoints with the namespace's checkpoint Secret
    world = World(spec_body(SQL_V1, deletionPolicy="Delete"),
                  settings=make_settings(checkpoints=CheckpointSettings(secret="dv-checkpoints")))
    world.settle(ticks=8)
    assert world.held_secrets == {HELD, "dv-checkpoints"}
    world.deletion_timestamp = world.now
    world.settle(ticks=2)
    assert world.gone and world.held_secrets == set()


def test_deletion_releases_the_spec_s_secret_even_if_status_lost_the_record() -> None:
    world = _delete_policy_world()
    world.status["heldSecrets"] = []  # e.g. a status restored from an old backup
    world.deletion_timestamp = world.now
    world.settle(ticks=2)  # the job goes, then the drops and the release
    assert world.gone
    assert world.held_secrets == set()
    assert any(A.ReleaseSecret(HELD) in plan for plan in world.plans)


def test_no_hold_while_the_secret_cannot_be_read() -> None:
    world = served_world()
    world.sink_up, world.sink_problem = False, ("SecretMissing", "secret shop/views-db not found")
    world.edit(spec_body(SQL_V1, deletionPolicy="Delete"))
    world.reconcile()
    assert world.held_secrets == set() and world.parsed_status().held_secrets == []


def test_missing_secret_with_delete_releases_at_once_naming_what_stayed() -> None:
    world = _delete_policy_world()
    world.sink_up, world.sink_problem = False, ("SecretMissing", "sink secret shop/views-db "
                                                                "not found")
    world.deletion_timestamp = world.now
    actions = world.reconcile()
    assert world.gone
    assert world.held_secrets == set()  # the hold is released with the view
    [left] = _events(actions, "LeftBehind")
    assert left.type == "Warning"
    assert "secret shop/views-db not found" in left.message
    assert "alias view public.orders_by_customer" in left.message
    assert f"index table public.{I1}" in left.message
    assert f'DROP TABLE IF EXISTS "public"."{I1}";' in left.message
    assert world.tables == {I1}  # nothing could be dropped


def test_missing_secret_with_retain_releases_at_once_and_owes_nothing() -> None:
    world = served_world()
    world.sink_up, world.sink_problem = False, ("SecretMissing", "secret shop/views-db missing")
    world.deletion_timestamp = world.now
    actions = world.reconcile()
    assert world.gone
    assert _events(actions, "LeftBehind") == []
    assert [e.reason for e in actions if isinstance(e, A.EmitEvent)] == ["Deleted"]


def test_an_unreachable_database_gets_the_grace_period_then_is_named() -> None:
    world = _delete_policy_world()
    world.sink_up, world.sink_problem = False, ("SinkUnreachable", "cannot connect to pg:5432")
    world.deletion_timestamp = world.now
    world.reconcile()
    world.tick(seconds=295)
    world.reconcile()
    assert not world.gone
    world.tick(seconds=5)
    actions = world.reconcile()
    assert world.gone
    [left] = _events(actions, "LeftBehind")
    assert "cannot connect to pg:5432 for 300s" in left.message


def test_dependent_objects_block_the_drop_visibly_then_are_left_after_the_grace() -> None:
    world = _delete_policy_world()
    world.edit(spec_body(SQL_V2, deletionPolicy="Delete"))
    for _ in range(3):
        world.reconcile()
        world.tick()
    world.drop_blockers = ("view public.monthly_report",)
    world.deletion_timestamp = world.now
    for _ in range(6):  # jobs go, then the drop is refused on every pass
        world.reconcile()
        world.tick(seconds=5)
    assert not world.gone and world.alias == I1 and I1 in world.tables
    blocked = [e for e in world.events if e.reason == "DeletionBlocked"]
    assert len(blocked) == 1  # said once, not every pass
    assert "view public.monthly_report" in blocked[0].message
    assert "CASCADE" in blocked[0].message
    assert world.condition("Stalled") == ("True", "DeletionBlocked")
    world.tick(seconds=300)
    actions = world.reconcile()
    assert world.gone
    assert not any(isinstance(a, (A.DropAlias, A.DropIndex)) for a in actions)
    [left] = _events(actions, "LeftBehind")
    assert "view public.monthly_report" in left.message
    assert f"index table public.{I1}" in left.message and f"index table public.{I2}" in left.message


def test_dependents_gone_in_time_let_the_drop_proceed() -> None:
    world = _delete_policy_world()
    world.drop_blockers = ("view public.monthly_report",)
    world.deletion_timestamp = world.now
    for _ in range(3):
        world.reconcile()
        world.tick()
    assert not world.gone
    world.drop_blockers = ()
    world.reconcile()
    assert world.gone and world.alias is None and world.tables == set()
    assert R1 not in world.ledger


def test_a_dropped_index_carries_the_checkpoints_to_delete_after_it() -> None:
    """Planned with the drop, not chosen by the shell from the raw body: where status
    recorded the revision's checkpoint, cut to its build-0 location."""
    world = _delete_policy_world()
    world.deletion_timestamp = world.now
    world.settle(ticks=3)
    drops = [a for p in world.plans for a in p if isinstance(a, A.DropIndex)]
    assert drops and world.gone
    assert {(d.index, d.checkpoints) for d in drops} == {
        (I1, f"s3a://checkpoints/dv/shop/orders-by-customer/{R1}")}


def test_what_stayed_is_said_in_the_words_of_the_sink() -> None:
    """An OpenSearch view left behind is dropped by REST requests, not SQL."""
    from derived_views.core.deletion import left_behind

    said = left_behind("opensearch", "", "orders", ["orders__r2", "orders__r1"], "dv_ledger")
    assert said == ("left alias orders, index orders__r1, index orders__r2 (and their entries "
                    "in index dv_ledger) in OpenSearch; to drop them by hand: "
                    "DELETE /orders__r1,orders__r2 (an alias goes with its indexes)")
    assert "DROP" not in said
    assert "POST /_aliases" in left_behind("opensearch", "", "orders", [], "dv_ledger")
    assert 'DROP VIEW IF EXISTS "public"."orders";' in left_behind(
        "postgres", "public", "orders", [], "dv_ledger")
