"""The DerivedView spec and status models: defaults, validation, camelCase on the wire."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import ValidationError

from derived_views.api.spec import DerivedViewSpec
from derived_views.api.status import DerivedViewStatus

MINIMAL: dict[str, Any] = {
    "source": {"kafka": {"bootstrapServers": "kafka:9092"}, "topics": ["orders"],
               "schema": "order_id STRING, amount DOUBLE"},
    "transform": {"sql": "SELECT * FROM events"},
    "sink": {"postgres": {"secretRef": {"name": "db"}, "table": "orders"},
             "primaryKey": ["order_id"]},
}


def test_defaults_of_a_minimal_spec() -> None:
    spec = DerivedViewSpec.model_validate(MINIMAL)
    assert spec.model_dump(mode="json", exclude_none=True) == {
        "source": {"kafka": {"bootstrapServers": "kafka:9092"}, "topics": ["orders"],
                   "format": "json", "schema": "order_id STRING, amount DOUBLE",
                   "maxOffsetsPerTrigger": 1_000_000, "badRecords": {"policy": "fail"},
                   "history": "complete"},
        "transform": {"sql": "SELECT * FROM events"},
        "sink": {"postgres": {"secretRef": {"name": "db"}, "table": "orders", "schema": "public"},
                 "primaryKey": ["order_id"]},
        "cutover": {"maxLagMessages": 0, "maxLagSeconds": 10, "stableForSeconds": 10,
                    "mode": "auto", "progressDeadlineSeconds": 600, "retainPreviousSeconds": 600,
                    "keepPreviousRunningSeconds": 300},
        "spark": {"sparkVersion": "4.0.0", "driver": {"cores": 1, "memory": "1g"},
                  "executor": {"instances": 0, "cores": 1, "memory": "1g"}, "sparkConf": {},
                  "restartPolicy": {"type": "OnFailure", "onFailureRetries": 3,
                                    "onFailureRetryInterval": 10}},
        "deletionPolicy": "Retain",
    }


def test_python_names_read_naturally() -> None:
    spec = DerivedViewSpec.model_validate(MINIMAL)
    assert spec.source.kafka.bootstrap_servers == "kafka:9092"
    assert spec.sink.postgres.db_schema == "public"
    assert spec.cutover.stable_for_seconds == 10


def mutated(path: list[str], value: Any, drop: bool = False) -> dict[str, Any]:
    body = copy.deepcopy(MINIMAL)
    node = body
    for key in path[:-1]:
        node = node.setdefault(key, {})
    if drop:
        node.pop(path[-1])
    else:
        node[path[-1]] = value
    return body


@pytest.mark.parametrize(("body", "message"), [
    (mutated(["transform", "python"], {"function": "m:f"}), "exactly one of transform.sql"),
    (mutated(["transform", "sql"], None, drop=True), "exactly one of transform.sql"),
    (mutated(["cutover"], {"stableForSeconds": 60, "deadlineSeconds": 60}),
     "stableForSeconds must be less than"),
    (mutated(["sink", "primaryKey"], []), "at least 1"),
    (mutated(["sink", "primaryKey"], ["_dv_deleted"]), "none starting with _dv_"),
    (mutated(["source", "topics"], []), "at least 1"),
    (mutated(["source", "topics"], ["bad topic"]), "pattern"),
    (mutated(["source", "format"], "protobuf"), "'json', 'debezium' or 'avro'"),
    (mutated(["source", "format"], "avro"), "format avro takes avro"),
    (mutated(["sink", "postgres", "table"], "Orders"), "pattern"),
    (mutated(["sink", "postgres", "table"], "t" * 41), "at most 40 characters"),
    (mutated(["transform", "sql"], None, drop=True) | {"transform": {"python": {
        "function": "not a function"}}}, "pattern"),
    (mutated(["spark"], {"driver": {"memory": "1 GB"}}), "pattern"),
    (mutated(["cutover"], {"deadlineSeconds": 0}), "greater than or equal to 1"),
    (mutated(["cutover"], {"stableForSeconds": 60, "progressDeadlineSeconds": 60}),
     "stableForSeconds must be less than cutover.progressDeadlineSeconds"),
    (mutated(["source", "maxOffsetsPerTrigger"], 0), "greater than or equal to 1"),
    (mutated(["source", "unknownField"], 1), "Extra inputs"),
    (mutated(["spark"], {"sparkConf": {"spark.kubernetes.container.image": "x:1"}}),
     "sparkConf must not set .*spark.kubernetes.container.image.*: use spec.spark.image"),
    (mutated(["spark"], {"sparkConf": {
        "spark.kubernetes.authenticate.driver.serviceAccountName": "admin"}}),
     "use spec.spark.serviceAccount"),
    (mutated(["spark"], {"sparkConf": {"spark.master": "k8s://https://elsewhere:443"}}),
     "sparkConf must not set spark.master"),
    (mutated(["spark"], {"sparkConf": {"spark.kubernetes.namespace": "kube-system"}}),
     "run in the view's namespace"),
    (mutated(["spark"], {"sparkConf": {"spark.kubernetes.authenticate.oauthToken": "t"}}),
     "ServiceAccount"),
    (mutated(["spark"], {"sparkConf": {"spark.kubernetes.driver.pod.name": "mine"}}),
     "driver pod"),
    (mutated(["spark"], {"sparkConf": {"spark.executor.memory": "8g"}}),
     "use spec.spark.executor"),
])
def test_invalid_specs_are_rejected(body: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        DerivedViewSpec.model_validate(body)


def test_status_round_trips_in_camel_case() -> None:
    document = {
        "observedGeneration": 3, "phase": "Backfilling", "revision": "5d31ce3608",
        "candidate": {"revision": "5d31ce3608", "index": "t__5d31ce3608", "phase": "Backfilling",
                      "since": "2026-03-01T12:00:00Z",
                      "lag": {"messages": 12, "seconds": 4, "partitions": {"orders/0": 12}},
                      "caughtUpSince": "2026-03-01T12:00:05Z"},
        "conditions": [{"type": "Ready", "status": "False", "reason": "Backfilling",
                        "message": "m", "lastTransitionTime": "2026-03-01T12:00:00Z",
                        "observedGeneration": 3}],
    }
    status = DerivedViewStatus.model_validate(document)
    assert status.model_dump(mode="json", exclude_none=True, exclude_defaults=True) == document


def test_condition_reasons_must_be_camel_case() -> None:
    with pytest.raises(ValidationError):
        DerivedViewStatus.model_validate({"conditions": [{
            "type": "Ready", "status": "True", "reason": "not camel case",
            "lastTransitionTime": "2026-03-01T12:00:00Z"}]})


def test_spark_tuning_the_operator_leaves_alone_is_accepted() -> None:
    body = mutated(["spark"], {"sparkConf": {"spark.sql.shuffle.partitions": "8",
                                             "spark.executor.memoryOverhead": "1g",
                                             "spark.kubernetes.executor.podNamePrefix": "dv"}})
    assert DerivedViewSpec.model_validate(body).spark.spark_conf["spark.sql.shuffle.partitions"] == "8"
