"""The manifests we write are valid SparkApplications for the real Spark Operator CRD.

The stack installs the pinned upstream CRD (dvstack.spark.crd), which is fully
structural: an unknown field would be pruned silently, so each manifest is
created with fieldValidation=Strict (an unknown or duplicate field is an
error) as a server-side dry run.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from derived_views.api.spec import DerivedViewSpec
from derived_views.core.job.sparkapplication import load_template, render_spark_application
from derived_views.core.revision import revision_of
from derived_views.core.settings import CheckpointSettings, Settings, SparkSettings
from dvstack.testing import replay

G, V, P = "sparkoperator.k8s.io", "v1beta2", "sparkapplications"
SNAPSHOT = Path(__file__).resolve().parents[2] / "unit" / "core" / "job" / "snapshots" / \
    "sparkapplication.yaml"
BODY: dict[str, Any] = {
    "source": {"kafka": {"bootstrapServers": "kafka:9092", "secretRef": {"name": "kafka-creds"}},
               "topics": ["orders"], "schema": "order_id STRING, customer_id STRING, amount DOUBLE"},
    "transform": {"sql": "SELECT customer_id, count(*) AS orders FROM events GROUP BY customer_id"},
    "sink": {"postgres": {"secretRef": {"name": "views-db"}, "table": "orders_by_customer"},
             "primaryKey": ["customer_id"]},
}


def _rendered(body: dict[str, Any], namespace: str) -> dict[str, Any]:
    config = Settings(spark=SparkSettings(template=load_template(), image="registry.example/job:1", jars=("local:///opt/spark/jars/spark-sql-kafka.jar",), service_account="spark"), checkpoints=CheckpointSettings(base="s3a://checkpoints/dv"))
    spec = DerivedViewSpec.model_validate(body)
    revision = revision_of(spec)
    return render_spark_application(
        config.spark.template, settings=config, namespace=namespace, view="orders-by-customer",
        uid="0d4b7c1e-5f2a-4c8e-9a71-3f9c2b6d8e10", spec=spec, revision=revision,
        checkpoint_location=f"s3a://checkpoints/dv/{namespace}/orders-by-customer/{revision}")


def _snapshot(namespace: str) -> dict[str, Any]:
    manifest: dict[str, Any] = yaml.safe_load(SNAPSHOT.read_text())
    manifest["metadata"]["namespace"] = namespace
    return manifest


def _python_transform() -> dict[str, Any]:
    body = copy.deepcopy(BODY)
    body["transform"] = {"python": {"function": "views.orders:by_customer",
                                    "pyFiles": ["s3a://code/views.zip"]}}
    body["spark"] = {"image": "custom:2", "serviceAccount": "view-sa",
                     "restartPolicy": {"type": "Never"},
                     "executor": {"instances": 2, "memory": "2g"},
                     "sparkConf": {"spark.sql.shuffle.partitions": "8"}}
    return body


MANIFESTS = {
    "reviewed render snapshot": lambda ns: _snapshot(ns),
    "render, SQL transform": lambda ns: _rendered(BODY, ns),
    "render, Python transform and overrides": lambda ns: _rendered(_python_transform(), ns),
    "dvstack replay (demo, benchmarks)": lambda ns: replay.spark_application(
        name="demo", namespace=ns, revision="r1", view=f"{ns}/v", bootstrap="127.0.0.1:9092",
        topics=["t"], sql="SELECT 1 AS x", table="t__r1", primary_key=["x"], secret="views-db",
        checkpoint="/tmp/cp", image_app_root="/opt/derived-views", restart_retries=2),
}


@pytest.mark.parametrize("kind", sorted(MANIFESTS))
def test_the_real_crd_accepts_the_manifest_strictly(kube_api_client: Any, namespace: str,
                                                    kind: str) -> None:
    manifest = MANIFESTS[kind](namespace)
    manifest["metadata"].pop("ownerReferences", None)  # the owner does not exist here
    custom = client.CustomObjectsApi(kube_api_client)
    try:
        created = custom.create_namespaced_custom_object(
            G, V, namespace, P, manifest, dry_run="All", field_validation="Strict")
    except ApiException as exc:
        pytest.fail(f"the Spark Operator CRD refused the {kind}: {exc.body}", pytrace=False)
    assert created["spec"] == manifest["spec"]


def test_the_real_crd_requires_driver_and_executor(kube_api_client: Any, namespace: str) -> None:
    manifest = _rendered(BODY, namespace)
    del manifest["spec"]["executor"]
    manifest["metadata"].pop("ownerReferences")
    with pytest.raises(ApiException) as refused:
        client.CustomObjectsApi(kube_api_client).create_namespaced_custom_object(
            G, V, namespace, P, manifest, dry_run="All")
    assert refused.value.status == 422 and "spec.executor" in str(refused.value.body)
