"""Integrity before promotion and partition growth, scenario by scenario (integrity_world).

An index that lost batches its ledger claims (dropped, dropped and re-created) is never
promoted: a candidate is rebuilt from offset 0 under a new build; an active one is
Degraded and its alias is not repaired onto the incomplete table.  Expected names,
builds and reasons are written out by hand.
"""

from __future__ import annotations

from derived_views.core import actions as A
from derived_views.core.observed import LedgerPosition
from support.world.integrity import IntegrityWorld
from support.world.samples import SQL_V1, SQL_V2, spec_body
from support.world.world import World

R1, R2 = "71250ff800", "5d31ce3608"
I1, I2 = (f"orders_by_customer__{r}" for r in (R1, R2))
CKPT = "s3a://checkpoints/dv/shop/orders-by-customer"
LATEST_BY_OFFSET = ("SELECT customer_id, max_by(amount, _kafka_offset) AS amount FROM events "
                    "GROUP BY customer_id")


def record(world: World, revision: str) -> dict[str, object]:
    return next(r for r in world.status["revisions"] if r["revision"] == revision)


def backfilling(world: IntegrityWorld, revision: str) -> None:
    """Run until the revision has committed a batch but is not caught up."""
    for _ in range(10):
        world.reconcile()
        world.tick()
        if revision in world.ledger:
            return
    raise AssertionError("no batch committed")


def test_a_candidate_whose_table_was_dropped_is_rebuilt_from_offset_0_and_never_promoted() -> None:
    world = IntegrityWorld(spec_body(SQL_V1), rate=20)
    backfilling(world, R1)
    world.drop_table_by_hand(I1)  # the ledger keeps its rows
    world.reconcile()
    rec = record(world, R1)
    assert (rec["phase"], rec["reason"], rec["build"]) == ("Pending", "IndexLost", 1)
    assert rec["checkpointLocation"] == f"{CKPT}/{R1}.1"
    assert "is missing but the ledger holds its committed batches" in str(rec["message"])
    assert "IndexLost" in world.event_reasons()
    world.settle(ticks=40)
    assert world.alias == I1 and world.serving_incomplete == []
    assert world.condition("Ready") == ("True", "Serving")
    assert record(world, R1)["build"] == 1
    assert world.ledger[R1][0] == {("orders", 0): 120, ("orders", 1): 80}  # the log's end
    assert world.violations == []


def test_a_candidate_table_dropped_and_recreated_empty_is_rebuilt_too() -> None:
    world = IntegrityWorld(spec_body(SQL_V1), rate=20)
    backfilling(world, R1)
    world.recreate_table_by_hand(I1)  # same name, a new table: the ledger's batches are not in it
    world.settle(ticks=40)
    assert world.alias == I1 and world.serving_incomplete == []
    assert record(world, R1)["build"] == 1
    assert world.event_reasons().count("IndexLost") == 1
    assert world.violations == []


def test_the_stale_ledger_is_dropped_only_after_the_job_is_gone() -> None:
    world = IntegrityWorld(spec_body(SQL_V1), rate=20, delete_lingers=True)
    backfilling(world, R1)
    world.drop_table_by_hand(I1)
    first = world.reconcile()
    assert [type(a).__name__ for a in first if isinstance(a, A.EFFECTS)] == [
        "DeleteSparkApplication"]
    world.tick()  # the job object finishes deleting
    second = world.reconcile()
    assert [a for a in second if isinstance(a, A.EFFECTS)] == [
        A.DropIndex("public", I1, R1)]  # no job is created in the pass that drops its ledger
    third = world.reconcile()
    created = [a for a in third if isinstance(a, A.CreateSparkApplication)]
    assert len(created) == 1
    assert f"{CKPT}/{R1}.1" in created[0].manifest["spec"]["arguments"][1]


def test_an_active_index_that_lost_its_table_is_degraded_and_not_repaired_onto_a_new_one() -> None:
    world = IntegrityWorld(spec_body(SQL_V1))
    world.settle(ticks=8)
    assert world.alias == I1
    world.drop_table_by_hand(I1, cascade_alias=True)  # DROP TABLE ... CASCADE drops the alias
    world.settle(ticks=3)
    assert world.condition("Degraded") == ("True", "IndexLost")
    assert world.condition("Ready") == ("False", "IndexLost")
    degraded = world.parsed_status().condition("Degraded")
    assert degraded is not None and "serves nothing" in degraded.message
    assert "apply a new revision" in degraded.message
    assert world.event_reasons().count("IndexLost") == 1  # once, not once per pass
    # someone re-creates the table by hand: still not the index the ledger counts
    world.create_table(I1, complete=False)
    world.settle(ticks=3)
    assert world.alias is None and world.serving_incomplete == []
    assert world.condition("Degraded") == ("True", "IndexLost")
    # the way out the message names: a new revision, built beside it, takes over
    world.edit(spec_body(SQL_V2))
    world.settle(ticks=30)
    assert world.alias == I2 and world.serving_incomplete == []
    assert world.condition("Ready") == ("True", "Serving")


def test_ledgers_without_recorded_identities_still_catch_a_missing_table() -> None:
    world = IntegrityWorld(spec_body(SQL_V1), rate=20)
    backfilling(world, R1)
    world.ledger_oids.clear()  # written by a job from before identities were recorded
    world.recreate_table_by_hand(I1)
    world.reconcile()
    assert record(world, R1)["reason"] != "IndexLost"  # a same-named table: cannot tell
    world.drop_table_by_hand(I1)
    world.reconcile()
    assert record(world, R1)["reason"] == "IndexLost"


def test_partition_growth_under_a_revision_ordering_by_offset_degrades_it() -> None:
    world = IntegrityWorld(spec_body(LATEST_BY_OFFSET))
    world.settle(ticks=8)
    assert record(world, world.parsed_status().revision)["sourcePartitions"] == {"orders": 2}
    world.ends[("orders", 2)] = 30  # kafka-topics --alter --partitions 3
    world.settle(ticks=2)
    assert world.condition("Degraded") == ("True", "PartitionsGrew")
    degraded = world.parsed_status().condition("Degraded")
    assert degraded is not None and "orders 2->3" in degraded.message
    assert "max_by(amount, updated_at)" in degraded.message
    assert world.event_reasons().count("PartitionsGrew") == 1


def test_partition_growth_without_offset_ordering_is_fine() -> None:
    world = IntegrityWorld(spec_body(SQL_V1))
    world.settle(ticks=8)
    world.ends[("orders", 2)] = 30
    world.settle(ticks=2)
    assert world.condition("Degraded") == ("False", "AsExpected")


def test_a_candidate_ordering_by_offset_is_not_promoted_after_growth() -> None:
    world = IntegrityWorld(spec_body(SQL_V1))
    world.settle(ticks=8)
    world.edit(spec_body(LATEST_BY_OFFSET))
    world.reconcile()
    world.ends[("orders", 2)] = 30
    world.settle(ticks=30)
    assert world.alias == I1  # the old revision keeps serving
    assert world.condition("Degraded") == ("True", "PartitionsGrew")
    candidate = world.parsed_status().candidate
    assert candidate is not None and candidate.phase.value == "Backfilling"
    assert candidate.caught_up_since is None


def test_positions_carry_the_recorded_identity() -> None:
    # LedgerPosition defaults keep older call sites (no identity: no decision) valid.
    assert LedgerPosition({("orders", 0): 1}).index_oid is None
