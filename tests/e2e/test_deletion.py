"""Deletion never hangs: a view whose sink Secret is gone is released saying what it left in
PostgreSQL; deleting the namespace of a healthy view with deletionPolicy Delete completes and
drops its alias and indexes (the operator holds the sink Secret until the view is gone).

The operator runs as its own process; the kube-controller-manager's namespace controller
empties and removes the namespace, as on a cluster.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from dvstack.testing import replay
from dvstack.testing.traffic import LiveProducer
from dvstack.testing.waiting import wait_for
from support.e2e.operator import GATE_SECONDS, second_namespace
from support.e2e.views import (
    G,
    P,
    V,
    ViewHandle,
    ledger_rows,
    sink_relations,
    view_body,
    wait_alias_equals,
)

SECRET_FINALIZER = "derivedviews.io/sink-secret"  # written out: the test's own expectation




def test_a_view_whose_secret_is_gone_is_deleted_and_says_what_stayed(
        stack: Any, kube_api_client: Any, namespace: str, operator_process: Path) -> None:
    core, custom = client.CoreV1Api(kube_api_client), client.CustomObjectsApi(kube_api_client)
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    replay.create_topic(stack.kafka_bootstrap, topic, 2)
    table = f"gone_{uuid.uuid4().hex[:8]}"
    custom.create_namespaced_custom_object(G, V, namespace, P, view_body(
        namespace, "orphan", stack.kafka_bootstrap, topic, table, secret="never-created"))
    handle = ViewHandle(custom, namespace, "orphan")
    wait_for(lambda: handle.condition("Degraded").get("reason") == "SecretMissing",
             timeout=120, interval=0.5, what="the view to say SecretMissing")
    custom.delete_namespaced_custom_object(G, V, namespace, P, "orphan")
    wait_for(handle.gone, timeout=120, interval=0.5,
             what="the view without its Secret to be deleted (not held by its finalizer)")
    left = [(t, m) for t, _, m in handle.wait_events(core, "LeftBehind")]
    assert len(left) == 1, handle.events(core)
    kind, message = left[0]
    assert kind == "Warning"
    assert "never-created" in message and "not found" in message
    assert f"alias view public.{table}" in message
    assert f'DROP VIEW IF EXISTS "public"."{table}";' in message


@pytest.mark.slow
# Kopf stops serving a watched namespace once it is terminating (before the views in it are
# gone), so only an operator over all namespaces releases them: no other test's views beside
@pytest.mark.all_namespaces
def test_deleting_the_namespace_of_a_healthy_delete_view_drops_its_alias_and_indexes(
        stack: Any, kube_api_client: Any, namespace: str, operator_process: Path) -> None:
    core, custom = client.CoreV1Api(kube_api_client), client.CustomObjectsApi(kube_api_client)
    doomed = second_namespace(namespace)  # its own namespace: the test deletes it
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    replay.create_topic(stack.kafka_bootstrap, topic, 3)
    backlog = replay.make_orders(5_000, seed=61)
    replay.produce(stack.kafka_bootstrap, topic, backlog)
    replay.ensure_namespace_and_sink_secret(core, doomed, "views-db", stack.pg)
    replay.ensure_checkpoint_secret(core, doomed, stack.s3)
    table = f"nsdel_{uuid.uuid4().hex[:8]}"
    # a rate the shared 2-core machine replays well above, so the view gets within its gate
    producer = LiveProducer(stack.kafka_bootstrap, topic, rate=20, seed=67).start()
    try:
        custom.create_namespaced_custom_object(G, V, doomed, P, view_body(
            doomed, "orders", stack.kafka_bootstrap, topic, table, max_lag_seconds=GATE_SECONDS))
        handle = ViewHandle(custom, doomed, "orders")
        revision = handle.wait_serving_new(None, "the view to serve", timeout=900)
        secret = core.read_namespaced_secret("views-db", doomed)
        assert SECRET_FINALIZER in (secret.metadata.finalizers or [])
        live = producer.stop()
        assert producer.failures == []
        wait_alias_equals(stack.pg_dsn, table, backlog + live, ["orders", "revenue"],
                          "the alias to hold every record produced")
        assert sink_relations(stack.pg_dsn, table) == sorted([table, f"{table}__{revision}"])
        assert ledger_rows(stack.pg_dsn, revision) > 0

        core.delete_namespace(doomed)

        def namespace_gone() -> bool:
            try:
                core.read_namespace(doomed)
            except ApiException as exc:
                return exc.status == 404
            return False

        wait_for(namespace_gone, timeout=240, interval=1,
                 what="the namespace to be deleted (its view released, its Secret let go)")
    finally:
        producer.stop()
        try:  # a failed test must not leave its namespace (and its Spark driver) behind
            core.delete_namespace(doomed)
        except ApiException as exc:
            if exc.status not in (404, 409):  # gone, or already terminating
                raise
    assert sink_relations(stack.pg_dsn, table) == []
    assert ledger_rows(stack.pg_dsn, revision) == 0
