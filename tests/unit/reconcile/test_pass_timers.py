"""PassTimers: each view's next timed pass, on a fake clock, then on real threads."""

from __future__ import annotations

import threading
import time

from derived_views.core.cadence import ViewKey
from derived_views.reconcile.pass_timers import PassTimers

A, B, C = ("ns", "a"), ("ns", "b"), ("other", "c")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _timers(clock: Clock) -> PassTimers:
    return PassTimers(lambda _key: None, retry_after=5.0, clock=clock)


def test_keys_fall_due_in_time_order_and_only_once_due() -> None:
    clock = Clock()
    timers = _timers(clock)
    timers.schedule(A, 5.0)
    timers.schedule(B, 1.0)
    timers.schedule(C, 300.0)
    assert timers.take_due(clock.now) is None
    clock.now += 5.0
    assert [timers.take_due(clock.now), timers.take_due(clock.now)] == [B, A]
    assert timers.take_due(clock.now) is None
    assert timers.due_at(C) == 1300.0
    assert len(timers) == 1


def test_a_taken_key_is_off_the_timers_until_scheduled_again() -> None:
    clock = Clock()
    timers = _timers(clock)
    timers.schedule(A, 0.0)
    assert timers.take_due(clock.now) == A
    clock.now += 1000.0
    assert timers.take_due(clock.now) is None
    assert timers.due_at(A) is None


def test_scheduling_again_replaces_the_earlier_time_either_way() -> None:
    clock = Clock()
    timers = _timers(clock)
    timers.schedule(A, 300.0)
    timers.schedule(A, 0.0)  # woken: sooner
    assert timers.take_due(clock.now) == A
    timers.schedule(B, 1.0)
    timers.schedule(B, 300.0)  # settled by a pass: later
    clock.now += 10.0
    assert timers.take_due(clock.now) is None
    clock.now += 300.0
    assert timers.take_due(clock.now) == B
    assert timers.take_due(clock.now) is None  # the replaced entry is not handed out too


def test_a_forgotten_key_never_falls_due() -> None:
    clock = Clock()
    timers = _timers(clock)
    timers.schedule(A, 1.0)
    timers.schedule(B, 2.0)
    timers.forget(A)
    timers.forget(("ns", "never-scheduled"))
    clock.now += 10.0
    assert timers.take_due(clock.now) == B
    assert timers.take_due(clock.now) is None
    assert len(timers) == 0


def test_many_replacements_keep_one_live_entry_per_key() -> None:
    clock = Clock()
    timers = _timers(clock)
    for i in range(10_000):
        timers.schedule((f"ns{i % 3}", "v"), float(10_000 - i))
    assert len(timers) == 3
    clock.now += 100_000.0
    taken = [timers.take_due(clock.now) for _ in range(4)]
    assert sorted(k for k in taken if k is not None) == [("ns0", "v"), ("ns1", "v"), ("ns2", "v")]
    assert taken[3] is None
    assert len(timers._heap) < 100  # the stale entries did not pile up


def test_workers_run_due_keys_and_outlive_a_pass_that_raises() -> None:
    ran: list[ViewKey] = []
    both = threading.Event()

    def run(key: ViewKey) -> None:
        ran.append(key)
        if key == A and ran.count(A) == 1:
            raise RuntimeError("a failing pass")  # not rescheduled by itself: retried
        if ran.count(A) >= 2 and B in ran:
            both.set()

    timers = PassTimers(run, retry_after=0.05, workers=2)
    timers.start()
    timers.schedule(A, 0.0)
    timers.schedule(B, 0.1)
    deadline = time.monotonic() + 10.0
    assert both.wait(max(0.0, deadline - time.monotonic())), ran
    assert ran[0] == A and ran.count(B) == 1
