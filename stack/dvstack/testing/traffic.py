"""Live traffic on the local stack: a producer writing at a fixed rate and a reader on an alias.

The demo shows a migration under traffic with them, and the e2e tests use them as the
zero-downtime witness: the reader queries the alias in a loop on its own connection and
records every error, its worst stall, and the moment the alias's columns change (how it
sees a cutover, independently of the operator); the producer keeps every event it sent for
the caller's own recomputation.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Self

import psycopg

READER_PAUSE = 0.02
"""Seconds a reader rests between queries: about fifty queries a second, the pace of a busy
application, so a cutover's moment is still seen to within tens of milliseconds. A loop
without rest costs a core of the two the stack and its Spark jobs share, and slows what it
witnesses; at a hundred a second one reader took 4.5 % of a core (its client 2.7, the
database 1.75), and the suite runs several at once."""


class Background:
    """A loop (`_run`, which watches `_stop`) on a daemon thread: `start` runs it, `stop`
    ends it and waits for the thread; a stopped loop can be started again."""

    _stop: threading.Event
    _thread: threading.Thread | None

    def _run(self) -> None:
        raise NotImplementedError

    def start(self) -> Self:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, daemon=True, name=type(self).__name__)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)


RECONNECT_PAUSE = 0.5
"""Seconds a reader rests after a failed query before it reconnects: a retry pace, not a
synchronisation."""


def query_loop(stop: threading.Event, dsn: str, errors: list[str],
               query: Callable[[psycopg.Connection[Any]], None], pause: float,
               took: Callable[[float], None] | None = None) -> None:
    """Run `query` on a connection of its own until `stop`, resting `pause` between runs. A
    failed query (or connection) is recorded in `errors` and the loop reconnects, so a reader
    keeps witnessing through a restart of the database itself; `took` hears each run's time.

    No server-side prepared statements: a prepared `SELECT *` cannot survive a cutover that
    changes the alias's columns (PostgreSQL: "cached plan must not change result type"); the
    README tells readers to name their columns for that reason."""
    conn: psycopg.Connection[Any] | None = None
    while not stop.is_set():
        started = time.perf_counter()
        try:
            if conn is None:
                conn = psycopg.connect(dsn, autocommit=True, prepare_threshold=None,
                                       connect_timeout=5)
            query(conn)
        except psycopg.Error as exc:
            errors.append(repr(exc))
            if conn is not None:
                conn.close()
                conn = None
            stop.wait(RECONNECT_PAUSE)
        if took is not None:
            took(time.perf_counter() - started)
        stop.wait(pause)
    if conn is not None:
        conn.close()


@dataclass
class AliasReader(Background):
    """Queries the alias in a loop on its own connection; the zero-downtime witness. Every
    failed query (or connection) is an error; after one it reconnects, so it keeps
    witnessing through a restart of the database itself."""

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

        def query(conn: psycopg.Connection[Any]) -> None:
            nonlocal columns
            cur = conn.execute(f'SELECT * FROM "{self.table}" LIMIT 1')
            cur.fetchall()
            seen = tuple(d.name for d in cur.description or ())
            if seen != columns:
                columns = seen
                self.column_changes.append((time.time(), seen))

        def took(seconds: float) -> None:
            self.queries += 1
            self.worst_stall = max(self.worst_stall, seconds)

        query_loop(self._stop, self.dsn, self.errors, query, READER_PAUSE, took)

    def first_seen(self, column: str, after: float) -> float | None:
        """When the reader first saw `column` in the alias after time `after`."""
        return next((t for t, cols in self.column_changes if t >= after and column in cols), None)


@dataclass
class RowCountReader(Background):
    """Counts the alias's rows in a loop from before it exists: the witness that a first
    revision is not shown before its backlog is in. A query before the alias exists fails
    (`errors`, expected); every answer after is in `counts`."""

    dsn: str
    table: str
    counts: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _run(self) -> None:
        def query(conn: psycopg.Connection[Any]) -> None:
            row = conn.execute(f'SELECT count(*) FROM "{self.table}"').fetchone()
            self.counts.append(int(row[0]) if row is not None else -1)

        query_loop(self._stop, self.dsn, self.errors, query, READER_PAUSE)


WITNESS_PAUSE = 0.05
"""Seconds a monotonic witness rests between full reads of the alias (each reads every row)."""


@dataclass
class KeyHistory:
    """Per key, every value a reader saw, in the order it saw them (repeats folded), and the
    reads that went back: the record of a monotonic-reads witness."""

    seen: dict[str, list[float]] = field(default_factory=dict)
    reads: int = 0

    def record(self, rows: list[tuple[Any, Any]]) -> None:
        for key, value in rows:
            history = self.seen.setdefault(str(key), [])
            if not history or history[-1] != float(value):
                history.append(float(value))
        self.reads += 1

    def regressions(self) -> dict[str, list[float]]:
        """Keys whose values went down at some read, with their whole history: for a count
        per key (more of the key's records in the prefix, a larger count) a value below an
        earlier one is an older state of the log."""
        return {key: values for key, values in self.seen.items()
                if any(b < a for a, b in itertools.pairwise(values))}


@dataclass
class MonotonicWitness(Background):
    """Reads every (key, value) row of an alias in a loop on its own connection: the witness of
    monotonic reads across a cutover (`history.regressions()` must stay empty). Errors are
    recorded and the reader reconnects, as AliasReader does."""

    dsn: str
    table: str
    key: str
    value: str
    history: KeyHistory = field(default_factory=KeyHistory)
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _run(self) -> None:
        query = f'SELECT "{self.key}", "{self.value}" FROM "{self.table}"'
        query_loop(self._stop, self.dsn, self.errors,
                   lambda conn: self.history.record(conn.execute(query).fetchall()),
                   WITNESS_PAUSE)


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

        from dvstack.testing import replay

        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5,
                             "enable.idempotence": True, "log_level": 3})

        def on_delivery(err: Any, _msg: Any) -> None:
            if err is not None:
                self.failures.append(str(err))

        # a stream of distinct events: another seed and a start time after any batch's
        source = replay.iter_orders(seed=self.seed, start_ms=1_800_000_000_000)
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


@dataclass
class SearchAliasReader(Background):
    """Searches an OpenSearch alias in a loop: the zero-downtime witness of an OpenSearch sink.

    Records every error, the worst stall, and when the index answering for the alias changes
    (`_index` of the hits: how a reader sees a cutover, independently of the operator).
    """

    url: str
    alias: str
    errors: list[str] = field(default_factory=list)
    worst_stall: float = 0.0
    queries: int = 0
    index_changes: list[tuple[float, str]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _run(self) -> None:
        from opensearchpy import OpenSearch
        from opensearchpy.exceptions import OpenSearchException

        client = OpenSearch(hosts=[self.url], timeout=30, max_retries=0)
        serving = ""
        while not self._stop.is_set():
            started = time.perf_counter()
            try:
                hits = client.search(index=self.alias, body={"size": 1})["hits"]["hits"]
                index = str(hits[0]["_index"]) if hits else ""
                if index and index != serving:
                    serving = index
                    self.index_changes.append((time.time(), index))
            except OpenSearchException as exc:
                self.errors.append(repr(exc))
            self.queries += 1
            self.worst_stall = max(self.worst_stall, time.perf_counter() - started)
            self._stop.wait(READER_PAUSE)
        client.close()

    def first_seen(self, index: str, after: float) -> float | None:
        """When the reader first got hits from `index` after time `after`."""
        return next((t for t, seen in self.index_changes if t >= after and seen == index), None)


@dataclass
class SearchMonotonicWitness(Background):
    """MonotonicWitness on an OpenSearch alias: every (key, value) the alias answers with, read
    in a loop (as readers see it: no refresh of its own). Errors are recorded, not raised."""

    url: str
    alias: str
    key: str
    value: str
    history: KeyHistory = field(default_factory=KeyHistory)
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _run(self) -> None:
        from opensearchpy import OpenSearch
        from opensearchpy.exceptions import OpenSearchException

        client = OpenSearch(hosts=[self.url], timeout=30, max_retries=0)
        body = {"size": 10_000, "_source": [self.key, self.value], "query": {"match_all": {}}}
        while not self._stop.is_set():
            try:
                hits = client.search(index=self.alias, body=body)["hits"]["hits"]
                self.history.record([(h["_source"][self.key], h["_source"][self.value])
                                     for h in hits])
            except OpenSearchException as exc:
                self.errors.append(repr(exc))
            self._stop.wait(WITNESS_PAUSE)
        client.close()
