"""Two namespaces, one database: a view never takes over another view's index.

Two views with the same SQL and the same sink table in two namespaces name the same index
(`<table>__<revision>`: the revision hashes the content). The first view's job records its
view (namespace, name, UID) on the index it creates; the second view is refused (Stalled,
no job), and deleting it with deletionPolicy Delete leaves the first's index, alias, owner
record and ledger rows exactly as they were, while a producer writes throughout and the
alias is compared with the test's own recomputation of every record.

The first test runs the jobs where the chart does, in each namespace's job namespace
(DV_JOB_NAMESPACE): a tenant with `edit` in its namespace can neither exec into its job nor
read the Secrets mounted there, the checkpoint Secret is in no tenant's namespace, and the
copies of the view's Secrets go with its last job.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from dvstack.testing import replay
from dvstack.testing.traffic import LiveProducer
from dvstack.testing.waiting import wait_for
from support.e2e.operator import GATE_SECONDS, jobs_of, second_namespace
from support.e2e.views import (
    G,
    P,
    V,
    ViewHandle,
    ledger_rows,
    orders_backlog,
    sink_relations,
    view_body,
    wait_alias_equals,
)

REFUSALS = ("IndexOwnedByAnotherView", "SinkTableClaimed")
"""The second view's Stalled reason: the index's recorded owner, or (once the first serves)
the alias's."""


def _owner(dsn: str, table: str) -> dict[str, str] | None:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT obj_description(to_regclass(%s), 'pg_class')",
                           (f'public."{table}"',)).fetchone()
    if row is None or row[0] is None:
        return None
    owner: dict[str, str] = json.loads(row[0])["derivedviews.io/owner"]
    return owner




def _apps(custom: Any, namespace: str) -> list[str]:
    found = custom.list_namespaced_custom_object("sparkoperator.k8s.io", "v1beta2", namespace,
                                                 "sparkapplications")
    return [str(item["metadata"]["name"]) for item in found.get("items", [])]


def _delete(custom: Any, handle: ViewHandle) -> None:
    try:
        custom.delete_namespaced_custom_object(G, V, handle.namespace, P, handle.name)
    except ApiException as exc:
        if exc.status != 404:
            raise


def _may(kube_api_client: Any, user: str, verb: str, resource: str, namespace: str,
         subresource: str = "") -> bool:
    """What the API server's RBAC lets `user` do (a SubjectAccessReview, as `kubectl auth
    can-i --as` asks it)."""
    review = client.AuthorizationV1Api(kube_api_client).create_subject_access_review(
        client.V1SubjectAccessReview(spec=client.V1SubjectAccessReviewSpec(
            user=user, groups=["system:serviceaccounts", "system:authenticated"],
            resource_attributes=client.V1ResourceAttributes(
                verb=verb, resource=resource, namespace=namespace,
                subresource=subresource or None))))
    return bool(review.status.allowed)


@pytest.mark.job_namespaces
def test_a_second_namespace_s_view_of_the_same_table_is_refused_and_deleting_it_drops_nothing(
        stack: Any, kube_api_client: Any, namespace: str, operator_process: Path) -> None:
    core, custom = client.CoreV1Api(kube_api_client), client.CustomObjectsApi(kube_api_client)
    rbac = client.RbacAuthorizationV1Api(kube_api_client)
    topic, backlog = orders_backlog(stack, core, namespace, 3_000, seed=83,
                                   age_seconds=3600)  # older than the gate
    other_ns = second_namespace(namespace)
    replay.ensure_namespace_and_sink_secret(core, other_ns, "views-db", stack.pg)
    jobs = jobs_of(namespace)
    # the tenant: `edit` in its own namespace, as the aggregated roles give teams
    tenant = f"system:serviceaccount:{namespace}:team"
    rbac.create_namespaced_role_binding(namespace, {
        "metadata": {"name": "team-edit"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "edit"},
        "subjects": [{"kind": "ServiceAccount", "name": "team", "namespace": namespace}]})
    table = f"twins_{uuid.uuid4().hex[:8]}"
    first = ViewHandle(custom, namespace, "orders")
    second = ViewHandle(custom, other_ns, "orders")
    producer = LiveProducer(stack.kafka_bootstrap, topic, rate=20, seed=89).start()
    try:
        custom.create_namespaced_custom_object(G, V, namespace, P, view_body(
            namespace, "orders", stack.kafka_bootstrap, topic, table, max_lag_seconds=GATE_SECONDS))
        wait_for(lambda: bool(first.status().get("revision")), timeout=120, interval=0.5,
                 what="the first view's revision")
        revision = str(first.status()["revision"])
        index = f"{table}__{revision}"
        first_uid = str(first.get()["metadata"]["uid"])
        # Its job has created the index and recorded its owner: the same content in another
        # namespace now names an index that is not its own.
        wait_for(lambda: _owner(stack.pg_dsn, index) is not None, timeout=600, interval=1,
                 what="the first view's job to create its index")
        assert _owner(stack.pg_dsn, index) == {"namespace": namespace, "name": "orders",
                                               "uid": first_uid}
        custom.create_namespaced_custom_object(G, V, other_ns, P, view_body(
            other_ns, "orders", stack.kafka_bootstrap, topic, table, max_lag_seconds=GATE_SECONDS))
        wait_for(lambda: second.condition("Stalled").get("reason") in REFUSALS, timeout=120,
                 interval=0.5, what="the second view to be refused")
        refusal = second.condition("Stalled")
        message = str(refusal.get("message"))
        assert f"{namespace}/orders" in message
        if refusal.get("reason") == "IndexOwnedByAnotherView":  # before the first served
            assert index in message and first_uid in message
        assert second.status().get("revision") == revision  # same content, same index name
        assert _apps(custom, other_ns) == [] and _apps(custom, jobs_of(other_ns)) == []

        first.wait_serving_new(None, "the first view to serve", timeout=900)
        assert first.active() == revision
        assert second.condition("Stalled").get("reason") in REFUSALS
        assert _apps(custom, other_ns) == [] and _apps(custom, jobs_of(other_ns)) == []
        # where its job runs: in its job namespace, out of the tenant's reach
        assert _apps(custom, namespace) == []
        app = one_app(custom, jobs)
        copies = {s.metadata.name: s for s in core.list_namespaced_secret(jobs).items}
        assert {"dv-orders-views-db", replay.CHECKPOINT_SECRET} <= set(copies)
        for copied in copies.values():
            assert [o.uid for o in copied.metadata.owner_references or []] == [
                app["metadata"]["uid"]]
        assert replay.CHECKPOINT_SECRET not in {
            s.metadata.name for s in core.list_namespaced_secret(namespace).items}
        assert _may(kube_api_client, tenant, "get", "secrets", namespace)  # its own: yes
        for verb, resource, sub in (("create", "pods", "exec"), ("get", "pods", ""),
                                    ("get", "secrets", ""), ("list", "secrets", ""),
                                    ("create", "pods", ""), ("delete", "sparkapplications", "")):
            assert not _may(kube_api_client, tenant, verb, resource, jobs, sub), (verb, resource)

        # Deleting the refused view (deletionPolicy Delete) drops nothing of the first's.
        relations = sink_relations(stack.pg_dsn, table)
        assert relations == sorted([table, index])
        ledger_before = ledger_rows(stack.pg_dsn, revision)
        assert ledger_before > 0
        _delete(custom, second)
        wait_for(second.gone, timeout=120, interval=0.5, what="the second view to be deleted")
        assert sink_relations(stack.pg_dsn, table) == relations
        assert _owner(stack.pg_dsn, index) == {"namespace": namespace, "name": "orders",
                                               "uid": first_uid}
        assert ledger_rows(stack.pg_dsn, revision) >= ledger_before  # the job still commits
        assert first.active() == revision
        # Ready is the first view's freshness too: on a loaded machine a view that switched
        # at its gate's edge may be a pass behind it here, which is not this test's subject
        wait_for(first.ready, timeout=180, interval=0.5, what="the first view to be Ready",
                 on_timeout=lambda: f"Ready: {first.condition('Ready')}")

        live = producer.stop()
        assert producer.failures == []
        wait_alias_equals(stack.pg_dsn, table, backlog + live, ["orders", "revenue"],
                          "the first view's alias to hold every record produced")
    finally:
        producer.stop()
        _delete_views_and_namespace(core, custom, (second, first), other_ns)
    assert sink_relations(stack.pg_dsn, table) == []
    assert ledger_rows(stack.pg_dsn, revision) == 0
    # the copies went with the view's last job (Kubernetes' garbage collector)
    wait_for(lambda: _apps(custom, jobs) == [] and not core.list_namespaced_secret(
        jobs, label_selector="app.kubernetes.io/managed-by=derived-views").items,
        timeout=120, interval=1, what="the job's Secret copies to go with it")


def one_app(custom: Any, namespace: str) -> dict[str, Any]:
    found = custom.list_namespaced_custom_object("sparkoperator.k8s.io", "v1beta2", namespace,
                                                 "sparkapplications")["items"]
    assert len(found) == 1, [i["metadata"]["name"] for i in found]
    return dict(found[0])


def test_identical_sql_on_two_tables_of_one_schema_both_serve_and_one_s_deletion_spares_the_other(
        stack: Any, kube_api_client: Any, namespace: str, operator_process: Path) -> None:
    core, custom = client.CoreV1Api(kube_api_client), client.CustomObjectsApi(kube_api_client)
    topic, backlog = orders_backlog(stack, core, namespace, 2_000, seed=97,
                                   age_seconds=3600)  # older than the gate
    other_ns = second_namespace(namespace)
    replay.ensure_namespace_and_sink_secret(core, other_ns, "views-db", stack.pg)
    replay.ensure_checkpoint_secret(core, other_ns, stack.s3)
    kept_table, gone_table = (f"same_{uuid.uuid4().hex[:8]}" for _ in range(2))
    kept = ViewHandle(custom, namespace, "orders")
    gone = ViewHandle(custom, other_ns, "orders")
    producer = LiveProducer(stack.kafka_bootstrap, topic, rate=20, seed=101).start()
    kept_revision = ""
    try:
        custom.create_namespaced_custom_object(G, V, namespace, P, view_body(
            namespace, "orders", stack.kafka_bootstrap, topic, kept_table,
            max_lag_seconds=GATE_SECONDS))
        custom.create_namespaced_custom_object(G, V, other_ns, P, view_body(
            other_ns, "orders", stack.kafka_bootstrap, topic, gone_table,
            max_lag_seconds=GATE_SECONDS))
        kept_revision = kept.wait_serving_new(None, "the first view to serve", timeout=900)
        gone_revision = gone.wait_serving_new(None, "the second view to serve", timeout=900)
        assert kept_revision != gone_revision  # the table is content: no shared index name
        kept_index = f"{kept_table}__{kept_revision}"
        assert _owner(stack.pg_dsn, kept_index) == {
            "namespace": namespace, "name": "orders", "uid": str(kept.get()["metadata"]["uid"])}
        assert _owner(stack.pg_dsn, f"{gone_table}__{gone_revision}") == {
            "namespace": other_ns, "name": "orders", "uid": str(gone.get()["metadata"]["uid"])}
        _delete(custom, gone)
        wait_for(gone.gone, timeout=180, interval=0.5, what="the second view to be deleted")
        assert sink_relations(stack.pg_dsn, gone_table) == []
        assert ledger_rows(stack.pg_dsn, gone_revision) == 0
        assert sink_relations(stack.pg_dsn, kept_table) == sorted([kept_table, kept_index])
        assert kept.ready() and kept.active() == kept_revision
        live = producer.stop()
        assert producer.failures == []
        wait_alias_equals(stack.pg_dsn, kept_table, backlog + live, ["orders", "revenue"],
                          "the remaining view's alias to hold every record produced")
    finally:
        producer.stop()
        _delete_views_and_namespace(core, custom, (gone, kept), other_ns)
    assert sink_relations(stack.pg_dsn, kept_table) == []


def _delete_views_and_namespace(core: Any, custom: Any, handles: tuple[ViewHandle, ...],
                                other_ns: str) -> None:
    """Delete the views (before the operator stops: it releases them), then the second
    namespace the test made."""
    for handle in handles:
        _delete(custom, handle)
    wait_for(lambda: all(h.gone() for h in handles), timeout=180, interval=0.5,
             what="both views to be deleted")
    try:
        core.delete_namespace(other_ns)
    except ApiException as exc:
        if exc.status not in (404, 409):
            raise
