"""Cutover checks off the pass threads: a few workers of their own, one run per view at a time.

Kopf runs every view's pass on a handful of shared threads. A view's checks are up to 32
team-written queries of up to an hour each: run inside the pass, one slow view held a
pass thread and every other view's pass queued behind it. So a pass only submits a due
run and goes on; a later pass of the view takes the finished measurements (core.cutover.checks
judges them). At most `concurrency` runs measure at once across all views, and each run
has a time budget for all its queries together (the adapter cuts the last query's
timeout to what is left and reports the budget by name).

Workers are daemon threads: a run in flight never holds up the operator's exit (its
connection goes with the process, and its result was never recorded).
"""

from __future__ import annotations

import datetime as dt
import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, replace

from derived_views.core.cadence import ViewKey
from derived_views.core.check_runs import CheckRequest, Finished, Held, measured
from derived_views.core.cutover.checks import CouldNotRun, Measurement, judge_checks

log = logging.getLogger("derived_views")

DEFAULT_CONCURRENCY = 2
DEFAULT_BUDGET_SECONDS = 300.0

Found = dict[str, tuple[Measurement, float]]
Measure = Callable[[CheckRequest], Found]


@dataclass
class _Run:
    request: CheckRequest
    submitted_at: dt.datetime
    future: Future[Found]


def names_of(request: CheckRequest) -> list[str]:
    """The checks a run of `request` measures, in the adapters' order (check_runs.measured)."""
    return [check.name for check in measured(request)]


class CheckRunner:
    """Thread-safe: passes of different views read and plan runs at once."""

    def __init__(self, concurrency: int = DEFAULT_CONCURRENCY,
                 budget_seconds: float = DEFAULT_BUDGET_SECONDS) -> None:
        if concurrency < 1:
            raise ValueError("check concurrency must be at least 1")
        self.concurrency, self.budget_seconds = concurrency, budget_seconds
        self._lock = threading.Lock()
        self._runs: dict[ViewKey, _Run] = {}
        self._queue: queue.SimpleQueue[tuple[Future[Found], Callable[[], Found]]] = (
            queue.SimpleQueue())
        self._workers: list[threading.Thread] = []

    def held(self, view: ViewKey) -> Held:
        """What the runner holds for the view, read and left as it is: a finished run (judged
        by core.cutover.checks, dated when it was submitted), or one queued or measuring."""
        with self._lock:
            run = self._runs.get(view)
            if run is None:
                return Held()
            if not run.future.done():
                return Held(in_flight=True)
        return Held(finished=Finished(run.request,
                                      judge_checks(run.request, _found(run), run.submitted_at)))

    def submit(self, view: ViewKey, request: CheckRequest, measure: Measure,
               at: dt.datetime) -> None:
        """Queue a run of `request`, dated `at`, in place of the view's finished run; nothing
        while one of the view's runs is queued or measuring (a view never has two)."""
        with self._lock:
            run = self._runs.get(view)
            if run is not None and not run.future.done():
                return
            budgeted = replace(request, budget_seconds=self.budget_seconds)
            future: Future[Found] = Future()
            self._runs[view] = _Run(budgeted, at, future)
            self._start_workers()
        self._queue.put((future, lambda: measure(budgeted)))

    def forget(self, view: ViewKey) -> None:
        """The view's run is taken, or its checks are no longer due (switched, paused,
        deleted): drop it, unless it is measuring (then a later pass forgets it when done)."""
        with self._lock:
            run = self._runs.get(view)
            if run is not None and (run.future.cancel() or run.future.done()):
                del self._runs[view]

    def in_flight(self) -> int:
        """Runs queued or measuring, for tests and metrics."""
        with self._lock:
            return sum(1 for r in self._runs.values() if not r.future.done())

    def _start_workers(self) -> None:
        while len(self._workers) < self.concurrency:
            worker = threading.Thread(target=self._work, daemon=True,
                                      name=f"dv-checks-{len(self._workers)}")
            self._workers.append(worker)
            worker.start()

    def _work(self) -> None:
        while True:
            future, call = self._queue.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(call())
            except BaseException as exc:  # a worker must survive any run's failure
                future.set_exception(exc)


def _found(run: _Run) -> Found:
    """The run's measurements; a run that failed as a whole (no connection, a Secret gone)
    is an error of each of its checks, saying why."""
    exc = run.future.exception()
    if exc is None:
        return run.future.result()
    log.warning("cutover checks of revision %s could not run: %s", run.request.revision, exc)
    cause = CouldNotRun(f"could not run: {str(exc).strip() or type(exc).__name__}")
    return {name: (cause, 0.0) for name in names_of(run.request)}
