"""Jobs in a job namespace, against the real API server and its garbage collector: the
creation writes the view's Secret copies owned by the job, a second job adds itself as an
owner, the platform's own checkpoint Secret is left as it is, and the copies go with the last
job that mounts them."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from derived_views.adapters.kube.client import SPARK_GROUP, SPARK_PLURAL, SPARK_VERSION, Kube
from derived_views.api.constants import JOBS_FOR_LABEL
from derived_views.core import actions as A
from derived_views.reconcile.act import create_job
from dvstack.testing.waiting import wait_for
from support.stand_ins.deps import pass_deps

pytestmark = pytest.mark.integration


@pytest.fixture()
def spaces(kube_api_client: Any) -> Iterator[tuple[str, str, str]]:
    """(tenant, its job namespace, the operator's), deleted afterwards."""
    core = client.CoreV1Api(kube_api_client)
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    names = (tenant, f"{tenant}-dv-jobs", f"{tenant}-ops")
    for name in names:
        labels = {JOBS_FOR_LABEL: tenant} if name.endswith("-dv-jobs") else {}
        core.create_namespace({"metadata": {"name": name, "labels": labels}})
    yield names
    for name in names:
        core.delete_namespace(name)


def _secret(core: Any, namespace: str, name: str, value: str, labels: dict[str, str] | None
            = None) -> None:
    core.create_namespaced_secret(namespace, {"metadata": {"name": name, "labels": labels or {}},
                                              "data": {"password": base64.b64encode(
                                                  value.encode()).decode()}})


def _job(name: str, namespace: str) -> A.CreateSparkApplication:
    manifest = {"apiVersion": f"{SPARK_GROUP}/{SPARK_VERSION}", "kind": "SparkApplication",
                "metadata": {"name": name, "namespace": namespace,
                             "labels": {"derivedviews.io/view": "orders",
                                        "derivedviews.io/view-namespace": "t"}},
                "spec": {"type": "Python", "mode": "cluster", "sparkVersion": "4.0.0",
                         "mainApplicationFile": "local:///job.py",
                         "driver": {"cores": 1, "memory": "512m"},
                         "executor": {"instances": 1, "cores": 1, "memory": "512m"}}}
    return A.CreateSparkApplication("r", name, manifest)


def test_copies_are_owned_by_the_jobs_that_mount_them_and_go_with_the_last(
        kube_api_client: Any, spaces: tuple[str, str, str]) -> None:
    tenant, jobs, ops = spaces
    core, custom = client.CoreV1Api(kube_api_client), client.CustomObjectsApi(kube_api_client)
    kube = Kube(kube_api_client)
    deps = pass_deps(kube)
    _secret(core, tenant, "views-db", "tenant-password", {"derivedviews.io/view-secret": "true"})
    _secret(core, ops, "dv-checkpoints", "store-key")
    copies = (A.SecretCopy(tenant, "views-db", "dv-orders-views-db"),
              A.SecretCopy(ops, "dv-checkpoints", "dv-checkpoints", platform=True))
    first, second = (_job(f"orders-{r}", jobs) for r in ("aaaa", "bbbb"))
    create_job(A.CreateSparkApplication(first.revision, first.name, first.manifest, copies), deps)
    create_job(A.CreateSparkApplication(second.revision, second.name, second.manifest, copies),
               deps)
    apps = {a["metadata"]["name"]: a["metadata"]["uid"] for a in custom.list_namespaced_custom_object(
        SPARK_GROUP, SPARK_VERSION, jobs, SPARK_PLURAL)["items"]}
    for name in ("dv-orders-views-db", "dv-checkpoints"):
        copied = core.read_namespaced_secret(name, jobs)
        assert sorted(o.uid for o in copied.metadata.owner_references) == sorted(apps.values())
        assert copied.metadata.labels["app.kubernetes.io/managed-by"] == "derived-views"
    assert base64.b64decode(core.read_namespaced_secret("dv-orders-views-db", jobs)
                            .data["password"]).decode() == "tenant-password"
    # the tenant rotates its password: the next job's creation writes it again
    core.patch_namespaced_secret("views-db", tenant, {"data": {"password": base64.b64encode(
        b"rotated").decode()}})
    create_job(A.CreateSparkApplication(second.revision, second.name, second.manifest, copies),
               deps)
    assert base64.b64decode(core.read_namespaced_secret("dv-orders-views-db", jobs)
                            .data["password"]).decode() == "rotated"
    # the last job gone, its copies go (the controller manager's garbage collector)
    for name in apps:
        custom.delete_namespaced_custom_object(SPARK_GROUP, SPARK_VERSION, jobs, SPARK_PLURAL,
                                               name)

    def gone() -> bool:
        try:
            core.read_namespaced_secret("dv-orders-views-db", jobs)
        except ApiException as exc:
            return exc.status == 404
        return False

    wait_for(gone, timeout=120, interval=0.5, what="the copy to go with its last job")


def test_the_platforms_own_checkpoint_secret_is_left_as_it_is(
        kube_api_client: Any, spaces: tuple[str, str, str]) -> None:
    _tenant, jobs, ops = spaces
    core = client.CoreV1Api(kube_api_client)
    deps = pass_deps(Kube(kube_api_client))
    _secret(core, ops, "dv-checkpoints", "shared-key")
    _secret(core, jobs, "dv-checkpoints", "scoped-key")  # made by the platform for this tenant
    job = _job("orders-cccc", jobs)
    create_job(A.CreateSparkApplication(job.revision, job.name, job.manifest, (
        A.SecretCopy(ops, "dv-checkpoints", "dv-checkpoints", platform=True),)), deps)
    kept = core.read_namespaced_secret("dv-checkpoints", jobs)
    assert base64.b64decode(kept.data["password"]).decode() == "scoped-key"
    assert not kept.metadata.owner_references
