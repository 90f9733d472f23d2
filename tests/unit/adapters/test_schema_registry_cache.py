"""The registry cache's decisions, with fake requests and a fake clock (no registry).

A thousand views share one subject list per registry and interval; a pinned version is
fetched once; an absent one is asked again soon; a registry that fails is backed off
exponentially and every view meanwhile hears its last error at once; one request per
registry is in flight; nothing a request raises escapes as anything but the two errors.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field

import pytest

from derived_views.adapters.schema_registry import Registry, RegistryUnavailable, SchemaNotFound
from derived_views.adapters.schema_registry_cache import RegistryCache
from derived_views.api.status import SubjectVersion

REGISTRY = Registry(url="http://registry.example:8081/apis/ccompat/v7")
OTHER_USER = Registry(url=REGISTRY.url, username="bob", password="b")
V3 = SubjectVersion(subject="orders-value", version=3)
V4 = SubjectVersion(subject="orders-value", version=4)


@dataclass
class Fake:
    """A registry's answers, and every request made of it."""

    up: bool = True
    versions: dict[tuple[str, int], str] = field(default_factory=lambda: {
        ("orders-value", 3): "{}"})
    calls: list[str] = field(default_factory=list)
    t: float = 0.0

    def clock(self) -> float:
        return self.t

    def subjects(self, registry: Registry) -> frozenset[str]:
        self.calls.append(f"subjects {registry.username}")
        if not self.up:
            raise RegistryUnavailable("schema registry at registry.example:8081 cannot be "
                                      "reached (refused)")
        return frozenset({"orders-value"})

    def version(self, registry: Registry, subject: str, version: int) -> str:
        self.calls.append(f"{subject} {version}")
        if not self.up:
            raise RegistryUnavailable("schema registry at registry.example:8081 cannot be "
                                      "reached (refused)")
        if (subject, version) not in self.versions:
            raise SchemaNotFound(f"subject {subject} has no version {version}")
        return self.versions[(subject, version)]


def cache(fake: Fake) -> RegistryCache:
    return RegistryCache(subjects_ttl=60, schema_ttl=3600, not_found_ttl=15, backoff_min=2,
                         backoff_max=60, clock=fake.clock, fetch_subjects=fake.subjects,
                         fetch_version=fake.version)


def test_views_of_one_registry_share_one_subject_list_per_interval() -> None:
    fake = Fake()
    c = cache(fake)
    for _ in range(1000):
        assert c.subjects(REGISTRY) == {"orders-value"}
    fake.t = 59.9
    c.subjects(REGISTRY)
    assert fake.calls == ["subjects None"]
    fake.t = 60
    c.subjects(REGISTRY)
    assert fake.calls == ["subjects None"] * 2


def test_other_credentials_are_another_connection() -> None:
    fake = Fake()
    c = cache(fake)
    c.subjects(REGISTRY)
    c.subjects(OTHER_USER)
    assert fake.calls == ["subjects None", "subjects bob"]


def test_a_pinned_version_is_fetched_once_and_an_absent_one_asked_again_soon() -> None:
    fake = Fake()
    c = cache(fake)
    assert c.reader_schema(REGISTRY, V3) == "{}"
    with pytest.raises(SchemaNotFound, match="has no version 4"):
        c.reader_schema(REGISTRY, V4)
    fake.t = 14
    with pytest.raises(SchemaNotFound):
        c.reader_schema(REGISTRY, V4)
    assert c.reader_schema(REGISTRY, V3) == "{}"
    assert fake.calls == ["orders-value 3", "orders-value 4"]
    fake.versions[("orders-value", 4)] = '{"v": 4}'  # registered meanwhile
    fake.t = 15
    assert c.reader_schema(REGISTRY, V4) == '{"v": 4}'
    fake.t = 3600
    c.reader_schema(REGISTRY, V3)
    assert fake.calls == ["orders-value 3", "orders-value 4", "orders-value 4", "orders-value 3"]


def test_a_failing_registry_is_backed_off_and_every_view_hears_its_last_error_at_once() -> None:
    fake = Fake(up=False)
    c = cache(fake)
    with pytest.raises(RegistryUnavailable, match="cannot be reached"):
        c.subjects(REGISTRY)
    for _ in range(100):  # within the backoff: no request, the last error at once
        with pytest.raises(RegistryUnavailable, match=r"cannot be reached \(refused\) "
                                                      r"\(next try in 2s\)"):
            c.subjects(REGISTRY)
        with pytest.raises(RegistryUnavailable, match="next try"):
            c.reader_schema(REGISTRY, V3)
    assert fake.calls == ["subjects None"]
    fake.t = 2
    with pytest.raises(RegistryUnavailable):
        c.subjects(REGISTRY)
    fake.t = 5.9  # the delay doubled to 4 s
    with pytest.raises(RegistryUnavailable, match="next try in 0s"):
        c.reader_schema(REGISTRY, V3)
    assert len(fake.calls) == 2
    fake.t, fake.up = 6, True
    assert c.reader_schema(REGISTRY, V3) == "{}"  # an answer ends the backoff
    assert c.subjects(REGISTRY) == {"orders-value"}


def test_the_backoff_is_capped() -> None:
    fake = Fake(up=False)
    c = cache(fake)
    for _ in range(12):
        with pytest.raises(RegistryUnavailable):
            c.subjects(REGISTRY)
        fake.t += 61
    with pytest.raises(RegistryUnavailable, match="next try in 60s"):
        fake.t -= 61
        c.subjects(REGISTRY)


def test_whatever_a_request_raises_is_unavailable_and_backs_off() -> None:
    def broken(registry: Registry) -> frozenset[str]:
        raise KeyError("schema")

    c = RegistryCache(clock=lambda: 0.0, fetch_subjects=broken)
    with pytest.raises(RegistryUnavailable, match=re.escape(
            "registry.example:8081 could not be read (KeyError: 'schema')")):
        c.subjects(REGISTRY)
    with pytest.raises(RegistryUnavailable, match="next try"):
        c.subjects(REGISTRY)


def test_one_request_per_registry_is_in_flight_and_the_others_reuse_it() -> None:
    fake = Fake()
    release = threading.Event()
    started = threading.Event()

    def slow(registry: Registry) -> frozenset[str]:
        started.set()
        release.wait(5)
        return fake.subjects(registry)

    c = RegistryCache(clock=fake.clock, fetch_subjects=slow)
    answers: list[frozenset[str]] = []
    threads = [threading.Thread(target=lambda: answers.append(c.subjects(REGISTRY)))
               for _ in range(8)]
    for thread in threads:
        thread.start()
    assert started.wait(5)
    release.set()
    for thread in threads:
        thread.join(5)
    assert answers == [frozenset({"orders-value"})] * 8
    assert fake.calls == ["subjects None"]


def test_registries_no_view_asks_for_are_forgotten() -> None:
    fake = Fake()
    c = RegistryCache(clock=fake.clock, fetch_subjects=fake.subjects, expire_after=900)
    c.subjects(REGISTRY)
    fake.t = 901
    c.subjects(OTHER_USER)
    assert list(c._known) == [OTHER_USER]
