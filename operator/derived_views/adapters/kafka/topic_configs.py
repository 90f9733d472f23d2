"""Topics' retention settings, one describe-configs request per Kafka connection every few
minutes.

How much of its history a topic's log keeps is configuration (`cleanup.policy`,
`retention.ms`, `retention.bytes`, `remote.storage.enable`). It changes rarely, so it is read
far less often than the offsets, for the union of every view's topics of one connection at
once. The settings only inform what the operator reports, so a failed read never fails a
pass: the cache answers with the last good reading (or nothing) and tries again after a
backoff, and only the pass whose read failed is told why (one log line per try, not per pass).
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from derived_views.adapters.kafka.refusals import REFUSALS
from derived_views.core.log.kafka_connection import KafkaCluster
from derived_views.core.observed import TopicRetention

_TIMEOUT_SECONDS = 5.0
INTERVAL_SECONDS = 300.0


class TopicConfigsUnavailable(Exception):
    """The cluster could not be asked or refused; the message carries no credentials."""


def _why(cluster: KafkaCluster, err: object, errors: list[KafkaError]) -> str:
    """The most telling error: what the client met (a refusal first) beats the timeout it
    caused. The client is this call's own, so every error it reported is this call's."""
    err = next((e for e in errors if e.code() in REFUSALS), errors[0] if errors else err)
    text = err.str() if isinstance(err, KafkaError) else str(err)
    return f"{cluster.describe()}: {text}"


def _int(value: str | None) -> int | None:
    try:
        return None if value is None else int(value)
    except ValueError:
        return None


def retention_of(values: Mapping[str, str | None]) -> TopicRetention:
    """A topic's retention from its described settings (name -> value)."""
    policy = (values.get("cleanup.policy") or "delete").replace(" ", "").lower()
    return TopicRetention(
        cleanup_policy=policy, retention_ms=_int(values.get("retention.ms")),
        retention_bytes=_int(values.get("retention.bytes")),
        remote_storage=(values.get("remote.storage.enable") or "").strip().lower() == "true")


def describe_topic_configs(cluster: KafkaCluster, topics: Iterable[str], *,
                           timeout: float = _TIMEOUT_SECONDS) -> dict[str, TopicRetention]:
    """The retention settings of `topics` in one describe-configs request; a topic the
    cluster lacks is absent. Raises TopicConfigsUnavailable when the cluster cannot be asked,
    refuses, or errs on a topic it has."""
    wanted = sorted(set(topics))
    if not wanted:
        return {}
    errors: list[KafkaError] = []
    millis = int(timeout * 1000)
    try:
        admin = AdminClient({**cluster.config(), "log_level": 0, "socket.timeout.ms": millis,
                             "socket.connection.setup.timeout.ms": millis,
                             "error_cb": errors.append})
        futures = admin.describe_configs(
            [ConfigResource(ResourceType.TOPIC, t) for t in wanted], request_timeout=timeout)
    except (KafkaException, ValueError, TypeError) as exc:  # settings or names refused
        raise TopicConfigsUnavailable(_why(cluster, exc.args[0] if exc.args else exc,
                                           errors)) from None
    configs: dict[str, TopicRetention] = {}
    for resource, future in futures.items():
        try:  # request_timeout bounds the answer; the margin only guards against a lost one
            entries = future.result(timeout=timeout + 5)
        except KafkaException as exc:
            err = exc.args[0]
            if isinstance(err, KafkaError) and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                continue
            if isinstance(err, KafkaError) and err.code() >= 0:  # the broker's, on this topic
                raise TopicConfigsUnavailable(
                    f"{cluster.describe()}: topic {resource.name}: {err.str()}") from None
            admin.poll(0)  # serve queued error events (the authentication failure)
            raise TopicConfigsUnavailable(_why(cluster, err, errors)) from None
        except concurrent.futures.TimeoutError:
            admin.poll(0)
            raise TopicConfigsUnavailable(_why(
                cluster, f"no answer to describe configs in {timeout:.0f}s", errors)) from None
        configs[resource.name] = retention_of({n: e.value for n, e in entries.items()})
    return configs


@dataclass(frozen=True)
class ConfigsAnswer:
    """The cache's answer for some topics; `failure` is set only for the call whose read
    just failed (the caller logs it), not for the calls answered during the backoff."""

    configs: Mapping[str, TopicRetention]
    failure: str | None = None


@dataclass
class _Cluster:
    """What the cache knows of one connection."""

    registered: dict[str, float] = field(default_factory=dict)  # topic -> last registration
    configs: dict[str, TopicRetention] = field(default_factory=dict)  # the last good reading
    asked: frozenset[str] = frozenset()  # what that reading asked for
    read_at: float | None = None
    failures: int = 0
    retry_at: float = 0.0
    reading: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class TopicConfigsCache:
    """Retention settings per cluster connection, read at most once per `interval`.

    `get` registers the caller's topics and answers from the last reading; it reads again
    (all topics registered on the connection, in one request) when that reading is older
    than the interval or lacks a registered topic. A pass that finds a read under way does
    not wait for it: the settings are advisory and seldom change. A failed read backs off
    (`backoff_min` doubling up to `backoff_max`) and keeps the last good reading.
    Registrations older than `expire_after` (3 intervals unless given) are forgotten, and
    with them a connection no view reads any more.
    """

    interval: float = INTERVAL_SECONDS
    fetch: Callable[[KafkaCluster, frozenset[str]], Mapping[str, TopicRetention]] = (
        describe_topic_configs)
    clock: Callable[[], float] = time.monotonic
    expire_after: float | None = None
    backoff_min: float = 10.0
    backoff_max: float = INTERVAL_SECONDS
    _clusters: dict[KafkaCluster, _Cluster] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def clusters(self) -> list[KafkaCluster]:
        """The connections with registered topics (for tests)."""
        with self._lock:
            self._expire(self.clock())
            return list(self._clusters)

    def get(self, cluster: KafkaCluster, topics: Iterable[str]) -> ConfigsAnswer:
        """The settings of those of `topics` the latest reading has (absent: unknown topic,
        or not read yet); reads first when due and no other caller is reading."""
        wanted = frozenset(topics)
        with self._lock:
            now = self.clock()
            self._expire(now)
            state = self._clusters.setdefault(cluster, _Cluster())
            for topic in wanted:
                state.registered[topic] = now
            if not self._due(state, now) or not state.reading.acquire(blocking=False):
                return ConfigsAnswer(_of(state.configs, wanted))
            asked = frozenset(state.registered)
        try:
            return self._read(cluster, state, asked, wanted, now)
        finally:
            state.reading.release()

    def _read(self, cluster: KafkaCluster, state: _Cluster, asked: frozenset[str],
              wanted: frozenset[str], started: float) -> ConfigsAnswer:
        try:
            configs = dict(self.fetch(cluster, asked))
        except Exception as exc:  # advisory settings: any failure is a backoff, never fatal
            why = str(exc) if isinstance(exc, TopicConfigsUnavailable) else repr(exc)
            with self._lock:
                state.failures += 1
                delay = min(self.backoff_max,
                            self.backoff_min * 2 ** min(state.failures - 1, 30))
                state.retry_at = self.clock() + delay
                return ConfigsAnswer(_of(state.configs, wanted),
                                     failure=f"{why} (next try in {delay:.0f}s)")
        with self._lock:
            state.configs, state.asked, state.read_at = configs, asked, started
            state.failures, state.retry_at = 0, 0.0
            return ConfigsAnswer(_of(configs, wanted))

    def _due(self, state: _Cluster, now: float) -> bool:
        if now < state.retry_at:
            return False
        return (state.read_at is None or now - state.read_at >= self.interval
                or not state.registered.keys() <= state.asked)

    def _expire(self, now: float) -> None:
        """Forget registrations past `expire_after`, and connections left with none."""
        horizon = now - (self.expire_after if self.expire_after is not None
                         else 3 * self.interval)
        for cluster, state in list(self._clusters.items()):
            state.registered = {t: at for t, at in state.registered.items() if at >= horizon}
            if not state.registered and not state.reading.locked():
                del self._clusters[cluster]


def _of(configs: Mapping[str, TopicRetention], topics: frozenset[str]
        ) -> dict[str, TopicRetention]:
    return {t: configs[t] for t in topics if t in configs}
