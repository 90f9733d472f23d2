"""After a pass the handlers set the view's next timed pass and tell the settled watch,
from the outcome the pass returned (not by reading back what the pass wrote)."""

from __future__ import annotations

from typing import Any

import pytest

from derived_views import handlers
from derived_views.adapters.kafka.offsets import EndOffsetsCache, Fetched
from derived_views.core.log.kafka_connection import KafkaCluster
from derived_views.reconcile.pass_timers import PassTimers
from derived_views.reconcile.run import PassOutcome
from derived_views.reconcile.settled_watch import Seen, SettledWatch

KEY = ("shop", "orders")
SEEN = Seen(KafkaCluster.of("k:9092"), frozenset({"a"}), {("a", 0): 3}, frozenset())


@pytest.fixture
def parts(monkeypatch: pytest.MonkeyPatch) -> tuple[SettledWatch, PassTimers, list[Any]]:
    clock = [0.0]
    offsets = EndOffsetsCache(interval=5, fetch=lambda c, t: Fetched({}), clock=lambda: 0.0)
    watch = SettledWatch(offsets, lambda key: None, 5.0)
    timers = PassTimers(lambda key: None, retry_after=5.0, clock=lambda: clock[0])
    monkeypatch.setattr(handlers, "_deps", object())
    monkeypatch.setattr(handlers, "_settled", watch)
    monkeypatch.setattr(handlers, "_timers", timers)
    return watch, timers, clock


def test_a_settled_outcome_is_told_to_the_watch_and_waits_the_slow_timer(
        parts: tuple[SettledWatch, PassTimers, list[Any]]) -> None:
    watch, timers, _ = parts
    handlers._after_pass(KEY, PassOutcome(released=False, settled=SEEN))
    assert watch.is_settled(KEY)
    assert timers.due_at(KEY) == handlers.SETTINGS.polling.settled_seconds
    handlers._after_pass(KEY, PassOutcome(released=False))
    assert not watch.is_settled(KEY)
    assert timers.due_at(KEY) == handlers.SETTINGS.polling.lag_seconds


def test_a_released_view_is_forgotten_by_both(
        parts: tuple[SettledWatch, PassTimers, list[Any]]) -> None:
    watch, timers, _ = parts
    handlers._after_pass(KEY, PassOutcome(released=False, settled=SEEN))
    handlers._after_pass(KEY, PassOutcome(released=True))
    assert not watch.is_settled(KEY) and timers.due_at(KEY) is None


def test_without_an_outcome_the_timer_follows_what_the_last_pass_told(
        parts: tuple[SettledWatch, PassTimers, list[Any]]) -> None:
    watch, timers, _ = parts
    handlers._after_pass(KEY, PassOutcome(released=False, settled=SEEN))
    handlers._after_pass(KEY, None)  # the pass raised, or none ran
    assert watch.is_settled(KEY)
    assert timers.due_at(KEY) == handlers.SETTINGS.polling.settled_seconds
