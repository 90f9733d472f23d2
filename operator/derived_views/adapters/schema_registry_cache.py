"""The registries' answers, shared by every view that reads Avro through them.

A thousand views must not mean a thousand requests per poll: per registry connection the
subject list (which answers "is it there" and "which `<topic>-value` subjects exist") is
fetched at most once per `subjects_ttl`, and a pinned version's schema once per
`schema_ttl` (a registry never changes a version; the cache only bounds its memory), an
absent one once per `not_found_ttl` (so registering it is seen soon). A registry that does
not answer is retried with capped exponential backoff (`backoff_min` doubling up to
`backoff_max`), and until the next try every view is told its last error at once. One
request per registry is in flight at a time; the other passes wait for it and reuse its
answer. Registries no view asked for within `expire_after` are forgotten.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from derived_views.adapters import schema_registry
from derived_views.adapters.schema_registry import Registry, RegistryUnavailable, SchemaNotFound
from derived_views.api.status import SubjectVersion

T = TypeVar("T")


@dataclass
class _Answer:
    """A cached answer (a value, or the SchemaNotFound the registry gave) and its time."""

    value: str | SchemaNotFound
    at: float


@dataclass
class _Known:
    """What the cache holds for one registry connection."""

    used_at: float
    subjects: frozenset[str] | None = None
    subjects_at: float = 0.0
    schemas: dict[SubjectVersion, _Answer] = field(default_factory=dict)
    failures: int = 0
    retry_at: float = 0.0
    last_error: str = ""
    fetching: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class RegistryCache:
    """Subject lists and pinned schemas per registry connection, with backoff."""

    subjects_ttl: float = 60.0
    schema_ttl: float = 3600.0
    not_found_ttl: float = 15.0
    backoff_min: float = 2.0
    backoff_max: float = 60.0
    expire_after: float = 900.0
    clock: Callable[[], float] = time.monotonic
    fetch_subjects: Callable[[Registry], frozenset[str]] = schema_registry.subjects
    fetch_version: Callable[[Registry, str, int], str] = schema_registry.subject_version
    on_fetch: Callable[[], None] | None = None
    """Called once per request made to a registry (tests, metrics)."""
    _known: dict[Registry, _Known] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def subjects(self, registry: Registry) -> frozenset[str]:
        """The registry's subjects; RegistryUnavailable (at once while backing off)."""
        known = self._state(registry)
        fresh = self._fresh_subjects(known)
        if fresh is not None:
            return fresh
        with known.fetching:
            fresh = self._fresh_subjects(known)  # another pass fetched meanwhile
            if fresh is not None:
                return fresh
            found = self._fetch(registry, known, lambda: self.fetch_subjects(registry))
            with self._lock:
                known.subjects, known.subjects_at = found, self.clock()
            return found

    def reader_schema(self, registry: Registry, pin: SubjectVersion) -> str:
        """The pinned version's schema text; SchemaNotFound, or RegistryUnavailable."""
        known = self._state(registry)
        cached = self._fresh_schema(known, pin)
        if cached is None:
            with known.fetching:
                cached = self._fresh_schema(known, pin)
                if cached is None:
                    try:
                        value: str | SchemaNotFound = self._fetch(
                            registry, known, lambda: self.fetch_version(
                                registry, pin.subject, pin.version))
                    except SchemaNotFound as exc:
                        value = exc
                    cached = _Answer(value, self.clock())
                    with self._lock:
                        known.schemas[pin] = cached
        if isinstance(cached.value, SchemaNotFound):
            raise SchemaNotFound(str(cached.value))
        return cached.value

    def _state(self, registry: Registry) -> _Known:
        with self._lock:
            now = self.clock()
            for other, known in list(self._known.items()):
                if now - known.used_at > self.expire_after and not known.fetching.locked():
                    del self._known[other]
            known = self._known.setdefault(registry, _Known(used_at=now))
            known.used_at = now
            return known

    def _backing_off(self, known: _Known, now: float) -> None:
        if now < known.retry_at:
            raise RegistryUnavailable(f"{known.last_error} (next try in "
                                      f"{known.retry_at - now:.0f}s)")

    def _fresh_subjects(self, known: _Known) -> frozenset[str] | None:
        with self._lock:
            now = self.clock()
            if known.subjects is not None and now - known.subjects_at < self.subjects_ttl:
                return known.subjects
            self._backing_off(known, now)
            return None

    def _fresh_schema(self, known: _Known, pin: SubjectVersion) -> _Answer | None:
        with self._lock:
            now = self.clock()
            for key, answer in list(known.schemas.items()):
                ttl = (self.not_found_ttl if isinstance(answer.value, SchemaNotFound)
                       else self.schema_ttl)
                if now - answer.at >= ttl:
                    del known.schemas[key]
            cached = known.schemas.get(pin)
            if cached is not None:
                return cached
            self._backing_off(known, now)
            return None

    def _fetch(self, registry: Registry, known: _Known, request: Callable[[], T]) -> T:
        """One request; a failure starts (or lengthens) the backoff, an answer (SchemaNotFound
        included: the registry answered) ends it. Whatever else a request raises is a
        RegistryUnavailable too: a pass never fails on a registry."""
        if self.on_fetch is not None:
            self.on_fetch()
        try:
            try:
                answer = request()
            except (RegistryUnavailable, SchemaNotFound):
                raise
            except Exception as exc:  # an answer the adapter did not foresee
                raise RegistryUnavailable(
                    f"schema registry at {registry.describe()} could not be read "
                    f"({type(exc).__name__}: {str(exc)[:200]})") from None
        except RegistryUnavailable as exc:
            with self._lock:
                known.failures += 1
                delay = min(self.backoff_max,
                            self.backoff_min * 2 ** min(known.failures - 1, 30))
                known.retry_at, known.last_error = self.clock() + delay, str(exc)
            raise
        except SchemaNotFound:
            self._answered(known)
            raise
        self._answered(known)
        return answer

    def _answered(self, known: _Known) -> None:
        with self._lock:
            known.failures, known.retry_at, known.last_error = 0, 0.0, ""
