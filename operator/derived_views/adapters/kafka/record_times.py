"""Kafka timestamps of the records at given offsets: what staleness is measured from.

The gate asks how old the oldest record an index lacks is (core.log.staleness); that record is
the one at the index's committed offset, so its timestamp is read from the log itself: one
consumer per cluster assigns the wanted partitions at those offsets and takes the first
record of each. A record's timestamp never changes, so every answer is cached: a view whose
index has not moved is not read again, and only a pass that finds a new committed offset
behind the log's end costs a fetch. Passes of many views that miss the cache at once (an
operator starting with a thousand views) share readings: what they ask for while one reading
is under way is gathered into the next, which one of them reads for all.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field

from confluent_kafka import (
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    KafkaException,
    TopicPartition,
)

from derived_views.adapters.kafka.refusals import REFUSALS
from derived_views.core.log.kafka_connection import KafkaCluster

Wanted = tuple[tuple[str, int], int]
"""((topic, partition), offset)."""

_TIMEOUT_SECONDS = 5.0
FEW_TOPICS = 3
"""Up to this many topics in a reading have their metadata fetched by name (see _learn)."""
CACHE_SIZE = 100_000
"""Cached answers (about 200 bytes each) across all clusters, least recently used first out."""


class RecordTimesUnavailable(Exception):
    """The cluster could not be read in time; the message carries no credentials."""


@dataclass(eq=False)
class _Reading:
    """The pairs some passes wait for, read in one go; `done` once `read` or `error` is set."""

    pairs: set[Wanted] = field(default_factory=set)
    read: dict[Wanted, dt.datetime | None] = field(default_factory=dict)
    error: str | None = None
    done: bool = False


@dataclass(eq=False)
class _Readings:
    """One cluster's readings: at most one under way, and the next one gathering pairs."""

    changed: threading.Condition = field(default_factory=threading.Condition)
    under_way: bool = False
    gathering: _Reading | None = None


class RecordTimesReader:
    """`reader(cluster, wanted)`: for each wanted (partition, offset), the timestamp of the first
    record at or after it (None: there is none yet); a pair it could not read in time is absent.

    Raises RecordTimesUnavailable when the cluster refuses or cannot be reached (the caller
    treats staleness as unknown). One reading per cluster at a time: a pass that misses the
    cache while another reads adds its pairs to the next reading, and the first of the passes
    waiting on that one reads it for all of them.
    """

    def __init__(self, *, timeout: float = _TIMEOUT_SECONDS, cache_size: int = CACHE_SIZE) -> None:
        self.timeout, self.cache_size = timeout, cache_size
        self._cache: OrderedDict[tuple[KafkaCluster, Wanted], dt.datetime] = OrderedDict()
        self._consumers: dict[KafkaCluster, Consumer] = {}
        self._readings: dict[KafkaCluster, _Readings] = {}
        self._lock = threading.Lock()

    def __call__(self, cluster: KafkaCluster, wanted: Iterable[Wanted]
                 ) -> dict[Wanted, dt.datetime | None]:
        found: dict[Wanted, dt.datetime | None] = {}
        unread: list[Wanted] = []
        with self._lock:
            for pair in sorted(set(wanted)):
                cached = self._cache.get((cluster, pair))
                if cached is None:
                    unread.append(pair)
                else:
                    self._cache.move_to_end((cluster, pair))
                    found[pair] = cached
            readings = self._readings.setdefault(cluster, _Readings())
        if not unread:
            return found
        reading = self._join(cluster, readings, unread)
        if reading.error is not None:
            raise RecordTimesUnavailable(reading.error)
        return found | {pair: reading.read[pair] for pair in unread if pair in reading.read}

    def _join(self, cluster: KafkaCluster, readings: _Readings, unread: list[Wanted]
              ) -> _Reading:
        """Add `unread` to the reading being gathered and wait for it, reading it here if no
        other pass is reading. A reading that does not end in time (another pass's reading
        plus this one's) comes back empty: those pairs are unknown this pass."""
        deadline = time.monotonic() + 2 * self.timeout + 1
        with readings.changed:
            reading = readings.gathering = readings.gathering or _Reading()
            reading.pairs.update(unread)
            while not reading.done:
                if not readings.under_way and readings.gathering is reading:
                    readings.under_way, readings.gathering = True, None
                    break
                if not readings.changed.wait(deadline - time.monotonic()):
                    return _Reading(done=True)
            else:
                return reading
        try:
            reading.read = self._read(cluster, sorted(reading.pairs))
            self._keep(cluster, reading.read)
        except RecordTimesUnavailable as exc:
            reading.error = str(exc)
        finally:
            with readings.changed:
                readings.under_way, reading.done = False, True
                readings.changed.notify_all()
        return reading

    def _keep(self, cluster: KafkaCluster, read: dict[Wanted, dt.datetime | None]) -> None:
        with self._lock:
            for pair, stamp in read.items():
                if stamp is not None:  # "none yet" changes as records arrive: never cached
                    self._cache[(cluster, pair)] = stamp
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)

    def forget(self, cluster: KafkaCluster) -> None:
        """Close the cluster's consumer (it failed, or no view reads it any more)."""
        with self._lock:
            consumer = self._consumers.pop(cluster, None)
        if consumer is not None:
            consumer.close()

    def close(self) -> None:
        with self._lock:
            clusters = list(self._consumers)
        for cluster in clusters:
            self.forget(cluster)

    def _consumer(self, cluster: KafkaCluster) -> Consumer:
        with self._lock:
            consumer = self._consumers.get(cluster)
        if consumer is not None:
            return consumer
        millis = int(self.timeout * 1000)
        try:
            consumer = Consumer({
                **cluster.config(), "group.id": "derived-views-record-times",
                "enable.auto.commit": False, "enable.auto.offset.store": False,
                "enable.partition.eof": True, "auto.offset.reset": "earliest",
                # Every record counts, committed or not: an open or aborted transaction's
                # records are as missing from the index as any other until it moves past them.
                "isolation.level": "read_uncommitted",
                "fetch.wait.max.ms": 20, "fetch.min.bytes": 1,
                "max.partition.fetch.bytes": 64 * 1024, "queued.min.messages": 1,
                # With a queue of one record, librdkafka postpones the next fetch by this once
                # the queue is full: its default (1 s) made every reading take a second.
                "fetch.queue.backoff.ms": 10,
                "log_level": 0, "socket.timeout.ms": millis,
                "socket.connection.setup.timeout.ms": millis})
        except KafkaException as exc:  # librdkafka refused the settings (e.g. an unreadable CA)
            raise RecordTimesUnavailable(f"{cluster.describe()}: {exc.args[0]}") from None
        with self._lock:
            self._consumers[cluster] = consumer
        return consumer

    def _read(self, cluster: KafkaCluster, unread: list[Wanted]) -> dict[Wanted, dt.datetime | None]:
        """Rounds of at most one offset per partition (a consumer has one position each)."""
        out: dict[Wanted, dt.datetime | None] = {}
        rounds: list[dict[tuple[str, int], int]] = []
        for tp, offset in unread:
            for batch in rounds:
                if tp not in batch:
                    batch[tp] = offset
                    break
            else:
                rounds.append({tp: offset})
        deadline = time.monotonic() + self.timeout
        consumer = self._consumer(cluster)
        try:
            self._learn(consumer, sorted({tp[0] for tp, _ in unread}), deadline)
            for batch in rounds:
                out.update(self._round(consumer, batch, deadline))
        except KafkaException as exc:
            self.forget(cluster)
            raise RecordTimesUnavailable(f"{cluster.describe()}: {exc.args[0]}") from None
        return out

    @staticmethod
    def _learn(consumer: Consumer, topics: list[str], deadline: float) -> None:
        """Fetch the topics' metadata before assigning them: librdkafka learns a topic it was
        not following at its next periodic scan, about a second later, so a reading of a new
        topic cost a second (a thousand views starting, a thousand seconds). A few topics
        are asked for by name, more in one request for all."""
        left = max(deadline - time.monotonic(), 0.1)
        if len(topics) <= FEW_TOPICS:
            for topic in topics:
                consumer.list_topics(topic, timeout=left)
        else:
            consumer.list_topics(timeout=left)

    @staticmethod
    def _round(consumer: Consumer, batch: dict[tuple[str, int], int], deadline: float
               ) -> dict[Wanted, dt.datetime | None]:
        out: dict[Wanted, dt.datetime | None] = {}
        assigned = [TopicPartition(t, p, o) for (t, p), o in batch.items()]
        consumer.assign(assigned)
        try:
            RecordTimesReader._take_firsts(consumer, dict(batch), deadline, out)
        finally:  # a partition paused here would stay paused in the next round's assignment
            consumer.resume(assigned)
            consumer.unassign()
        return out

    @staticmethod
    def _take_firsts(consumer: Consumer, pending: dict[tuple[str, int], int], deadline: float,
                     out: dict[Wanted, dt.datetime | None]) -> None:
        while pending and (left := deadline - time.monotonic()) > 0:
            msg = consumer.poll(min(left, 0.5))
            if msg is None:
                continue
            err = msg.error()
            if err is not None and err.code() != KafkaError._PARTITION_EOF:
                if err.fatal() or err.code() in REFUSALS:
                    raise KafkaException(err)
                continue  # transient: librdkafka retries; the deadline bounds the wait
            tp = (str(msg.topic()), int(msg.partition() or 0))
            if tp not in pending or (err is None and (msg.offset() or 0) < pending[tp]):
                continue  # another partition's, or fetched for an earlier position
            if err is not None:  # the partition's end: nothing at or after the offset yet
                out[(tp, pending.pop(tp))] = None
                continue
            kind, millis = msg.timestamp()
            offset = pending.pop(tp)
            if kind != TIMESTAMP_NOT_AVAILABLE and millis >= 0:
                out[(tp, offset)] = dt.datetime.fromtimestamp(millis / 1000, dt.UTC)
            consumer.pause([TopicPartition(tp[0], tp[1])])
