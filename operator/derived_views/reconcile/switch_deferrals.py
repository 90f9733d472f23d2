"""Switches the sink deferred, remembered until the view's next observation.

A deferred switch (core.cutover.monotonic: the candidate stayed behind the serving index while the
sink held the serving job's commits) ends its pass before the status is written, since the
status would say the switch happened. The next pass observes the deferral (and forgets it),
so its plan holds the promotion for that one pass and writes why; the pass after tries
again. Kept in memory: after a restart the first pass simply tries again.
"""

from __future__ import annotations

import threading

from derived_views.core.cadence import ViewKey


class SwitchDeferrals:
    """(revision, why) of the last deferred switch per view, taken by its next observation."""

    def __init__(self) -> None:
        self._deferred: dict[ViewKey, tuple[str, str]] = {}
        self._lock = threading.Lock()

    def note(self, key: ViewKey, revision: str, why: str) -> None:
        with self._lock:
            self._deferred[key] = (revision, why)

    def take(self, key: ViewKey) -> tuple[str, str] | None:
        with self._lock:
            return self._deferred.pop(key, None)
