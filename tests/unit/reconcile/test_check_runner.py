"""check_runner: cutover checks measured off the pass threads, at most `concurrency` at once,
one run per view, a finished run held (judged) until a pass takes or forgets it. Measurements are stand-ins
that block on events, so the tests decide when a run finishes (no sleeps: every wait is
for a condition, with a deadline)."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable

import pytest

from derived_views.api.spec import CutoverChecks
from derived_views.api.status import CheckOutcome
from derived_views.core.check_runs import CheckRequest, Held
from derived_views.core.cutover.checks import AssertionAnswer, Measurement
from derived_views.reconcile.check_runner import CheckRunner

T0 = dt.datetime(2026, 11, 26, 12, tzinfo=dt.UTC)
Found = dict[str, tuple[Measurement, float]]


def request(index: str = "orders__cand000001", sql: str = "SELECT 1 FROM {index} WHERE false"
            ) -> CheckRequest:
    checks = CutoverChecks.model_validate({"assertions": [{"name": "a", "sql": sql}]})
    return CheckRequest(revision="cand000001", schema="shop", index=index,
                        active_index="orders__actv000001", primary_key=("k",), same_key=True,
                        checks=checks, checks_hash="h")


def wait_until(condition: Callable[[], bool], what: str, seconds: float = 10.0) -> None:
    deadline = threading.Event()
    timer = threading.Timer(seconds, deadline.set)
    timer.start()
    try:
        while not condition():
            if deadline.wait(0.01):
                raise AssertionError(f"not within {seconds}s: {what}")
    finally:
        timer.cancel()


class Gate:
    """A measurement that blocks until released, and counts what ran."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.release = threading.Event()
        self.started: list[CheckRequest] = []
        self.running = 0
        self.most = 0

    def __call__(self, req: CheckRequest) -> Found:
        with self.lock:
            self.started.append(req)
            self.running += 1
            self.most = max(self.most, self.running)
        self.release.wait(30)
        with self.lock:
            self.running -= 1
        return {"a": (AssertionAnswer(rows=0), 0.25)}


def test_a_pass_submits_and_goes_on_and_a_later_pass_reads_the_judged_run() -> None:
    runner, gate = CheckRunner(2, budget_seconds=60), Gate()
    view = ("ns", "orders")
    assert runner.held(view) == Held()
    runner.submit(view, request(), gate, T0)  # returns while the run blocks
    wait_until(lambda: len(gate.started) == 1, "the run started")
    assert gate.started[0].budget_seconds == 60  # the runner's budget goes with it
    assert runner.held(view) == Held(in_flight=True)
    runner.submit(view, request(), gate, T0 + dt.timedelta(seconds=5))
    gate.release.set()
    wait_until(lambda: runner.in_flight() == 0, "the run finished")
    assert len(gate.started) == 1  # no second run of the view while one measured
    held = runner.held(view)
    assert held.finished is not None and not held.in_flight
    assert held.finished.request == gate.started[0]
    run = held.finished.run
    assert run.checked_at == T0  # dated when submitted: that pass saw the gate holding
    assert [(r.name, r.outcome, r.seconds) for r in run.results] == [
        ("a", CheckOutcome.Passed, 0.25)]
    assert runner.held(view) == held  # reading leaves it
    runner.forget(view)  # taken
    assert runner.held(view) == Held()


def test_at_most_concurrency_runs_measure_at_once() -> None:
    runner, gate = CheckRunner(2), Gate()
    for i in range(5):
        runner.submit(("ns", f"v{i}"), request(), gate, T0)
    wait_until(lambda: len(gate.started) == 2, "two runs started")
    assert runner.in_flight() == 5
    gate.release.set()
    wait_until(lambda: runner.in_flight() == 0, "all runs finished")
    assert len(gate.started) == 5 and gate.most == 2


def test_a_run_that_fails_as_a_whole_is_an_error_of_each_check() -> None:
    runner = CheckRunner(1)

    def no_connection(req: CheckRequest) -> Found:
        raise ConnectionError("all 4 connections to this sink are busy")

    view = ("ns", "orders")
    runner.submit(view, request(), no_connection, T0)
    wait_until(lambda: runner.in_flight() == 0, "the run failed")
    held = runner.held(view)
    assert held.finished is not None
    assert [(r.name, r.outcome, r.observed) for r in held.finished.run.results] == [
        ("a", CheckOutcome.Error, "could not run: all 4 connections to this sink are busy")]


def test_a_new_run_replaces_a_finished_one() -> None:
    runner, gate = CheckRunner(1), Gate()
    gate.release.set()
    view = ("ns", "orders")
    runner.submit(view, request(sql="SELECT 1 FROM {index}"), gate, T0)
    wait_until(lambda: runner.in_flight() == 0, "the first run finished")
    changed = request(sql="SELECT 2 FROM {index}")
    runner.submit(view, changed, gate, T0)
    wait_until(lambda: runner.in_flight() == 0, "the second run finished")
    held = runner.held(view)
    assert held.finished is not None and held.finished.request.checks == changed.checks


def test_forget_drops_a_queued_run_before_it_measures() -> None:
    runner, gate = CheckRunner(1), Gate()
    runner.submit(("ns", "slow"), request(), gate, T0)
    wait_until(lambda: len(gate.started) == 1, "the slow run started")
    runner.submit(("ns", "paused"), request(index="orders__othr000001"), gate, T0)
    runner.forget(("ns", "paused"))  # no longer due: queued, so it never measures
    runner.forget(("ns", "slow"))  # measuring: kept, forgotten by a later pass when done
    gate.release.set()
    wait_until(lambda: runner.in_flight() == 0, "the slow run finished")
    assert [r.index for r in gate.started] == ["orders__cand000001"]
    assert runner.held(("ns", "paused")) == Held()
    assert runner.held(("ns", "slow")).finished is not None


def test_the_operator_settings_bound_the_runner() -> None:
    from derived_views.process.environment import SettingsError, from_env

    base = {"DV_CHECKPOINT_BASE": "s3a://bucket/checkpoints"}
    assert (from_env(base).checks.concurrency, from_env(base).checks.budget_seconds) == (2, 300.0)
    tuned = from_env({**base, "DV_CHECK_CONCURRENCY": "3", "DV_CHECK_BUDGET_SECONDS": "90"})
    assert (tuned.checks.concurrency, tuned.checks.budget_seconds) == (3, 90.0)
    for name, value in (("DV_CHECK_CONCURRENCY", "0"), ("DV_CHECK_BUDGET_SECONDS", "0.5")):
        with pytest.raises(SettingsError, match=f"^{name}='{value}' must be at least"):
            from_env({**base, name: value})
