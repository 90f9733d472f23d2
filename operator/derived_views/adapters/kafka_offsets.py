"""Topic end offsets (high watermarks), one batched request per Kafka connection.

Every view of a cluster is served by the same fetch: the operator asks for the
union of all views' topics once per poll interval instead of once per view.
A topic the cluster lacks is reported as missing without failing the others;
a cluster that cannot be reached (or refuses the credentials) is retried with
capped exponential backoff, and meanwhile answers at once with its last error.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from derived_views.core.kafka_client import KafkaCluster

TopicEnds = dict[tuple[str, int], int]
TIMEOUT_SECONDS = 5.0


class OffsetsUnavailable(Exception):
    """The cluster could not be asked (unreachable, credentials refused, unknown topic)."""


@dataclass(frozen=True)
class Fetched:
    """One batched answer: ends of the topics that resolved, and those the cluster lacks."""

    ends: Mapping[tuple[str, int], int]
    missing: frozenset[str] = frozenset()


@dataclass(frozen=True)
class OffsetsReading:
    """A fetch as the cache keeps it; `fetched_at` is the monotonic time the fetch started,
    so every offset in it was at least that fresh."""

    ends: Mapping[tuple[str, int], int]
    missing: frozenset[str]
    fetched_at: float
    topics: frozenset[str] = frozenset()  # what was asked for

    def of(self, topics: Collection[str]) -> tuple[TopicEnds, frozenset[str]]:
        """The ends and the missing topics among `topics`."""
        return ({tp: o for tp, o in self.ends.items() if tp[0] in topics},
                self.missing & frozenset(topics))


def _first_error(errors: list[KafkaError]) -> KafkaError | None:
    """The most telling error librdkafka reported: authentication beats transport noise."""
    for err in errors:
        if err.code() in (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED,
                          KafkaError._SSL, KafkaError.TOPIC_AUTHORIZATION_FAILED):
            return err
    return errors[0] if errors else None


def _why(cluster: KafkaCluster, exc: KafkaException, errors: list[KafkaError]) -> str:
    err = _first_error(errors) or exc.args[0]
    text = err.str() if isinstance(err, KafkaError) else str(err)
    return f"{cluster.describe()}: {text}"


def read_end_offsets(cluster: KafkaCluster, topics: Iterable[str], *,
                     timeout: float = TIMEOUT_SECONDS) -> Fetched:
    """High watermarks of `topics` in one metadata + one offsets request.

    Topics the cluster does not have are returned as missing; a topic whose
    metadata or any partition errs is left out entirely (a partial topic would
    understate its lag).  Raises OffsetsUnavailable when the cluster cannot be asked.
    """
    wanted = sorted(set(topics))
    if not wanted:
        return Fetched({})
    errors: list[KafkaError] = []
    millis = int(timeout * 1000)
    try:
        consumer = Consumer({
            **cluster.config(), "group.id": "derived-views-offsets", "enable.auto.commit": False,
            "log_level": 0, "socket.timeout.ms": millis,
            "socket.connection.setup.timeout.ms": millis, "error_cb": errors.append})
    except KafkaException as exc:  # librdkafka refused the settings (e.g. an unreadable CA)
        raise OffsetsUnavailable(_why(cluster, exc, errors)) from None
    try:
        try:
            md = consumer.list_topics(timeout=timeout)
        except KafkaException as exc:
            consumer.poll(0)  # serve queued error events (the authentication failure) to error_cb
            raise OffsetsUnavailable(_why(cluster, exc, errors)) from None
        partitions: list[TopicPartition] = []
        missing = set()
        for topic in wanted:
            meta = md.topics.get(topic)
            if meta is None or (meta.error is not None
                                and meta.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
                missing.add(topic)
            elif meta.error is None:
                partitions += [TopicPartition(topic, p, -1) for p in sorted(meta.partitions)]
        if not partitions:
            return Fetched({}, frozenset(missing))
        # OFFSET_END (-1) resolves to the high watermark of every partition in one request.
        try:
            resolved = consumer.offsets_for_times(partitions, timeout=timeout)
        except KafkaException as exc:
            consumer.poll(0)
            raise OffsetsUnavailable(_why(cluster, exc, errors)) from None
        ends: TopicEnds = {}
        failed: set[str] = set()
        for tp in resolved:
            if tp.error is not None:
                failed.add(tp.topic)
            elif tp.offset >= 0:
                ends[(tp.topic, tp.partition)] = int(tp.offset)
            else:  # no answer for this partition: ask for its watermarks directly
                _low, high = consumer.get_watermark_offsets(tp, timeout=timeout)
                ends[(tp.topic, tp.partition)] = int(high)
        return Fetched({tp: o for tp, o in ends.items() if tp[0] not in failed},
                       frozenset(missing))
    except KafkaException as exc:
        raise OffsetsUnavailable(_why(cluster, exc, errors)) from None
    finally:
        consumer.close()


def fetch_end_offsets(bootstrap: str | KafkaCluster, topics: Iterable[str], *,
                      timeout: float = TIMEOUT_SECONDS) -> TopicEnds:
    """High watermarks of `topics`, all of which must exist (tools and tests)."""
    cluster = bootstrap if isinstance(bootstrap, KafkaCluster) else KafkaCluster.of(bootstrap)
    fetched = read_end_offsets(cluster, topics, timeout=timeout)
    if fetched.missing:
        raise OffsetsUnavailable(f"topics not found on {cluster.describe()}: "
                                 f"{', '.join(sorted(fetched.missing))}")
    return dict(fetched.ends)


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
    """End offsets per cluster connection, fetched at most once per `interval` in the normal case.

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
            self._expire(now)

    def clusters(self) -> list[KafkaCluster]:
        """The connections with registered topics (for tests and metrics)."""
        with self._lock:
            self._expire(self.clock())
            return list(self._clusters)

    def _expire(self, now: float) -> None:
        horizon = now - (self.expire_after if self.expire_after is not None
                         else 3 * self.interval)
        for cluster, state in list(self._clusters.items()):
            state.registered = {t: at for t, at in state.registered.items() if at >= horizon}
            if not state.registered and not state.fetching.locked():
                del self._clusters[cluster]

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
        """The registered topics' end offsets, fetched no earlier than `not_before` (cache clock)."""
        with self._lock:
            now = self.clock()
            self._expire(now)
            state = self._clusters.get(cluster)
            if state is None:
                return OffsetsReading({}, frozenset(), now)
            answer = self._answer(state, now, not_before)
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
            reading = OffsetsReading(dict(fetched.ends), fetched.missing, started, topics)
            with self._lock:
                state.reading, state.failures, state.retry_at = reading, 0, 0.0
            return reading
