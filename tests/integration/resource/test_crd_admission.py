"""The generated DerivedView CRD in a real API server: accepted, and bad input rejected early."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from dvstack.cli import apply_crds
from support.corpora.admission_catalogue import VALID, G, P, V
from support.paths import REPO

CRD = REPO / "crds" / "derivedviews.io_derivedviews.yaml"


@pytest.fixture(scope="module")
def crd_installed(kube_api_client: Any) -> None:
    apply_crds(kube_api_client, [CRD])


def _create(kube_api_client: Any, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
    api = client.CustomObjectsApi(kube_api_client)
    created: dict[str, Any] = api.create_namespaced_custom_object(G, V, namespace, P, body)
    return created


def test_valid_view_is_accepted(crd_installed: None, kube_api_client: Any, namespace: str) -> None:
    body = copy.deepcopy(VALID)
    body["spec"]["cutover"] = {"stableForSeconds": 5}  # the rest comes from schema defaults
    created = _create(kube_api_client, namespace, body)
    assert created["spec"]["sink"]["primaryKey"] == ["order_id"]
    cutover = created["spec"]["cutover"]
    assert (cutover["progressDeadlineSeconds"], cutover["maxLagSeconds"]) == (600, 10)
    assert "deadlineSeconds" not in cutover  # no age cap unless asked for
    assert created["spec"]["source"]["maxOffsetsPerTrigger"] == 1_000_000


def test_spark_tuning_is_accepted(crd_installed: None, kube_api_client: Any, namespace: str) -> None:
    body = copy.deepcopy(VALID)
    body["spec"]["spark"] = {"sparkConf": {"spark.sql.shuffle.partitions": "8",
                                           "spark.executor.memoryOverhead": "1g"}}
    created = _create(kube_api_client, namespace, body)
    assert created["spec"]["spark"]["sparkConf"]["spark.sql.shuffle.partitions"] == "8"


@pytest.mark.parametrize(("mutate", "expected"), [
    (lambda s: s["transform"].update(python={"function": "m:f"}),
     "set exactly one of transform.sql or transform.python"),
    (lambda s: s["transform"].pop("sql"), "set exactly one of transform.sql or transform.python"),
    (lambda s: s.update(cutover={"stableForSeconds": 100, "deadlineSeconds": 50}),
     "stableForSeconds must be less than cutover.deadlineSeconds"),
    (lambda s: s.update(cutover={"stableForSeconds": 100, "progressDeadlineSeconds": 50}),
     "stableForSeconds must be less than cutover.progressDeadlineSeconds"),
    (lambda s: s["source"].update(maxOffsetsPerTrigger=0), "spec.source.maxOffsetsPerTrigger"),
    (lambda s: s["sink"].update(primaryKey=[]), "spec.sink.primaryKey"),
    (lambda s: s["source"].update(topics=["bad topic!"]), "spec.source.topics[0]"),
    (lambda s: s["source"].update(format="protobuf"), "spec.source.format"),
    (lambda s: s["sink"]["postgres"].update(table="Orders-Table"), "spec.sink.postgres.table"),
    (lambda s: s.update(spark={"sparkConf": {"spark.kubernetes.driver.container.image": "x:1"}}),
     "spec.spark.sparkConf must not set spark.kubernetes.container.image, "
     "spark.kubernetes.driver.container.image, spark.kubernetes.executor.container.image "
     "(the Spark Operator sets or denies them): use spec.spark.image"),
    (lambda s: s.update(spark={"sparkConf": {
        "spark.kubernetes.authenticate.executor.serviceAccountName": "cluster-admin"}}),
     "use spec.spark.serviceAccount"),
    (lambda s: s.update(spark={"sparkConf": {"spark.master": "k8s://https://elsewhere:443"}}),
     "must not set spark.master"),
    (lambda s: s.update(spark={"sparkConf": {"spark.kubernetes.namespace": "kube-system"}}),
     "run in the view's namespace"),
    (lambda s: s.update(spark={"sparkConf": {
        "spark.kubernetes.authenticate.driver.oauthTokenFile": "/var/run/x"}}),
     "grant spec.spark.serviceAccount what the job needs"),
    (lambda s: s.update(spark={"sparkConf": {"spark.app.name": "mine"}}),
     "reads causes from its driver pod"),
    (lambda s: s.update(spark={"sparkConf": {"spark.driver.memory": "8g"}}),
     "use spec.spark.driver"),
])
def test_bad_views_are_rejected_with_a_clear_message(
        crd_installed: None, kube_api_client: Any, namespace: str, mutate: Any, expected: str) -> None:
    body = copy.deepcopy(VALID)
    mutate(body["spec"])
    with pytest.raises(ApiException) as rejected:
        _create(kube_api_client, namespace, body)
    assert rejected.value.status == 422
    assert expected in str(rejected.value.body)
