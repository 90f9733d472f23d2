"""What one pass learns of an Avro view's schema registry, and the reason when it learns too
little. Secrets are held in memory and the registry cache asks fakes: the shell's decisions
only (the real registry: tests/integration/adapters/test_schema_registry.py)."""

from __future__ import annotations

import json
from typing import Any

from derived_views.adapters.schema_registry import Registry, RegistryUnavailable, SchemaNotFound
from derived_views.adapters.schema_registry_cache import RegistryCache
from derived_views.api.spec import DerivedViewSpec
from derived_views.api.status import DerivedViewStatus, SubjectVersion
from derived_views.core import reasons
from derived_views.core.judges.tenancy import TenancyPolicy
from derived_views.core.revision import content_of, revision_of
from derived_views.reconcile.registry_reading import registry_reading
from derived_views.reconcile.secrets import PassSecrets
from support.stand_ins.deps import pass_deps
from support.stand_ins.kube import FakeKube

VIEW = ("shop", "orders")
PASSWORD = "s3cr3t-never-shown"
SECRET = {"url": "https://registry.example:8081/apis/ccompat/v7", "username": "alice",
          "password": PASSWORD}
READER = json.dumps({"type": "record", "name": "Order", "fields": [
    {"name": "a", "type": "string"}]})
PIN = SubjectVersion(subject="orders-value", version=3)


def spec(reader: dict[str, Any] | None = None, topics: tuple[str, ...] = ("orders", "refunds"),
         avro: bool = True) -> DerivedViewSpec:
    source: dict[str, Any] = {"kafka": {"bootstrapServers": "127.0.0.1:9092"},
                              "topics": list(topics)}
    if avro:
        source.update(format="avro", avro={"registry": {"secretRef": {"name": "registry"}},
                                           "readerSchema": reader or {"schema": READER}})
    else:
        source["schema"] = "a STRING"
    return DerivedViewSpec.model_validate({
        "source": source, "transform": {"sql": "SELECT a FROM events"},
        "sink": {"postgres": {"secretRef": {"name": "db"}, "table": "t"}, "primaryKey": ["a"]}})


class Registered:
    """A registry holding `orders-value` (version 3) and nothing else; or down."""

    def __init__(self, up: bool = True) -> None:
        self.up, self.asked = up, []  # type: ignore[var-annotated]

    def subjects(self, registry: Registry) -> frozenset[str]:
        self.asked.append(("subjects", registry))
        if not self.up:
            raise RegistryUnavailable("schema registry at registry.example:8081 cannot be "
                                      "reached (timed out): check that it runs and the "
                                      "Secret's url")
        return frozenset({"orders-value"})

    def version(self, registry: Registry, subject: str, version: int) -> str:
        self.asked.append((subject, version))
        if (subject, version) != ("orders-value", 3):
            raise SchemaNotFound(f"subject {subject} has no version {version} in the schema "
                                 "registry at registry.example:8081: register it, or pin a "
                                 "version the subject has")
        return READER


LISTED = TenancyPolicy(schema_registries=("registry.example:*",))
"""The platform lists its registry (the default policy allows loopback only)."""


def read(view: DerivedViewSpec, registered: Registered,
         secrets: dict[str, dict[str, str]] | None = None,
         status: DerivedViewStatus | None = None, policy: TenancyPolicy = LISTED) -> Any:
    kube = FakeKube(secrets={"registry": SECRET} if secrets is None else secrets)
    deps = pass_deps(kube, registries=RegistryCache(fetch_subjects=registered.subjects,
                                         fetch_version=registered.version))
    return registry_reading(view, status or DerivedViewStatus(), VIEW, deps.registries,
                            PassSecrets(kube, VIEW[0], policy))


def test_a_view_without_avro_asks_no_registry() -> None:
    registered = Registered()
    assert read(spec(avro=False), registered) is None
    assert registered.asked == []


def test_the_value_subjects_the_registry_lacks_are_told_by_name() -> None:
    got = read(spec(), Registered())
    assert (got.where, got.unregistered, got.problem) == (
        "registry.example:8081", frozenset({"refunds-value"}), None)
    assert got.reader_schemas == {}


def test_a_pinned_reader_schema_is_fetched_with_the_secrets_credentials() -> None:
    registered = Registered()
    got = read(spec({"subject": "orders-value", "version": 3}), registered)
    assert got.reader_schemas == {PIN: READER} and got.reader_problem is None
    registry = registered.asked[0][1]
    assert (registry.username, registry.password) == ("alice", PASSWORD)


def test_a_pinned_version_the_registry_lacks_is_reader_schema_not_found() -> None:
    got = read(spec({"subject": "orders-value", "version": 9}), Registered())
    assert got.reader_problem == (
        reasons.READER_SCHEMA_NOT_FOUND,
        "source.avro.readerSchema: subject orders-value has no version 9 in the schema registry "
        "at registry.example:8081: register it, or pin a version the subject has")
    assert got.problem is None


def test_a_revision_that_keeps_its_reader_schema_fetches_nothing() -> None:
    view = spec({"subject": "orders-value", "version": 3})
    status = DerivedViewStatus.model_validate({"revisions": [{
        "revision": revision_of(view), "index": "t__x", "phase": "Active",
        "since": "2026-03-01T12:00:00Z", "startedAt": "2026-03-01T12:00:00Z",
        "sparkApplication": "a", "checkpointLocation": "/c/x",
        "content": content_of(view, {PIN: READER}).model_dump(mode="json", by_alias=True)}]})
    registered = Registered()
    got = read(view, registered, status=status)
    assert got.reader_schemas == {} and got.problem is None
    assert [a[0] for a in registered.asked] == ["subjects"]


def test_an_unreachable_registry_names_host_and_secret_and_never_the_password() -> None:
    got = read(spec({"subject": "orders-value", "version": 3}), Registered(up=False))
    reason, message = got.problem
    assert reason == reasons.SCHEMA_REGISTRY_UNREACHABLE
    assert message == ("schema registry at registry.example:8081 cannot be reached (timed "
                       "out): check that it runs and the Secret's url (secret shop/registry)")
    assert PASSWORD not in message and "alice" not in message


def test_a_missing_or_unusable_secret_is_its_own_reason() -> None:
    missing = read(spec(), Registered(), secrets={})
    assert missing.problem == (
        reasons.SECRET_MISSING,
        "schema registry secret shop/registry not found: create it (keys url, optionally "
        "username and password, and ca.crt) or fix spec.source.avro.registry.secretRef")
    invalid = read(spec(), Registered(), secrets={"registry": {"url": "registry:8081"}})
    reason, message = invalid.problem
    assert reason == reasons.SCHEMA_REGISTRY_SECRET_INVALID
    assert message.startswith("schema registry secret shop/registry: key url must be an http://")


def test_whatever_the_registry_answers_the_pass_reads_a_problem_never_an_exception() -> None:
    class Garbled(Registered):
        def subjects(self, registry: Registry) -> frozenset[str]:
            raise TypeError("'NoneType' object is not iterable")

    got = read(spec(), Garbled())
    assert got.problem == (
        reasons.SCHEMA_REGISTRY_UNREACHABLE,
        "schema registry at registry.example:8081 could not be read (TypeError: 'NoneType' "
        "object is not iterable) (secret shop/registry)")


def test_a_registry_the_platform_does_not_list_is_never_asked() -> None:
    registered = Registered()
    got = read(spec({"subject": "orders-value", "version": 3}), registered,
               policy=TenancyPolicy())
    assert got.problem == (
        reasons.POLICY_VIOLATION,
        "schema registry registry.example:8081 (the registry Secret's url): refused by the "
        "tenancy policy (chart value tenancy.schemaRegistries); name a registry the platform "
        "lists, or ask the platform team to allow it")
    assert registered.asked == []
