"""Cutover checks off the pass threads: a few workers of their own, one run per view at a time.

Kopf runs every view's pass on a handful of shared threads. A view's checks are up to 32
team-written queries of up to an hour each: run inside the pass, one slow view held a
pass thread and every other view's pass queued behind it. So a pass only submits a due
run and goes on; a later pass of the view takes the finished measurements (core.checks
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

from derived_views.core.checks import (
    KEY_SAMPLE,
    ROW_COUNT,
    CheckRequest,
    CouldNotRun,
    Measurement,
)

log = logging.getLogger("derived_views")

DEFAULT_CONCURRENCY = 2
DEFAULT_BUDGET_SECONDS = 300.0

Found = dict[str, tuple[Measurement, float]]
Measure = Callable[[CheckRequest], Found]
ViewKey = tuple[str, str]


@dataclass(frozen=True)
class Finished:
    """A run's measurements, for `checks.judge`, dated when the run was submitted: the pass
    that submitted it saw the gate holding, and a later change of the gate makes it stale
    (core.checks.current_run), never the other way round."""

    request: CheckRequest
    found: Found
    submitted_at: dt.datetime


@dataclass
class _Run:
    request: CheckRequest
    submitted_at: dt.datetime
    future: Future[Found]


def _same(a: CheckRequest, b: CheckRequest) -> bool:
    """The same checks of the same tables (the budget is the runner's, not the request's)."""
    return replace(a, budget_seconds=None) == replace(b, budget_seconds=None)


def names_of(request: CheckRequest) -> list[str]:
    """The checks a run of `request` measures, in the adapter's order."""
    checks = request.checks
    names = []
    if request.parity and checks.row_count is not None:
        names.append(ROW_COUNT)
    if request.parity and checks.key_sample is not None:
        names.append(KEY_SAMPLE)
    names.extend(a.name for a in checks.assertions)
    return names


class CheckRunner:
    """Thread-safe: passes of different views poll it at once."""

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

    def poll(self, view: ViewKey, request: CheckRequest, measure: Measure,
             now: dt.datetime) -> Finished | None:
        """The view's finished run of `request`, once; else None, after submitting a run
        unless one of the view's is queued or measuring. A finished run of other checks (or
        tables) is dropped; one still measuring is waited for, so a view never has two."""
        with self._lock:
            run = self._runs.get(view)
            if run is not None and not run.future.done():
                return None
            if run is not None:
                del self._runs[view]
                if _same(run.request, request):
                    return Finished(run.request, _found(run), run.submitted_at)
            budgeted = replace(request, budget_seconds=self.budget_seconds)
            future: Future[Found] = Future()
            self._runs[view] = _Run(budgeted, now, future)
            self._start_workers()
        self._queue.put((future, lambda: measure(budgeted)))
        return None

    def forget(self, view: ViewKey) -> None:
        """The view's checks are no longer due (switched, paused, deleted): drop its run,
        unless it is measuring (then the next poll drops it when done)."""
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
