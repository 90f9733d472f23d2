"""One pass of an Avro view whose reader schema is pinned in the registry, against the stack's
API server, Kafka, PostgreSQL and schema registry: no job while the version is not
registered (the view Stalled, ReaderSchemaNotFound, naming subject, version and the
registry's host), then the job with the fetched text once it is, the status keeping it; a
registry that does not answer stalls the view and raises nothing out of the pass.

The planner's SparkApplications are recorded, not created (the stack's executor would run
them): the pass is the subject here, the job has tests of its own."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import socket
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kubernetes import client

from derived_views.adapters.kafka.offsets import EndOffsetsCache
from derived_views.adapters.kube.client import Kube
from derived_views.api.spec import DerivedViewSpec
from derived_views.core import actions as A
from derived_views.core.job.sparkapplication import load_template
from derived_views.core.judges.tenancy import parse_policy
from derived_views.core.observed import Observed
from derived_views.core.plan import plan
from derived_views.reconcile.deps import Deps
from derived_views.reconcile.run import reconcile
from dvstack.cli import apply_crds
from dvstack.testing import replay
from dvstack.testing.schema_registry_client import register
from support.paths import REPO
from support.stand_ins.deps import SETTINGS, pass_deps

CRD = REPO / "crds" / "derivedviews.io_derivedviews.yaml"
G, V, P = "derivedviews.io", "v1alpha1", "derivedviews"
NOW = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
READER = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "order_id", "type": "string"}, {"name": "amount", "type": "long"}]}


class Recorded:
    """The planner, with the SparkApplications it asks for kept here instead of created."""

    def __init__(self) -> None:
        self.creates: list[A.CreateSparkApplication] = []

    def __call__(self, spec: DerivedViewSpec, observed: Observed, now: dt.datetime
                 ) -> list[A.Action]:
        actions = plan(spec, observed, now)
        self.creates += [a for a in actions if isinstance(a, A.CreateSparkApplication)]
        return [a for a in actions if not isinstance(a, A.CreateSparkApplication)]


@pytest.fixture()
def world(stack: Any, kube_api_client: Any, namespace: str) -> Iterator[dict[str, Any]]:
    assert stack.schema_registry_url, "stack.json has no schema registry: run `dvstack up` again"
    apply_crds(kube_api_client, [CRD])
    topic = f"sr-pass-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": stack.kafka_bootstrap, "log_level": 0})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[
        topic].result(30)
    labels = {"derivedviews.io/view-secret": "true"}
    core = client.CoreV1Api(kube_api_client)
    core.create_namespaced_secret(namespace, {"metadata": {"name": "views-db", "labels": labels},
                                              "stringData": {k: str(v) for k, v in
                                                             stack.pg.items()}})
    core.create_namespaced_secret(namespace, {"metadata": {"name": "registry", "labels": labels},
                                              "stringData": {"url": stack.schema_registry_url}})
    yield {"topic": topic, "namespace": namespace, "bootstrap": stack.kafka_bootstrap}
    # the passes added the operator's finalizer: without one running, the namespace would
    # never finish deleting
    api = client.CustomObjectsApi(kube_api_client)
    for item in api.list_namespaced_custom_object(G, V, namespace, P)["items"]:
        api.patch_namespaced_custom_object(G, V, namespace, P, item["metadata"]["name"],
                                           {"metadata": {"finalizers": None}})


def view(kube_api_client: Any, world: dict[str, Any], secret: str = "registry"
         ) -> dict[str, Any]:
    namespace, topic = world["namespace"], world["topic"]
    api = client.CustomObjectsApi(kube_api_client)
    name = f"v-{uuid.uuid4().hex[:6]}"
    api.create_namespaced_custom_object(G, V, namespace, P, {
        "apiVersion": f"{G}/{V}", "kind": "DerivedView", "metadata": {"name": name},
        "spec": {
            "source": {"kafka": {"bootstrapServers": world["bootstrap"]}, "topics": [topic],
                       "format": "avro", "avro": {
                           "registry": {"secretRef": {"name": secret}},
                           "readerSchema": {"subject": f"{topic}-value", "version": 1}}},
            "transform": {"sql": "SELECT order_id, amount FROM events"},
            "sink": {"postgres": {"secretRef": {"name": "views-db"},
                                  "table": name.replace("-", "_")},
                     "primaryKey": ["order_id"]}}}, field_validation="Strict")
    return dict(api.get_namespaced_custom_object(G, V, namespace, P, name))


def get(kube_api_client: Any, body: dict[str, Any]) -> dict[str, Any]:
    meta = body["metadata"]
    return dict(client.CustomObjectsApi(kube_api_client).get_namespaced_custom_object(
        G, V, meta["namespace"], P, meta["name"]))


def stalled(body: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in body["status"]["conditions"] if c["type"] == "Stalled")


def deps(stack: Any, kube_api_client: Any) -> Deps:
    """Beside the real node the registry listens on the node address, which the default
    tenancy (loopback) refuses: the stack's policy lists it, as a platform would."""
    tenancy = parse_policy(replay.kafka_tenancy_env(stack.kafka_bootstrap).get(
        "DV_TENANCY_POLICY"))
    return pass_deps(Kube(kube_api_client), offsets=EndOffsetsCache(interval=5),
                     settings=dataclasses.replace(
                         SETTINGS, tenancy=tenancy,
                         spark=dataclasses.replace(SETTINGS.spark, template=load_template())))


def test_no_job_until_the_pinned_version_is_registered_then_its_text(
        stack: Any, kube_api_client: Any, world: dict[str, Any]) -> None:
    topic = world["topic"]
    body = view(kube_api_client, world)
    the_deps, planner = deps(stack, kube_api_client), Recorded()
    reconcile(body, the_deps, NOW, planner=planner)
    body = get(kube_api_client, body)
    condition = stalled(body)
    assert (condition["status"], condition["reason"]) == ("True", "ReaderSchemaNotFound")
    registry_host = stack.schema_registry_url.split("/")[2]
    assert condition["message"].startswith(
        f"source.avro.readerSchema: subject {topic}-value (version 1) is not in the schema "
        f"registry at {registry_host}")
    assert planner.creates == [] and not body["status"].get("revisions")
    register(stack.schema_registry_url, f"{topic}-value", json.dumps(READER))
    the_deps.registries.not_found_ttl = 0  # the operator asks again within 15 s
    reconcile(body, the_deps, NOW + dt.timedelta(seconds=5), planner=planner)
    (create,) = planner.creates
    config = json.loads(create.manifest["spec"]["arguments"][1])
    assert json.loads(config["source"]["avro"]["readerSchema"]) == READER
    assert config["source"]["schema"] == "`order_id` STRING, `amount` BIGINT"
    body = get(kube_api_client, body)
    assert stalled(body)["status"] == "False"
    (record,) = body["status"]["revisions"]
    assert record["content"]["readerSchema"] == {"subject": f"{topic}-value", "version": 1}
    assert json.loads(record["content"]["schema"]) == READER


def test_a_registry_that_does_not_answer_stalls_the_view_and_the_pass_goes_on(
        stack: Any, kube_api_client: Any, world: dict[str, Any]) -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    client.CoreV1Api(kube_api_client).create_namespaced_secret(world["namespace"], {
        "metadata": {"name": "nowhere", "labels": {"derivedviews.io/view-secret": "true"}},
        "stringData": {"url": f"http://127.0.0.1:{port}/apis/ccompat/v7"}})
    body = view(kube_api_client, world, secret="nowhere")
    planner = Recorded()
    reconcile(body, deps(stack, kube_api_client), NOW, planner=planner)
    condition = stalled(get(kube_api_client, body))
    assert (condition["status"], condition["reason"]) == ("True", "SchemaRegistryUnreachable")
    assert condition["message"].startswith(f"schema registry at 127.0.0.1:{port} cannot be "
                                           "reached")
    assert f"(secret {world['namespace']}/nowhere)" in condition["message"]
    assert planner.creates == []
