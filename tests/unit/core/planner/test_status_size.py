"""The status stays small at 100 topics x 64 partitions: etcd refuses objects over 1.5 MiB and
a view whose status cannot be written is stuck. The size is measured on the status the planner
writes in the simulated world (serialised as the API server stores it), mid-migration, with
the lag history full and many revisions torn down before."""

from __future__ import annotations

import datetime as dt
import json

from derived_views.core.naming import index_table
from derived_views.core.planner import status_size
from derived_views.core.settings import PollSettings
from support.world.samples import SQL_V1, SQL_V2, SQL_V3, make_settings, spec_body
from support.world.world import World

TOPICS = [f"orders-region-{i:03d}" for i in range(100)]
PARTITIONS = 64
BOUND = 64 * 1024


def _big_world() -> World:
    ends = {(t, p): 1_000_000 + 7 * p for t in TOPICS for p in range(PARTITIONS)}
    body = spec_body(SQL_V1, source={"topics": TOPICS})
    world = World(body, ends=ends, rate=400_000,
                  settings=make_settings(polling=PollSettings(history_limit=360, history_seconds=10)))
    return world


def _status_bytes(world: World) -> int:
    return len(json.dumps({"status": world.status}, separators=(",", ":")).encode())


def test_status_under_64_kib_at_100_topics_by_64_partitions_mid_migration() -> None:
    world = _big_world()
    world.settle(ticks=12)  # its 6.4 billion records replay, then restart steady, then serve
    assert world.alias is not None
    # 40 earlier revisions were torn down (their builds remembered) and the lag history is full
    world.status["spentBuilds"] = {f"{i:016x}": i % 3 for i in range(40)}
    world.status["lagHistory"] = [
        {"time": (world.now - dt.timedelta(seconds=10 * (400 - i))).strftime(
            "%Y-%m-%dT%H:%M:%SZ"), "revision": f"{i % 2:016x}", "messages": 6_400_000 + i,
         "seconds": 86_400 + i} for i in range(400)]
    world.edit(spec_body(SQL_V2, source={"topics": TOPICS}))
    world.reconcile()
    world.tick()
    world.reconcile()
    status = world.parsed_status()
    assert status.candidate is not None and status.candidate.lag is not None
    assert status.candidate.lag.messages > 0  # a lag over all 6400 partitions is shown
    size = _status_bytes(world)
    print(f"status at 100 topics x 64 partitions: {size} bytes")
    assert size < BOUND, size
    # dv watch still gets progress, per topic at this size
    assert set(status.candidate.lag.end_offsets) == set(TOPICS)
    assert len(status.lag_history) == 360
    assert len(status.spent_builds) <= status_size.SPENT_BUILDS_LIMIT


def test_small_views_keep_per_partition_detail_once() -> None:
    world = World(spec_body(SQL_V1))
    world.settle(ticks=8)
    world.edit(spec_body(SQL_V2))
    world.reconcile()
    status = world.parsed_status()
    assert status.candidate is not None and status.candidate.lag is not None
    assert set(status.candidate.lag.end_offsets) == {"orders/0", "orders/1"}
    assert all(not r.lag or not r.lag.end_offsets for r in status.revisions)


def test_forgotten_spent_builds_never_yield_a_spent_checkpoint() -> None:
    spent = {f"rev{i:03d}": i for i in range(status_size.SPENT_BUILDS_LIMIT + 5)}
    kept, floor = status_size.bounded_spent_builds(spent, 0)
    assert len(kept) == status_size.SPENT_BUILDS_LIMIT
    forgotten = set(spent) - set(kept)
    assert forgotten == {f"rev{i:03d}" for i in range(5)}
    assert floor == 5  # every forgotten build (0..4) is below it


def test_a_revision_forgotten_from_spent_builds_restarts_above_the_floor() -> None:
    world = World(spec_body(SQL_V1))
    world.settle(ticks=8)
    world.status["spentBuilds"] = {f"{i:016x}": 0 for i in range(status_size.SPENT_BUILDS_LIMIT)}
    world.status["spentBuildsFloor"] = 4
    world.edit(spec_body(SQL_V3))
    world.reconcile()
    status = world.parsed_status()
    assert status.candidate is not None
    record = status.record(status.candidate.revision)
    assert record is not None and record.build == 4
    assert record.checkpoint_location.endswith(f"/{record.revision}.4")
    assert record.index == index_table("orders_by_customer", status.candidate.revision)
