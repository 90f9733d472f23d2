"""What the planner's scenario tests (tests/unit/core/planner/phases/) share: the jobs' names,
the checkpoint base, and small readings of a plan."""

from __future__ import annotations

from derived_views.core import actions as A
from derived_views.core.plan import plan
from support.world.samples import I1, R1, R2, R3, SQL_V1, spec_body
from support.world.world import World, run_until

APP1, APP2, APP3 = (f"orders-by-customer-{r}" for r in (R1, R2, R3))


CKPT = "s3a://checkpoints/dv/shop/orders-by-customer"


def kinds(actions: list[A.Action]) -> list[str]:
    return [type(a).__name__ for a in actions]


def effects(actions: list[A.Action]) -> list[A.Action]:
    return [a for a in actions if isinstance(a, A.EFFECTS)]


def switch_planned_next(world: World) -> None:
    """Run the world until its next pass would switch the alias (that pass not yet run)."""
    for _ in range(60):
        if any(isinstance(a, A.SwitchAlias) for a in plan(world.spec, world.observe(), world.now)):
            return
        world.reconcile()
        world.tick()
    raise AssertionError("no switch planned")


def orders_ends(world: World) -> dict[tuple[str, int], int]:
    return {tp: end for tp, end in world.ends.items() if tp[0] == "orders"}


PRODUCTION_GATE = {"maxLagMessages": 0, "maxLagSeconds": 10}
"""The spec's defaults (test_api_spec checks them): messages or time."""


def busy_served_world(traffic: int) -> World:
    """A served view whose topic receives `traffic` records per partition after every batch."""
    world = World(spec_body(SQL_V1, cutover=PRODUCTION_GATE), traffic=traffic)
    run_until(world, lambda w: w.alias == I1)
    return world
