"""Helpers of the operator e2e tests: a view handle and a reader of the alias.

The reader is the zero-downtime witness: it queries the alias in a loop on its
own connection and records every error, its worst stall, and the moment the
alias's columns change (how it sees a cutover, independently of the operator).
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import psycopg
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from dvstack.waiting import wait_for

G, V, P = "derivedviews.io", "v1alpha1", "derivedviews"


def aggregate(events: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per customer: orders, revenue, biggest and smallest amount — the test's own arithmetic."""
    out: dict[str, dict[str, float]] = defaultdict(dict)
    for e in events:
        row = out[e["customer_id"]]
        row["orders"] = row.get("orders", 0) + 1
        row["revenue"] = row.get("revenue", 0.0) + e["amount"]
        row["biggest"] = max(row.get("biggest", e["amount"]), e["amount"])
        row["smallest"] = min(row.get("smallest", e["amount"]), e["amount"])
    return dict(out)


def expected_rows(events: list[dict[str, Any]], columns: list[str]) -> dict[str, tuple[Any, ...]]:
    return {c: tuple(round(v[k], 6) for k in columns) for c, v in aggregate(events).items()}


def alias_rows(dsn: str, table: str, columns: list[str]) -> dict[str, tuple[Any, ...]]:
    cols = ", ".join(f'"{c}"' for c in columns)
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(f'SELECT customer_id, {cols} FROM "{table}"').fetchall()
    return {r[0]: tuple(round(float(x), 6) for x in r[1:]) for r in rows}


def parse_time(value: str) -> dt.datetime:
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))


@dataclass
class ViewHandle:
    """One DerivedView in the API server, read fresh on every call."""

    custom: Any
    namespace: str
    name: str

    def get(self) -> dict[str, Any]:
        obj: dict[str, Any] = self.custom.get_namespaced_custom_object(
            G, V, self.namespace, P, self.name)
        return obj

    def status(self) -> dict[str, Any]:
        return dict(self.get().get("status") or {})

    def condition(self, type_: str) -> dict[str, Any]:
        return next((c for c in self.status().get("conditions", []) if c["type"] == type_), {})

    def ready(self) -> bool:
        return self.condition("Ready").get("status") == "True"

    def active(self) -> str | None:
        return (self.status().get("active") or {}).get("revision")

    def phases(self) -> dict[str, str]:
        return {r["revision"]: r["phase"] for r in self.status().get("revisions", [])}

    def record(self, revision: str) -> dict[str, Any]:
        return next(r for r in self.status()["revisions"] if r["revision"] == revision)

    def patch(self, body: dict[str, Any]) -> None:
        self.custom.patch_namespaced_custom_object(G, V, self.namespace, P, self.name, body)

    def wait_serving_new(self, old: str | None, what: str, timeout: float = 300) -> str:
        """Wait until a revision other than `old` serves and the view is Ready; return it."""
        wait_for(lambda: self.active() not in (None, old) and self.ready(),
                 timeout=timeout, interval=1, what=what)
        revision = self.active()
        assert revision is not None
        return revision

    def gone(self) -> bool:
        try:
            self.get()
        except ApiException as exc:
            return exc.status == 404
        return False

    def events(self, core: client.CoreV1Api) -> list[tuple[str, str, str]]:
        items = core.list_namespaced_event(
            self.namespace, field_selector=f"involvedObject.name={self.name}").items
        return [(e.type, e.reason, e.message) for e in items]


@dataclass
class AliasReader:
    """Queries the alias in a loop; the zero-downtime witness."""

    dsn: str
    table: str
    errors: list[str] = field(default_factory=list)
    worst_stall: float = 0.0
    queries: int = 0
    column_changes: list[tuple[float, tuple[str, ...]]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _run(self) -> None:
        columns: tuple[str, ...] = ()
        # No server-side prepared statements: a prepared `SELECT *` cannot survive a cutover
        # that changes the alias's columns (PostgreSQL: "cached plan must not change result
        # type"); the README tells readers to name their columns for that reason.
        with psycopg.connect(self.dsn, autocommit=True, prepare_threshold=None) as conn:
            while not self._stop.is_set():
                started = time.perf_counter()
                try:
                    cur = conn.execute(f'SELECT * FROM "{self.table}" LIMIT 1')
                    cur.fetchall()
                    seen = tuple(d.name for d in cur.description or ())
                    if seen != columns:
                        columns = seen
                        self.column_changes.append((time.time(), seen))
                except psycopg.Error as exc:
                    self.errors.append(repr(exc))
                self.queries += 1
                self.worst_stall = max(self.worst_stall, time.perf_counter() - started)

    def start(self) -> AliasReader:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def first_seen(self, column: str, after: float) -> float | None:
        """When the reader first saw `column` in the alias after time `after`."""
        return next((t for t, cols in self.column_changes if t >= after and column in cols), None)


@dataclass
class LiveProducer:
    """Order events into a topic at a fixed rate from its own thread: the live traffic of an e2e.

    Pacing waits on a schedule (`Event.wait` until the next slot), not on other components;
    every event it produced, acknowledged or not, is kept for the test's recomputation, and
    any delivery failure is an error the test reports.
    """

    bootstrap: str
    topic: str
    rate: float
    seed: int = 101
    events: list[dict[str, Any]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    started_at: float = 0.0
    stopped_at: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _run(self) -> None:
        from confluent_kafka import Producer

        from dvstack import replay

        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5,
                             "enable.idempotence": True, "log_level": 3})

        def on_delivery(err: Any, _msg: Any) -> None:
            if err is not None:
                self.failures.append(str(err))

        # a stream of distinct events: another seed and a start time after any batch's
        source = iter(replay.make_orders(2_000_000, seed=self.seed,
                                         start_ms=1_800_000_000_000))
        interval = 1.0 / self.rate
        self.started_at = time.monotonic()
        sent = 0
        while not self._stop.is_set():
            due = self.started_at + sent * interval
            if self._stop.wait(max(due - time.monotonic(), 0)):
                break
            event = next(source)
            producer.produce(self.topic, key=event["customer_id"].encode(),
                             value=json.dumps(event).encode(), on_delivery=on_delivery)
            with self._lock:
                self.events.append(event)
            sent += 1
            producer.poll(0)
        left = producer.flush(60)
        if left:
            self.failures.append(f"{left} events unacknowledged at stop")
        self.stopped_at = time.monotonic()

    def start(self) -> LiveProducer:
        self._thread = threading.Thread(target=self._run, daemon=True, name="live-producer")
        self._thread.start()
        return self

    def count(self) -> int:
        with self._lock:
            return len(self.events)

    def stop(self) -> list[dict[str, Any]]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=90)
        return list(self.events)

    def achieved_rate(self) -> float:
        return len(self.events) / max(self.stopped_at - self.started_at, 1e-9)


def wait_alias_equals(dsn: str, table: str, events: list[dict[str, Any]], columns: list[str],
                      what: str, timeout: float = 180) -> None:
    """Wait until the alias equals the test's recomputation of `events`.

    Ready means the served index is within the cutover gate of the log (seconds behind at
    most, by default), not that it holds the last record yet: it gets there by itself.
    """
    expected = expected_rows(events, columns)
    wait_for(lambda: alias_rows(dsn, table, columns) == expected, timeout=timeout, interval=1,
             what=what)
