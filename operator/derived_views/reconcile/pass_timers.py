"""Each view's next timed pass, kept by a few worker threads instead of Kopf timers.

A Kopf timer keeps its view's latest body (with every `managedFields` entry)
and an asyncio task per view for as long as the view exists: at 1,000 views
that was the largest part of the operator's resident set, to remember when
to pass each view next.  Here a heap of due times keyed by view does it.  A
pass of any trigger (a spec change, a job event, the log moving, the timer
itself) sets its view's next due time, so a view just passed is not passed
again by its timer straight after.  A key is handed to one worker at a time:
it is off the heap from the moment a worker takes it until its pass sets the
next time.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable

from derived_views.core.cadence import ViewKey

log = logging.getLogger("derived_views")


class PassTimers:
    """Due times by view; `start` runs `run(key)` on `workers` daemon threads as keys fall
    due.  `run` is expected to `schedule` (or `forget`) its key again; one that raises
    before it did is tried again in `retry_after` seconds."""

    def __init__(self, run: Callable[[ViewKey], None], retry_after: float, workers: int = 4,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._run, self._retry_after = run, retry_after
        self._workers, self._clock = workers, clock
        self._due: dict[ViewKey, float] = {}
        self._heap: list[tuple[float, int, ViewKey]] = []
        self._order = itertools.count()  # ties leave the heap in scheduling order
        self._changed = threading.Condition()
        self._threads: list[threading.Thread] = []

    def schedule(self, key: ViewKey, delay: float) -> None:
        """Pass `key` in `delay` seconds, replacing any time set before."""
        at = self._clock() + delay
        with self._changed:
            self._due[key] = at
            heapq.heappush(self._heap, (at, next(self._order), key))
            self._changed.notify()

    def forget(self, key: ViewKey) -> None:
        with self._changed:
            self._due.pop(key, None)

    def due_at(self, key: ViewKey) -> float | None:
        with self._changed:
            return self._due.get(key)

    def __len__(self) -> int:
        with self._changed:
            return len(self._due)

    def take_due(self, now: float) -> ViewKey | None:
        """The earliest key due by `now`, off the timers until scheduled again; None if none."""
        with self._changed:
            return self._pop_due(now)

    def _pop_due(self, now: float) -> ViewKey | None:
        self._drop_stale()
        if not self._heap or self._heap[0][0] > now:
            return None
        _at, _n, key = heapq.heappop(self._heap)
        del self._due[key]
        return key

    def _drop_stale(self) -> None:
        """Heap entries a later `schedule` or `forget` replaced are dropped when they surface."""
        while self._heap and self._due.get(self._heap[0][2]) != self._heap[0][0]:
            heapq.heappop(self._heap)
        if len(self._heap) > 4 * len(self._due) + 64:  # many replaced: rebuild, stay small
            self._heap = [(at, next(self._order), key) for key, at in self._due.items()]
            heapq.heapify(self._heap)

    def _next(self) -> ViewKey:
        with self._changed:
            while True:
                now = self._clock()
                key = self._pop_due(now)
                if key is not None:
                    return key
                self._changed.wait(self._heap[0][0] - now if self._heap else None)

    def _work(self) -> None:
        while True:
            key = self._next()
            try:
                self._run(key)
            except Exception:  # one view's failure must not stop the timers of the others
                log.exception("%s/%s: timed pass failed", *key)
                if self.due_at(key) is None:
                    self.schedule(key, self._retry_after)

    def start(self) -> None:
        if self._threads:
            return
        for i in range(self._workers):
            thread = threading.Thread(target=self._work, name=f"pass-timer-{i}", daemon=True)
            self._threads.append(thread)
            thread.start()
