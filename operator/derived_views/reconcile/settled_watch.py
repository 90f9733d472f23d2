"""Wake settled views when their log moves: one offsets request per cluster per poll.

A settled view (core.cadence) is off the lag poll.  Each of its passes tells
this watch what it saw of its topics; a thread asks each cluster with settled
views for its end offsets once per poll (through the shared offsets cache,
so the request also serves every other pass) and wakes, through `wake`, each
view whose topics read differently, or whose cluster cannot be asked: its
pass records the lag or the problem, and a view with lag is off the slow
timer again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from derived_views.adapters.kafka.offsets import EndOffsetsCache, OffsetsUnavailable
from derived_views.core.cadence import ViewKey, log_moved
from derived_views.core.log.kafka_connection import KafkaCluster
from derived_views.core.observed import TopicPartition

log = logging.getLogger("derived_views")


@dataclass(frozen=True)
class Seen:
    """What a settled view's last pass read of its topics."""

    cluster: KafkaCluster
    topics: frozenset[str]
    ends: Mapping[TopicPartition, int]
    missing: frozenset[str]


class SettledWatch:
    """The settled views and what each last saw; `poll` once per lag poll wakes those whose
    log moved.  `start` runs `poll` on a daemon thread."""

    def __init__(self, offsets: EndOffsetsCache, wake: Callable[[ViewKey], None],
                 interval: float) -> None:
        self.offsets, self.wake, self.interval = offsets, wake, interval
        self._seen: dict[ViewKey, Seen] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def settled(self, key: ViewKey, seen: Seen) -> None:
        with self._lock:
            self._seen[key] = seen

    def unsettled(self, key: ViewKey) -> None:
        with self._lock:
            self._seen.pop(key, None)

    def count(self) -> int:
        with self._lock:
            return len(self._seen)

    def is_settled(self, key: ViewKey) -> bool:
        with self._lock:
            return key in self._seen

    def poll(self) -> list[ViewKey]:
        """Ask each cluster once; wake (and forget, until their pass says again) the views
        whose topics moved.  Returns them."""
        with self._lock:
            views = dict(self._seen)
        by_cluster: dict[KafkaCluster, list[tuple[ViewKey, Seen]]] = {}
        for key, seen in views.items():
            by_cluster.setdefault(seen.cluster, []).append((key, seen))
        moved: list[ViewKey] = []
        for cluster, members in by_cluster.items():
            self.offsets.register(cluster, frozenset().union(*(s.topics for _, s in members)))
            try:
                reading = self.offsets.get(cluster)
            except OffsetsUnavailable as exc:
                log.info("waking %d settled views: Kafka %s cannot be asked (%s)",
                         len(members), cluster.describe(), exc)
                moved.extend(key for key, _ in members)
                continue
            for key, seen in members:
                ends, missing = reading.of(seen.topics)
                if log_moved(seen.ends, seen.missing, ends, missing):
                    moved.append(key)
        with self._lock:
            for key in moved:
                if self._seen.get(key) is views[key]:
                    del self._seen[key]
        for key in moved:
            self.wake(key)
        return moved

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="settled-watch", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.poll()
            except Exception:  # a bug here must not end the watch; the slow timer still runs
                log.exception("settled-view watch: poll failed")
