"""Topic end offsets (high watermarks) and log start offsets (low watermarks), one batched
request each per Kafka connection.

Every view of a cluster is served by the same fetch: the operator asks for the
union of all views' topics once per poll interval instead of once per view.
The log starts come with the ends because retention deletes a topic's first
records: an index replayed from a log that lost its beginning lacks them.
A topic the cluster lacks is reported as missing without failing the others;
a cluster that cannot be reached (or refuses the credentials) is retried with
capped exponential backoff, and meanwhile answers at once with its last error.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    TopicPartition,
)

from derived_views.adapters.kafka.refusals import REFUSALS
from derived_views.core.log.kafka_connection import KafkaCluster

TopicEnds = dict[tuple[str, int], int]
_TIMEOUT_SECONDS = 5.0


class OffsetsUnavailable(Exception):
    """The cluster could not be asked (unreachable, credentials refused, unknown topic)."""


@dataclass(frozen=True)
class Fetched:
    """One batched answer: ends of the topics that resolved, and those the cluster lacks;
    `starts` the log starts of the partitions of `ends` (None: the fetch did not read them)."""

    ends: Mapping[tuple[str, int], int]
    missing: frozenset[str] = frozenset()
    starts: Mapping[tuple[str, int], int] | None = None


@dataclass(frozen=True)
class OffsetsReading:
    """A fetch as the cache keeps it; `fetched_at` is the monotonic time the fetch started,
    so every offset in it was at least that fresh."""

    ends: Mapping[tuple[str, int], int]
    missing: frozenset[str]
    fetched_at: float
    topics: frozenset[str] = frozenset()  # what was asked for
    starts: Mapping[tuple[str, int], int] | None = None
    """Log starts of the partitions of `ends` (None: the fetch did not read them)."""

    @functools.cached_property
    def _by_topic(self) -> Mapping[str, TopicEnds]:
        return _by_topic(self.ends)

    @functools.cached_property
    def _starts_by_topic(self) -> Mapping[str, TopicEnds] | None:
        return None if self.starts is None else _by_topic(self.starts)

    def of(self, topics: Collection[str]) -> tuple[TopicEnds, frozenset[str]]:
        """The ends and the missing topics among `topics`: looked up by topic, because the
        settled watch asks once per view of the cluster (a scan each was views x partitions)."""
        return _of(self._by_topic, topics), self.missing & frozenset(topics)

    def starts_of(self, topics: Collection[str]) -> TopicEnds | None:
        """The log starts of `topics`' partitions, as `of` gives their ends (None: not read)."""
        by_topic = self._starts_by_topic
        return None if by_topic is None else _of(by_topic, topics)


def _by_topic(offsets: Mapping[tuple[str, int], int]) -> dict[str, TopicEnds]:
    by_topic: dict[str, TopicEnds] = {}
    for tp, offset in offsets.items():
        by_topic.setdefault(tp[0], {})[tp] = offset
    return by_topic


def _of(by_topic: Mapping[str, TopicEnds], topics: Collection[str]) -> TopicEnds:
    offsets: TopicEnds = {}
    for topic in topics:
        offsets.update(by_topic.get(topic, {}))
    return offsets


def _first_error(errors: list[KafkaError]) -> KafkaError | None:
    """The most telling error librdkafka reported: authentication beats transport noise."""
    for err in errors:
        if err.code() in REFUSALS:
            return err
    return errors[0] if errors else None


def _why(cluster: KafkaCluster, exc: KafkaException, errors: list[KafkaError]) -> str:
    err = _first_error(errors) or exc.args[0]
    text = err.str() if isinstance(err, KafkaError) else str(err)
    return f"{cluster.describe()}: {text}"


LAYOUT_SECONDS = 60.0
"""How long a reader trusts the partitions it last listed: a partition added to a topic is
counted within this time, and a topic created or deleted at the next fetch."""


@dataclass
class _Connection:
    """One cluster's long-lived consumer and the partitions it last listed."""

    consumer: Consumer
    errors: list[KafkaError]
    layout: dict[str, tuple[int, ...]] = field(default_factory=dict)  # topic -> partitions
    errored: set[str] = field(default_factory=set)  # listed with an error
    listed_at: float | None = None


class OffsetsReader:
    """High and low watermarks through one long-lived consumer per cluster.

    Creating a consumer and listing every topic of the cluster on each poll
    was the largest single cost of an idle operator at 1,000 views; a reader keeps the
    consumer and the topics' partitions (`layout_seconds`) and asks only for
    the offsets of the wanted partitions, whose leaders librdkafka looks up
    for those topics alone.  A wanted topic the last listing lacked, or a
    partition that errs (a deleted or re-created topic), lists again.  Any failure closes the consumer,
    so the next fetch starts as a new client would (and reports what it meets).
    """

    def __init__(self, *, timeout: float = _TIMEOUT_SECONDS,
                 layout_seconds: float = LAYOUT_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.timeout, self.layout_seconds, self.clock = timeout, layout_seconds, clock
        self._connections: dict[KafkaCluster, _Connection] = {}
        self._lock = threading.Lock()

    def __call__(self, cluster: KafkaCluster, topics: Iterable[str]) -> Fetched:
        """High and low watermarks of `topics` (see read_end_offsets).  One caller per cluster
        at a time (EndOffsetsCache ensures it)."""
        wanted = sorted(set(topics))
        if not wanted:
            return Fetched({}, starts={})
        conn = self._connection(cluster)
        try:
            return self._read(conn, wanted)
        except KafkaException as exc:
            conn.consumer.poll(0)  # serve queued error events (the authentication failure)
            self.forget(cluster)
            raise OffsetsUnavailable(_why(cluster, exc, conn.errors)) from None

    def forget(self, cluster: KafkaCluster) -> None:
        """Close the cluster's consumer (no view reads it any more, or it failed)."""
        with self._lock:
            conn = self._connections.pop(cluster, None)
        if conn is not None:
            conn.consumer.close()

    def close(self) -> None:
        with self._lock:
            clusters = list(self._connections)
        for cluster in clusters:
            self.forget(cluster)

    def _connection(self, cluster: KafkaCluster) -> _Connection:
        with self._lock:
            conn = self._connections.get(cluster)
        if conn is not None:
            conn.consumer.poll(0)  # drain events queued since the last fetch, then drop them
            conn.errors.clear()
            return conn
        errors: list[KafkaError] = []
        millis = int(self.timeout * 1000)
        try:
            consumer = Consumer({
                **cluster.config(), "group.id": "derived-views-offsets",
                "enable.auto.commit": False, "log_level": 0, "socket.timeout.ms": millis,
                "socket.connection.setup.timeout.ms": millis, "error_cb": errors.append})
        except KafkaException as exc:  # librdkafka refused the settings (e.g. an unreadable CA)
            raise OffsetsUnavailable(_why(cluster, exc, errors)) from None
        conn = _Connection(consumer, errors)
        with self._lock:
            self._connections[cluster] = conn
        return conn

    def _list(self, conn: _Connection) -> None:
        md = conn.consumer.list_topics(timeout=self.timeout)
        conn.layout, conn.errored = {}, set()
        for topic, meta in md.topics.items():
            if meta.error is None:
                conn.layout[topic] = tuple(sorted(meta.partitions))
            elif meta.error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                conn.errored.add(topic)
        conn.listed_at = self.clock()

    def _read(self, conn: _Connection, wanted: list[str]) -> Fetched:
        if (conn.listed_at is None or self.clock() - conn.listed_at >= self.layout_seconds
                or any(t not in conn.layout for t in wanted)):
            self._list(conn)
        # Listed without error: read; listed with an error: left out; not listed: missing.
        missing = {t for t in wanted if t not in conn.layout and t not in conn.errored}
        partitions = [(t, p) for t in wanted if t in conn.layout for p in conn.layout[t]]
        if not partitions:
            return Fetched({}, frozenset(missing), {})
        failed: set[str] = set()
        # Starts first: both only grow, so a start read before its end never exceeds it.
        starts = self._resolve(conn, partitions, OFFSET_BEGINNING, failed)
        ends = self._resolve(conn, partitions, OFFSET_END, failed)
        if failed:
            conn.listed_at = None  # deleted or re-partitioned: list again next time
        # A topic that erred in either request is left out of both (a partial topic would
        # understate its lag).
        return Fetched({tp: o for tp, o in ends.items() if tp[0] not in failed},
                       frozenset(missing),
                       {tp: o for tp, o in starts.items() if tp[0] not in failed})

    def _resolve(self, conn: _Connection, partitions: list[tuple[str, int]], which: int,
                 failed: set[str]) -> TopicEnds:
        """One ListOffsets request for every partition: OFFSET_END (-1) resolves to the high
        watermark, OFFSET_BEGINNING (-2) to the log start; adds the topics that erred to
        `failed`."""
        resolved = conn.consumer.offsets_for_times(
            [TopicPartition(t, p, which) for t, p in partitions], timeout=self.timeout)
        offsets: TopicEnds = {}
        for tp in resolved:
            if tp.error is not None:
                failed.add(tp.topic)
            elif tp.offset >= 0:
                offsets[(tp.topic, tp.partition)] = int(tp.offset)
            else:  # no answer for this partition: ask for its watermarks directly
                low, high = conn.consumer.get_watermark_offsets(tp, timeout=self.timeout)
                offsets[(tp.topic, tp.partition)] = int(low if which == OFFSET_BEGINNING
                                                        else high)
        return offsets


def read_end_offsets(cluster: KafkaCluster, topics: Iterable[str], *,
                     timeout: float = _TIMEOUT_SECONDS) -> Fetched:
    """High and low watermarks of `topics` in one metadata and two offsets requests, by a
    client made for this call alone.

    Topics the cluster does not have are returned as missing; a topic whose
    metadata or any partition errs is left out entirely (a partial topic would
    understate its lag).  Raises OffsetsUnavailable when the cluster cannot be asked.
    """
    reader = OffsetsReader(timeout=timeout)
    try:
        return reader(cluster, topics)
    finally:
        reader.close()


def _read_present(bootstrap: str | KafkaCluster, topics: Iterable[str],
                  timeout: float) -> Fetched:
    """read_end_offsets for tools and tests, which name topics that must exist."""
    cluster = bootstrap if isinstance(bootstrap, KafkaCluster) else KafkaCluster.of(bootstrap)
    fetched = read_end_offsets(cluster, topics, timeout=timeout)
    if fetched.missing:
        raise OffsetsUnavailable(f"topics not found on {cluster.describe()}: "
                                 f"{', '.join(sorted(fetched.missing))}")
    return fetched


def fetch_end_offsets(bootstrap: str | KafkaCluster, topics: Iterable[str], *,
                      timeout: float = _TIMEOUT_SECONDS) -> TopicEnds:
    """High watermarks of `topics`, all of which must exist (tools and tests)."""
    return dict(_read_present(bootstrap, topics, timeout).ends)


def fetch_log_starts(bootstrap: str | KafkaCluster, topics: Iterable[str], *,
                     timeout: float = _TIMEOUT_SECONDS) -> TopicEnds:
    """Log start offsets (low watermarks) of `topics`, all of which must exist (tools and
    tests): where a reader from `earliest` begins once retention has deleted records."""
    return dict(_read_present(bootstrap, topics, timeout).starts or {})


@dataclass
class _Cluster:
    """What the cache knows of one connection."""

    registered: dict[str, float] = field(default_factory=dict)  # topic -> last registration
    reading: OffsetsReading | None = None
    failures: int = 0
    retry_at: float = 0.0
    last_error: str = ""
    fetching: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class EndOffsetsCache:
    """End offsets (and the log starts read with them) per cluster connection, fetched at most
    once per `interval` in the normal case.

    Views `register` their topics on every pass; a registration older than
    `expire_after` (3 intervals unless given) is forgotten, and with it a
    cluster no view reads any more.  It must outlast the time between two
    passes of one view: a topic forgotten in between is not in the latest
    reading when its view comes back, and that pass fetches again (at 1,000
    views, passes a minute apart, every pass did; the operator uses 10 minutes).  `get` answers from the latest reading when
    it is younger than the interval, covers every registered topic and started
    no earlier than the caller's `not_before`; otherwise one caller fetches
    the cluster's registered topics in one batch while the others wait for
    it.  A failed fetch backs off exponentially (`backoff_min` doubling up to
    `backoff_max`); until the next try `get` raises the last error at once.
    """

    interval: float
    fetch: Callable[[KafkaCluster, frozenset[str]], Fetched] = read_end_offsets
    clock: Callable[[], float] = time.monotonic
    expire_after: float | None = None
    backoff_min: float = 1.0
    backoff_max: float = 60.0
    on_fetch: Callable[[], None] | None = None
    """Called once per request made to a cluster (metrics)."""
    forget: Callable[[KafkaCluster], None] | None = None
    """Called with a cluster no view reads any more (OffsetsReader.forget closes its client)."""
    _clusters: dict[KafkaCluster, _Cluster] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def now(self) -> float:
        """The cache's clock: the time base of `not_before` and `fetched_at`."""
        return self.clock()

    def register(self, cluster: KafkaCluster, topics: Iterable[str]) -> None:
        with self._lock:
            now = self.clock()
            state = self._clusters.setdefault(cluster, _Cluster())
            for topic in topics:
                state.registered[topic] = now
            gone = self._expire(now)
        self._forget(gone)

    def clusters(self) -> list[KafkaCluster]:
        """The connections with registered topics (for tests and metrics)."""
        with self._lock:
            gone = self._expire(self.clock())
            clusters = list(self._clusters)
        self._forget(gone)
        return clusters

    def _expire(self, now: float) -> list[KafkaCluster]:
        """Forget registrations past `expire_after`; returns the clusters left with none."""
        horizon = now - (self.expire_after if self.expire_after is not None
                         else 3 * self.interval)
        gone = []
        for cluster, state in list(self._clusters.items()):
            state.registered = {t: at for t, at in state.registered.items() if at >= horizon}
            if not state.registered and not state.fetching.locked():
                del self._clusters[cluster]
                gone.append(cluster)
        return gone

    def _forget(self, gone: list[KafkaCluster]) -> None:
        if self.forget is not None:  # outside the lock: closing a client may take a moment
            for cluster in gone:
                self.forget(cluster)

    def _answer(self, state: _Cluster, now: float, not_before: float | None
                ) -> OffsetsReading | None:
        """The reading to return without fetching, None to fetch; raises while backing off."""
        reading = state.reading
        if (reading is not None and now - reading.fetched_at < self.interval
                and set(state.registered) <= reading.topics
                and (not_before is None or reading.fetched_at >= not_before)):
            return reading
        if now < state.retry_at:
            raise OffsetsUnavailable(f"{state.last_error} (next try in "
                                     f"{state.retry_at - now:.0f}s)")
        return None

    def get(self, cluster: KafkaCluster, *, not_before: float | None = None) -> OffsetsReading:
        """The registered topics' end offsets and log starts, fetched no earlier than
        `not_before` (cache clock)."""
        gone: list[KafkaCluster] = []
        try:
            with self._lock:
                now = self.clock()
                gone = self._expire(now)
                state = self._clusters.get(cluster)
                if state is None:
                    return OffsetsReading({}, frozenset(), now, starts={})
                answer = self._answer(state, now, not_before)  # raises while backing off
        finally:
            self._forget(gone)
        if answer is not None:
            return answer
        with state.fetching:  # one fetch per cluster in flight; the others reuse it
            with self._lock:
                answer = self._answer(state, self.clock(), not_before)
                topics = frozenset(state.registered)
            if answer is not None:
                return answer
            started = self.clock()
            if self.on_fetch is not None:
                self.on_fetch()
            try:
                fetched = self.fetch(cluster, topics)
            except OffsetsUnavailable as exc:
                with self._lock:
                    state.failures += 1
                    delay = min(self.backoff_max,
                                self.backoff_min * 2 ** min(state.failures - 1, 30))
                    state.retry_at = self.clock() + delay
                    state.last_error = str(exc)
                raise
            reading = OffsetsReading(
                dict(fetched.ends), fetched.missing, started, topics,
                None if fetched.starts is None else dict(fetched.starts))
            with self._lock:
                state.reading, state.failures, state.retry_at = reading, 0, 0.0
            return reading
