"""The registry adapter against the stack's real registry (Apicurio's Confluent-compatible API):
subjects, a pinned version's text, what it lacks, a url that is not the API, a port where
nothing listens, and a view's registry Secret read from the real API server."""

from __future__ import annotations

import dataclasses
import json
import socket
import uuid
from typing import Any

import pytest
from kubernetes import client

from derived_views.adapters.kafka.offsets import EndOffsetsCache
from derived_views.adapters.kube.client import Kube
from derived_views.adapters.schema_registry import (
    Registry,
    RegistryUnavailable,
    SchemaNotFound,
    subject_version,
    subjects,
)
from derived_views.adapters.schema_registry_cache import RegistryCache
from derived_views.api.spec import DerivedViewSpec
from derived_views.api.status import DerivedViewStatus, SubjectVersion
from derived_views.core import reasons
from derived_views.core.judges.tenancy import parse_policy
from derived_views.reconcile.registry_reading import registry_reading
from derived_views.reconcile.secrets import PassSecrets
from dvstack.testing import replay
from dvstack.testing.schema_registry_client import register
from support.stand_ins.deps import SETTINGS, pass_deps


def order(*fields: dict[str, Any]) -> str:
    return json.dumps({"type": "record", "name": "Order", "namespace": "shop",
                       "fields": [{"name": "id", "type": "string"}, *fields]})


V1 = order()
V2 = order({"name": "channel", "type": "string", "default": "web"})


@pytest.fixture()
def url(stack: Any) -> str:
    assert stack.schema_registry_url, "stack.json has no schema registry: run `dvstack up` again"
    return str(stack.schema_registry_url)


@pytest.fixture()
def topic(url: str) -> str:
    """A topic name of its own whose value subject holds V1 and V2 (the registry is shared)."""
    name = f"sr-{uuid.uuid4().hex[:10]}"
    register(url, f"{name}-value", V1)
    register(url, f"{name}-value", V2)
    return name


def test_subjects_and_pinned_versions_as_registered(url: str, topic: str) -> None:
    registry = Registry.from_secret_data({"url": url})
    held = subjects(registry)
    assert f"{topic}-value" in held and f"{topic}-key" not in held
    assert json.loads(subject_version(registry, f"{topic}-value", 1)) == json.loads(V1)
    assert json.loads(subject_version(registry, f"{topic}-value", 2)) == json.loads(V2)


def test_what_the_registry_lacks_is_schema_not_found(url: str, topic: str) -> None:
    registry = Registry.from_secret_data({"url": url})
    with pytest.raises(SchemaNotFound, match=f"subject {topic}-value has no version 3"):
        subject_version(registry, f"{topic}-value", 3)
    with pytest.raises(SchemaNotFound, match=f"subject {topic}-nothing \\(version 1\\) is not in"):
        subject_version(registry, f"{topic}-nothing", 1)


def test_a_url_that_is_not_the_confluent_api_and_a_silent_port_are_unavailable(url: str) -> None:
    root = url.removesuffix("/apis/ccompat/v7")
    with pytest.raises(RegistryUnavailable, match="must be the registry's Confluent-compatible"):
        subjects(Registry.from_secret_data({"url": root + "/apis/nothing"}))
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    with pytest.raises(RegistryUnavailable, match=f"127.0.0.1:{port} cannot be reached"):
        subjects(Registry.from_secret_data({"url": f"http://127.0.0.1:{port}/apis/ccompat/v7"}))


def test_a_views_registry_secret_in_the_api_server_drives_the_reading(
        url: str, topic: str, kube_api_client: Any, namespace: str, stack: Any) -> None:
    client.CoreV1Api(kube_api_client).create_namespaced_secret(namespace, {
        "metadata": {"name": "registry", "labels": {"derivedviews.io/view-secret": "true"}},
        "stringData": {"url": url}})
    deps = pass_deps(Kube(kube_api_client), offsets=EndOffsetsCache(interval=5),
                settings=dataclasses.replace(SETTINGS, tenancy=parse_policy(replay.kafka_tenancy_env(stack.kafka_bootstrap).get(
                        "DV_TENANCY_POLICY"))),
                registries=RegistryCache())
    secrets = PassSecrets(deps.kube, namespace, deps.settings.tenancy)

    def view(version: int, topics: list[str]) -> DerivedViewSpec:
        return DerivedViewSpec.model_validate({
            "source": {"kafka": {"bootstrapServers": "127.0.0.1:9092"}, "topics": topics,
                       "format": "avro", "avro": {
                           "registry": {"secretRef": {"name": "registry"}},
                           "readerSchema": {"subject": f"{topic}-value", "version": version}}},
            "transform": {"sql": "SELECT id FROM events"},
            "sink": {"postgres": {"secretRef": {"name": "db"}, "table": "t"},
                     "primaryKey": ["id"]}})

    got = registry_reading(view(2, [topic, f"{topic}-b"]), DerivedViewStatus(),
                           (namespace, "v"), deps.registries, secrets)
    assert got is not None and got.problem is None and got.reader_problem is None
    pin = SubjectVersion(subject=f"{topic}-value", version=2)
    assert json.loads(got.reader_schemas[pin]) == json.loads(V2)
    assert got.unregistered == {f"{topic}-b-value"}
    missing = registry_reading(view(7, [topic]), DerivedViewStatus(), (namespace, "v"),
                               deps.registries, PassSecrets(deps.kube, namespace, deps.settings.tenancy))
    assert missing is not None and missing.reader_problem is not None
    assert missing.reader_problem[0] == reasons.READER_SCHEMA_NOT_FOUND
    assert f"subject {topic}-value has no version 7" in missing.reader_problem[1]
