"""A cutover the sink says would break a dependent (or fail) is held back, told once, and
happens as soon as the blocker is gone (core.cutover.switch_guard through the planner)."""

from __future__ import annotations

import dataclasses
from typing import Any

from derived_views.core import actions as A
from derived_views.core.observed import Observed, SwitchBlocker
from support.world.samples import SQL_V1, SQL_V2, spec_body
from support.world.world import World

R1, R2 = "71250ff800", "5d31ce3608"  # revisions of SQL_V1 / SQL_V2 (test_revision)
I1, I2 = f"orders_by_customer__{R1}", f"orders_by_customer__{R2}"
DEPENDENTS = SwitchBlocker(
    "AliasDependents", "view public.report depends on view public.orders_by_customer, and "
                       "index orders_by_customer__5d31ce3608 drops column orders")


@dataclasses.dataclass
class GuardedWorld(World):
    """The simulated world, whose sink also reports switch blockers per index."""

    blockers: dict[str, SwitchBlocker] = dataclasses.field(default_factory=dict)

    def observe(self) -> Observed:
        observed = super().observe()
        if observed.sink is None:
            return observed
        return dataclasses.replace(observed, sink=dataclasses.replace(
            observed.sink, switch_blockers=dict(self.blockers)))


def blocked_candidate(**options: Any) -> GuardedWorld:
    """R1 serves; R2 has caught up and passed the gate long ago, blocked by a dependent."""
    world = GuardedWorld(spec_body(SQL_V1), **options)
    world.settle(ticks=8)
    assert world.alias == I1
    world.blockers = {I2: DEPENDENTS}
    world.edit(spec_body(SQL_V2))
    world.settle(ticks=20)
    return world


def condition(world: World, type_: str) -> tuple[str, str, str]:
    found = world.parsed_status().condition(type_)
    assert found is not None
    return found.status, found.reason, found.message


def test_a_blocked_candidate_is_never_switched_to_and_the_active_keeps_serving() -> None:
    world = blocked_candidate()
    assert world.alias == I1
    assert not any(isinstance(a, A.SwitchAlias) for plan in world.plans for a in plan
                   if getattr(a, "to_index", None) == I2)
    status = world.parsed_status()
    assert status.active is not None and status.active.revision == R1
    assert status.candidate is not None and status.candidate.phase.value == "CaughtUp"
    assert world.phases() == {R1: "Active", R2: "CaughtUp"}
    assert R1 in {app.config["revision"] for app in world.apps.values()}


def test_degraded_and_reconciling_name_the_dependents() -> None:
    world = blocked_candidate()
    expected = (f"revision {R2} passed the lag gate but is not switched to: view public.report "
                "depends on view public.orders_by_customer, and index "
                "orders_by_customer__5d31ce3608 drops column orders")
    assert condition(world, "Degraded") == ("True", "AliasDependents", expected)
    assert condition(world, "Reconciling") == ("True", "AliasDependents", expected)
    assert condition(world, "Stalled")[0] == "False"
    ready = condition(world, "Ready")
    assert ready[0] == "False"  # as during any migration: the spec's revision does not serve
    assert f"revision {R1} serves while" in ready[2]


def test_the_blocker_is_announced_once_as_a_warning() -> None:
    world = blocked_candidate()
    world.settle(ticks=10)
    told = [e for e in world.events if e.reason == "AliasDependents"]
    assert told == [A.EmitEvent(
        "AliasDependents", f"Held back the cutover to revision {R2}: view public.report depends "
                           "on view public.orders_by_customer, and index "
                           "orders_by_customer__5d31ce3608 drops column orders", "Warning")]


def test_another_blocker_is_announced_again() -> None:
    world = blocked_candidate()
    world.blockers = {I2: SwitchBlocker("AliasOwner", "view public.orders_by_customer is owned "
                                                      "by role app, and role dv cannot act as it")}
    world.settle(ticks=5)
    assert [e.reason for e in world.events if e.type == "Warning"] == [
        "AliasDependents", "AliasOwner"]
    assert condition(world, "Degraded")[:2] == ("True", "AliasOwner")


def test_the_switch_happens_on_the_first_pass_after_the_blocker_is_gone() -> None:
    world = blocked_candidate()
    world.blockers = {}
    world.tick()
    actions = world.reconcile()
    switched = [a for a in actions if isinstance(a, A.SwitchAlias)]
    assert [(a.schema, a.alias, a.to_index, a.from_index) for a in switched] == [
        ("public", "orders_by_customer", I2, I1)]
    assert world.alias == I2
    assert world.phases()[R2] == "Active"
    assert condition(world, "Degraded")[:2] == ("False", "AsExpected")
    assert condition(world, "Ready")[:2] == ("True", "Serving")
    assert world.event_reasons()[-1] == "CutoverCompleted"


def test_a_blocker_on_another_index_does_not_hold_the_candidate_back() -> None:
    world = GuardedWorld(spec_body(SQL_V1))
    world.settle(ticks=8)
    world.blockers = {"orders_by_customer__0000000000": DEPENDENTS}
    world.edit(spec_body(SQL_V2))
    world.settle(ticks=20)
    assert world.alias == I2
    assert "AliasDependents" not in world.event_reasons()


def test_a_job_failure_already_shown_keeps_degraded_and_reconciling_names_the_blocker() -> None:
    world = blocked_candidate()
    assert world.fail_job(R1, "OOMKilled")
    world.settle(ticks=2)
    assert condition(world, "Degraded")[:2] == ("True", "JobFailed")
    assert condition(world, "Reconciling")[:2] == ("True", "AliasDependents")


def test_the_first_revision_can_be_held_back_too() -> None:
    world = GuardedWorld(spec_body(SQL_V1))
    world.blockers = {I1: SwitchBlocker("IndexNotReadable", "view public.orders_by_customer "
                                                            "reads its index as role app")}
    world.settle(ticks=12)
    assert world.alias is None
    assert world.parsed_status().active is None
    assert condition(world, "Degraded")[:2] == ("True", "IndexNotReadable")
    assert world.event_reasons().count("IndexNotReadable") == 1
    world.blockers = {}
    world.reconcile()
    assert world.alias == I1
