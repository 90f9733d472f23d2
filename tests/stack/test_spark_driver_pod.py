"""The driver pod has upstream's name, labels and owner; the webhook's fields only in its scope."""

from __future__ import annotations

from typing import Any

from dvstack.spark.driver_pod import driver_pod, in_scope

ENV = [{"name": "PGPASSWORD", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}]
APP: dict[str, Any] = {
    "metadata": {"name": "orders-71250ff800", "namespace": "shop", "uid": "u-1",
                 "labels": {"derivedviews.io/view": "orders", "kueue.x-k8s.io/queue-name": "q"}},
    "spec": {"type": "Python", "sparkVersion": "4.0.0", "image": "registry.example/job:1",
             "driver": {"env": ENV, "envFrom": [{"secretRef": {"name": "bulk"}}],
                        "envVars": {"PLAIN": "1"},
                        "envSecretKeyRefs": {"TOKEN": {"name": "t", "key": "k"}},
                        "labels": {"team": "views"}, "annotations": {"a": "b"},
                        "serviceAccount": "spark", "terminationGracePeriodSeconds": 5}},
}


def pod(mutated: bool) -> dict[str, Any]:
    return driver_pod(APP, submission_id="sub-1", app_id="spark-abc", node_name="n1",
                      command=["spark-submit", "--master", "local[1]", "job.py"], mutated=mutated)


def test_name_labels_container_and_owner() -> None:
    p = pod(mutated=True)
    assert p["metadata"]["name"] == "orders-71250ff800-driver"
    assert p["metadata"]["namespace"] == "shop"
    assert p["metadata"]["labels"] == {
        "derivedviews.io/view": "orders", "team": "views",
        "sparkoperator.k8s.io/app-name": "orders-71250ff800",
        "sparkoperator.k8s.io/launched-by-spark-operator": "true",
        "sparkoperator.k8s.io/mutated-by-spark-operator": "true",
        "sparkoperator.k8s.io/submission-id": "sub-1",
        "spark-app-selector": "spark-abc", "spark-role": "driver", "spark-version": "4.0.0",
        "spark-app-name": "orders-71250ff800"}
    assert p["metadata"]["annotations"] == {"a": "b"}
    assert p["metadata"]["ownerReferences"] == [{
        "apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "SparkApplication",
        "name": "orders-71250ff800", "uid": "u-1", "controller": True,
        "blockOwnerDeletion": True}]
    spec = p["spec"]
    assert (spec["nodeName"], spec["restartPolicy"], spec["serviceAccountName"]) == \
        ("n1", "Never", "spark")
    assert spec["terminationGracePeriodSeconds"] == 5
    (container,) = spec["containers"]
    assert container["name"] == "spark-kubernetes-driver"
    assert container["image"] == "registry.example/job:1"
    assert container["command"] == ["spark-submit"]
    assert container["args"] == ["--master", "local[1]", "job.py"]
    assert container["terminationMessagePath"] == "/dev/termination-log"
    assert container["env"] == [
        {"name": "PLAIN", "value": "1"},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "t", "key": "k"}}}, *ENV]
    assert container["envFrom"] == [{"secretRef": {"name": "bulk"}}]


def test_outside_the_webhook_scope_only_spark_submits_own_fields_remain() -> None:
    p = pod(mutated=False)
    assert "ownerReferences" not in p["metadata"]
    assert "terminationGracePeriodSeconds" not in p["spec"]
    (container,) = p["spec"]["containers"]
    assert [e["name"] for e in container["env"]] == ["PLAIN", "TOKEN"]
    assert "envFrom" not in container


def test_namespace_scope_lists() -> None:
    assert in_scope("shop", frozenset())
    assert in_scope("shop", frozenset({""}))
    assert in_scope("shop", frozenset({"shop", "other"}))
    assert not in_scope("shop", frozenset({"other"}))


def test_driver_secrets_are_mounted_as_spark_submit_mounts_them() -> None:
    """Spark's MountSecretsFeatureStep: volume `<name>-volume` of the Secret, mounted at the
    entry's cluster path, with or without the webhook (it is spark-submit's doing)."""
    secrets = [{"name": "views-db", "path": "/mnt/secrets/views-db", "secretType": "Generic"},
               {"name": "kafka", "path": "/mnt/secrets/kafka", "secretType": "Generic"}]
    app = {**APP, "spec": {**APP["spec"], "driver": {"secrets": secrets},
                           "executor": {"secrets": [{"name": "exec-only", "path": "/e",
                                                     "secretType": "Generic"}]}}}
    for mutated in (True, False):
        p = driver_pod(app, submission_id="s", app_id="spark-abc", node_name="n1",
                       command=["spark-submit"], mutated=mutated)
        assert p["spec"]["volumes"] == [
            {"name": "views-db-volume", "secret": {"secretName": "views-db"}},
            {"name": "kafka-volume", "secret": {"secretName": "kafka"}}]
        assert p["spec"]["containers"][0]["volumeMounts"] == [
            {"name": "views-db-volume", "mountPath": "/mnt/secrets/views-db"},
            {"name": "kafka-volume", "mountPath": "/mnt/secrets/kafka"}]


def test_without_driver_secrets_the_pod_has_no_volumes() -> None:
    p = pod(mutated=True)
    assert "volumes" not in p["spec"] and "volumeMounts" not in p["spec"]["containers"][0]
