"""Every field an author writes is bounded: pydantic refuses one over its limit by the field's
name, the generated CRD carries the same limits, and a condition message is cut, not refused."""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

import pytest
from pydantic import ValidationError

from derived_views.api import crd
from derived_views.api.spec import DerivedViewSpec
from derived_views.api.status import (
    CONDITION_MESSAGE_LIMIT,
    CandidateStatus,
    CheckOutcome,
    CheckResult,
    Condition,
)

BASE: dict[str, Any] = {
    "source": {"kafka": {"bootstrapServers": "kafka:9092"}, "topics": ["orders"],
               "schema": "order_id STRING, amount DOUBLE"},
    "transform": {"sql": "SELECT * FROM events"},
    "sink": {"postgres": {"secretRef": {"name": "db"}, "table": "orders"},
             "primaryKey": ["order_id"]},
}


def _set(body: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    node = body
    *parents, leaf = path.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = value
    return body


def _assertion(sql: str) -> dict[str, Any]:
    return {"checks": {"assertions": [{"name": "a", "sql": sql}]}}


TOO_BIG: list[tuple[str, Any, str]] = [
    ("transform.sql", "SELECT * FROM events --" + "x" * 65536, "transform.sql"),
    ("source.schema", "a STRING, " * 3300, "source.schema"),
    ("source.topics", [f"t{i}" for i in range(101)], "source.topics"),
    ("source.topics", ["t" * 250], "source.topics.0"),
    ("spark.sparkConf", {f"spark.x{i}": "1" for i in range(257)}, "spark.sparkConf"),
    ("spark.sparkConf", {"spark.executorEnv.X": "v" * 4097},
     "spark.sparkConf.spark.executorEnv.X"),
    ("spark.sparkConf", {"spark." + "k" * 256: "1"}, "spark.sparkConf"),
    ("spark.image", "registry/" + "i" * 1020, "spark.image"),
    ("spark.checkpointBase", "s3a://" + "b" * 1020, "spark.checkpointBase"),
    ("spark.serviceAccount", "s" * 254, "spark.serviceAccount"),
    ("spark.sparkVersion", "4" * 65, "spark.sparkVersion"),
    ("cutover", _assertion("SELECT 1 FROM {index} WHERE " + "true AND " * 1900 + "true"),
     "cutover.checks.assertions.0.sql"),
    ("cutover.retainPreviousSeconds", 31 * 86400, "cutover.retainPreviousSeconds"),
    ("cutover.maxLagMessages", 10**13, "cutover.maxLagMessages"),
    ("cutover.progressDeadlineSeconds", 8 * 86400, "cutover.progressDeadlineSeconds"),
]


@pytest.mark.parametrize(("path", "value", "field"), TOO_BIG,
                         ids=[f"{p}:{f}" for p, _, f in TOO_BIG])
def test_a_field_over_its_limit_is_refused_by_name(path: str, value: Any, field: str) -> None:
    body = _set(copy.deepcopy(BASE), path, value)
    with pytest.raises(ValidationError) as info:
        DerivedViewSpec.model_validate(body)
    located = {".".join(str(p) for p in e["loc"]) for e in info.value.errors()}
    assert any(loc == field or loc.startswith(field + ".") for loc in located), located


def test_a_spec_at_its_limits_is_accepted() -> None:
    body = copy.deepcopy(BASE)
    body["transform"]["sql"] = "SELECT * FROM events --" + "x" * (65536 - 23)
    body["spark"] = {"sparkConf": {f"spark.x{i}": "v" * 4096 for i in range(256)}}
    assert len(body["transform"]["sql"]) == 65536
    DerivedViewSpec.model_validate(body)


def _spec_schema() -> dict[str, Any]:
    version = crd.crd()["spec"]["versions"][0]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return schema


def _unbounded(node: dict[str, Any], path: str) -> list[str]:
    kind, found = node.get("type"), []
    if kind == "string" and "maxLength" not in node and "enum" not in node:
        found.append(path)
    if kind == "array" and "maxItems" not in node:
        found.append(path)
    if kind == "object" and "additionalProperties" in node and "maxProperties" not in node:
        found.append(path)
    if kind in ("integer", "number") and "maximum" not in node:
        found.append(path)
    for name, child in (node.get("properties") or {}).items():
        found += _unbounded(child, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        found += _unbounded(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        found += _unbounded(node["additionalProperties"], f"{path}{{}}")
    return found


def test_every_field_of_the_crd_spec_is_bounded() -> None:
    assert _unbounded(_spec_schema(), "spec") == []


def test_the_crd_carries_the_models_limits() -> None:
    spec = _spec_schema()["properties"]
    assert spec["transform"]["properties"]["sql"]["maxLength"] == 65536
    assert spec["source"]["properties"]["schema"]["maxLength"] == 32768
    conf = spec["spark"]["properties"]["sparkConf"]
    assert conf["maxProperties"] == 256 and conf["additionalProperties"]["maxLength"] == 4096
    assert any("k.size() <= 256" in rule["rule"] for rule in conf["x-kubernetes-validations"])


def test_long_messages_are_cut_not_refused() -> None:
    now = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
    condition = Condition(type="Stalled", status="True", reason="InvalidTransform",
                          message="unknown column " + "x" * 32768, last_transition_time=now)
    assert len(condition.message) == CONDITION_MESSAGE_LIMIT
    assert condition.message.endswith("...")
    candidate = CandidateStatus(revision="r", index="t__r", phase="Pending", since=now,
                                message="m" * 10000)
    assert candidate.message is not None and len(candidate.message) == 4096
    result = CheckResult(name="c", outcome=CheckOutcome.Failed, observed="o" * 5000)
    assert result.observed is not None and len(result.observed) == 1024
