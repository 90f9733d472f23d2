"""Which views leave the lag poll: the statuses are the planner's own, driven in World."""

from __future__ import annotations

from typing import Any

from derived_views.core.cadence import log_moved, next_pass_in, settled
from support.world.samples import I2, SQL_V1, SQL_V2, spec_body
from support.world.world import World, run_until, served_world


def _settled(world: World, **meta: Any) -> bool:
    return settled({"generation": world.generation, **meta}, world.parsed_status())


def test_a_served_caught_up_view_is_settled() -> None:
    world = served_world()
    world.settle(ticks=3)
    assert _settled(world)


def test_a_view_still_building_its_first_revision_is_not() -> None:
    world = World(spec_body(SQL_V1))
    world.reconcile()
    assert not _settled(world)
    world.tick()
    world.reconcile()
    assert not _settled(world)


def test_an_unserved_spec_change_or_a_deletion_unsettles_it() -> None:
    world = served_world()
    world.settle(ticks=3)
    assert not _settled(world, deletionTimestamp="2026-03-01T12:00:00Z")
    world.edit(spec_body(SQL_V2))
    assert not _settled(world)  # the new generation is not observed yet
    world.reconcile()
    assert not _settled(world)  # a candidate is being built


def test_after_a_cutover_it_settles_only_once_the_previous_revision_is_let_go() -> None:
    world = served_world()
    world.edit(spec_body(SQL_V2))
    run_until(world, lambda w: w.alias == I2)
    status = world.parsed_status()
    assert status.candidate is None and status.active is not None
    assert not _settled(world)  # the previous revision's job follows the log, then is kept
    world.settle(ticks=140)  # past keepPreviousRunningSeconds and retainPreviousSeconds
    assert _settled(world), world.phases()


def test_lag_a_failed_job_or_an_unreachable_sink_keeps_it_on_the_lag_poll() -> None:
    busy = served_world()
    busy.traffic = 30
    busy.settle(ticks=3)
    assert (busy.parsed_status().lag_messages or 0) > 0
    assert not _settled(busy)

    failed = served_world()
    failed.settle(ticks=3)
    assert failed.fail_job()
    failed.reconcile()
    assert not _settled(failed)

    down = served_world()
    down.settle(ticks=3)
    down.sink_up = False
    down.reconcile()
    assert not _settled(down)


def test_a_settled_view_waits_for_the_safety_net_and_any_other_polls_lag() -> None:
    assert next_pass_in(True, lag_poll_seconds=5.0, settled_poll_seconds=300.0) == 300.0
    assert next_pass_in(False, lag_poll_seconds=5.0, settled_poll_seconds=300.0) == 5.0


def test_the_log_moved_when_an_end_offset_or_a_topic_changed() -> None:
    seen = {("orders", 0): 10, ("orders", 1): 4}
    assert not log_moved(seen, frozenset(), dict(seen), frozenset())
    assert log_moved(seen, frozenset(), {("orders", 0): 11, ("orders", 1): 4}, frozenset())
    assert log_moved(seen, frozenset(), {**seen, ("orders", 2): 0}, frozenset())  # grew
    assert log_moved(seen, frozenset(), {("orders", 0): 10}, frozenset({"orders"}))
    assert log_moved(seen, frozenset(), {("orders", 0): 0, ("orders", 1): 0}, frozenset())
