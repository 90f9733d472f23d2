"""What the status tells people about progress: end offsets, the last cutover, lag history.

Expected values come from the simulated world's own bookkeeping (its log ends,
its clock, the tick at which the status first showed CaughtUp), not from the
planner's arithmetic.
"""

from __future__ import annotations

import datetime as dt
import itertools

from derived_views.core import actions as A
from derived_views.core.settings import PollSettings, Settings
from support.world.samples import I1, I2, R1, R2, SQL_V1, SQL_V2, make_settings, spec_body
from support.world.world import World, served_world


def test_lag_carries_the_end_offsets_it_was_measured_against() -> None:
    world = World(spec_body(SQL_V1))
    seen = []
    for _ in range(6):
        world.reconcile()
        # the detail lives once, in the summary `dv watch` reads (records keep totals)
        candidate = world.parsed_status().candidate
        if candidate is not None and candidate.lag is not None:
            seen.append(candidate.lag)
        world.tick()
    assert seen and all(lag.end_offsets == {"orders/0": 120, "orders/1": 80} for lag in seen)
    # before the job commits, every message is behind; the world's job then commits 50 per
    # partition per tick
    assert seen[0].partitions == {"orders/0": 120, "orders/1": 80}
    assert {"orders/0": 70, "orders/1": 30} in [lag.partitions for lag in seen]


def test_last_cutover_records_gate_and_switch_times() -> None:
    world = served_world()
    first = world.parsed_status().last_cutover
    assert first is not None and first.from_revision is None and first.to_revision == R1
    world.edit(spec_body(SQL_V2))
    caught_up_at: dt.datetime | None = None
    for _ in range(60):
        world.reconcile()
        candidate = world.parsed_status().candidate
        if caught_up_at is None and candidate is not None and candidate.phase.value == "CaughtUp":
            caught_up_at = world.now
        if world.alias == I2:
            break
        world.tick()
    assert world.alias == I2 and caught_up_at is not None
    last = world.parsed_status().last_cutover
    assert last is not None
    assert (last.from_revision, last.to_revision) == (R1, R2)
    assert last.switched_at == world.now
    assert last.gate_held_at == caught_up_at + dt.timedelta(seconds=10)  # stableForSeconds
    assert last.gate_held_at <= last.switched_at


def test_lag_history_samples_active_and_candidate_spaced_and_bounded() -> None:
    config: Settings = make_settings(polling=PollSettings(history_seconds=10, history_limit=12))
    world = World(spec_body(SQL_V1), settings=config)
    world.settle(ticks=8)
    assert world.alias == I1
    world.edit(spec_body(SQL_V2))
    for _ in range(30):  # 5 s ticks: twice the sample spacing
        world.reconcile()
        world.tick()
    history = world.parsed_status().lag_history
    assert 4 <= len(history) <= 12
    times = [s.time for s in history]
    assert times == sorted(times)
    for revision in (R1, R2):
        own = [s for s in history if s.revision == revision]
        assert all((b.time - a.time) >= dt.timedelta(seconds=10)
                   for a, b in itertools.pairwise(own))
        # a sample is added only when the lag changed: it holds until the next one
        assert all((a.messages, a.seconds, a.eta_seconds, a.batch_read)
                   != (b.messages, b.seconds, b.eta_seconds, b.batch_read)
                   for a, b in itertools.pairwise(own))


def test_an_idle_view_s_status_is_not_patched() -> None:
    """Served, caught up, nothing arriving: a pass observes the same lag, so there is nothing
    to write (at a thousand views, a patch per view per poll was most of the API traffic)."""
    world = World(spec_body(SQL_V1), settings=make_settings(polling=PollSettings(history_seconds=10)))
    world.settle(ticks=8)
    assert world.alias == I1
    samples = len(world.parsed_status().lag_history)
    for _ in range(12):
        world.tick()
        assert not [a for a in world.reconcile() if isinstance(a, A.UpdateStatus)]
    assert len(world.parsed_status().lag_history) == samples
    world.tick(growth=5)  # records arrive: what the pass sees changes, and is written
    assert [a for a in world.reconcile() if isinstance(a, A.UpdateStatus)]


def test_lag_history_shows_both_revisions_during_a_migration() -> None:
    world = World(spec_body(SQL_V1), settings=make_settings(polling=PollSettings(history_limit=100)))
    world.settle(ticks=8)
    world.edit(spec_body(SQL_V2))
    for _ in range(30):
        world.reconcile()
        world.tick()
    history = world.parsed_status().lag_history
    assert {s.revision for s in history} == {R1, R2}
    r2 = [s.messages for s in history if s.revision == R2]
    assert r2[0] > 0 and r2[-1] == 0  # the candidate's lag fell to nothing


def test_lag_history_is_off_with_a_zero_limit() -> None:
    world = World(spec_body(SQL_V1), settings=make_settings(polling=PollSettings(history_limit=0)))
    world.settle(ticks=8)
    assert world.parsed_status().lag_history == []


def test_lag_column_follows_the_candidate_then_the_served_revision() -> None:
    world = World(spec_body(SQL_V1))
    world.reconcile()
    # the world's log holds 120 + 80 messages and no job has committed yet
    assert world.parsed_status().lag_messages == 200
    world.settle(ticks=8)
    assert world.alias == I1 and world.parsed_status().lag_messages == 0
    world.edit(spec_body(SQL_V2))
    world.reconcile()
    status = world.parsed_status()
    # the served index is caught up, the column shows the new candidate's whole backlog
    assert status.candidate is not None and status.lag_messages == 200
