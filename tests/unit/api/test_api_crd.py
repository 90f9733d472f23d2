"""The generated CRD: committed file up to date, structural, documented, with its CEL rules."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from derived_views.api import crd
from support.paths import REPO

COMMITTED = REPO / "crds" / "derivedviews.io_derivedviews.yaml"
REGENERATE = "python -m derived_views.api.crd --output crds/derivedviews.io_derivedviews.yaml"


def version() -> dict[str, Any]:
    versions: list[dict[str, Any]] = crd.crd()["spec"]["versions"]
    assert len(versions) == 1
    return versions[0]


def schema() -> dict[str, Any]:
    root: dict[str, Any] = version()["schema"]["openAPIV3Schema"]
    return root


def walk(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, node
    for name, child in (node.get("properties") or {}).items():
        yield from walk(child, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from walk(node["additionalProperties"], f"{path}{{}}")


def test_committed_crd_matches_the_generator() -> None:
    assert COMMITTED.read_text() == crd.render(), f"the CRD drifted: run `{REGENERATE}`"


def test_cli_writes_the_same_text(tmp_path: Path) -> None:
    out = tmp_path / "crd.yaml"
    assert crd.print_crd(["--output", str(out)]) == 0
    assert out.read_text() == crd.render()


def test_identity_and_versions() -> None:
    body = crd.crd()
    assert body["metadata"]["name"] == "derivedviews.derivedviews.io"
    names = body["spec"]["names"]
    assert (names["kind"], names["plural"], names["shortNames"]) == (
        "DerivedView", "derivedviews", ["dv"])
    assert body["spec"]["scope"] == "Namespaced"
    v = version()
    assert (v["name"], v["served"], v["storage"]) == ("v1alpha1", True, True)
    assert v["subresources"] == {"status": {}}


def test_views_are_not_in_the_all_category() -> None:
    names = crd.crd()["spec"]["names"]
    assert names["categories"] == ["derived-views"]  # `kubectl delete all --all` spares them


def test_printer_columns() -> None:
    columns = {c["name"]: c["jsonPath"] for c in version()["additionalPrinterColumns"]}
    assert columns == {"Active": ".status.active.revision",
                       "Candidate": ".status.candidate.revision", "Phase": ".status.phase",
                       "Lag": ".status.lagMessages", "Bad": ".status.badRecords",
                       "Checks": ".status.checks",
                       "Ready": '.status.conditions[?(@.type=="Ready")].status',
                       "Age": ".metadata.creationTimestamp",
                       "Message": '.status.conditions[?(@.type=="Ready")].message'}
    wide_only = [c["name"] for c in version()["additionalPrinterColumns"] if c.get("priority")]
    assert wide_only == ["Message"]  # `kubectl get -o wide`, as cert-manager's Status


def test_schema_is_structural() -> None:
    for path, node in walk(schema()):
        if node.get("x-kubernetes-int-or-string"):  # a count or a percentage: the one form
            assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}], path
            assert "type" not in node, path
            continue
        assert "type" in node, f"{path} has no type"
        for keyword in ("anyOf", "oneOf", "allOf", "not", "$ref", "nullable", "uniqueItems",
                        "title", "exclusiveMinimum", "exclusiveMaximum"):
            assert keyword not in node, f"{path} uses {keyword}"
        assert not ("properties" in node and "additionalProperties" in node), path
        if node["type"] == "object" and path not in ("", ".metadata"):
            assert "properties" in node or "additionalProperties" in node, path


def test_every_spec_and_status_field_is_described() -> None:
    for path, node in walk(schema()):
        if path.startswith((".spec", ".status")) and not path.endswith(("[]", "{}")):
            assert node.get("description"), f"{path} has no description"


def test_cel_rules_are_where_they_belong() -> None:
    spec = schema()["properties"]["spec"]["properties"]
    rules = {path: [r["rule"] for r in node.get("x-kubernetes-validations", [])]
             for path, node in walk(schema()) if node.get("x-kubernetes-validations")}
    assert rules == {
        "": ["self.metadata.name.size() <= 63"],
        ".spec.transform": ["has(self.sql) != has(self.python)"],
        ".spec": ["!has(self.sink.opensearch) || !has(self.cutover.checks) || "
                  "!has(self.cutover.checks.assertions) || "
                  "size(self.cutover.checks.assertions) == 0"],
        ".spec.sink": ["size(self.primaryKey) > 0 && "
                       "!self.primaryKey.exists(k, k.startsWith('_dv_'))",
                       "has(self.postgres) != has(self.opensearch)",
                       "has(self.postgres) == has(oldSelf.postgres)"],
        ".spec.sink.postgres.table": ["self == oldSelf"],
        ".spec.sink.opensearch.index": ["self == oldSelf"],
        ".spec.sink.postgres.schema": ["self == oldSelf"],
        ".spec.source.badRecords": ["(self.policy == 'deadLetter') == "
                                    "has(self.deadLetterTopic)"],
        ".spec.source": ["self.format == 'avro' ? (has(self.avro) && !has(self.schema)) : "
                         "self.format == 'debezium' ? (has(self.avro) != has(self.schema)) : "
                         "(has(self.schema) && !has(self.avro))"],
        ".spec.source.avro.readerSchema": ["has(self.schema) != has(self.subject) && "
                                           "has(self.subject) == has(self.version)"],
        ".spec.cutover.checks.rowCount": ["has(self.maxDifference) || "
                                          "has(self.maxRelativeDifference)"],
        ".spec.cutover.checks.assertions[]": ["self.sql.contains('{index}')",
                                              "self.name != 'diff'"],
        ".spec.cutover.checks.diff": ["size(self.columns) == 0 || "
                                      "self.maxChangedRowsByColumn.all(c, c in self.columns)"],
        ".spec.cutover.checks.diff.maxChangedRowsByColumn": [
            "self.all(c, c.matches('^[A-Za-z_][A-Za-z0-9_]{0,62}$'))"],
        ".spec.cutover": ["!has(self.deadlineSeconds) || "
                          "self.stableForSeconds < self.deadlineSeconds",
                          "self.stableForSeconds < self.progressDeadlineSeconds"],
        ".spec.spark.sparkConf": [
            "self.all(k, k.size() <= 256)",
            "!self.exists(k, k in ['spark.kubernetes.authenticate.driver.serviceAccountName', "
            "'spark.kubernetes.authenticate.executor.serviceAccountName'])",
            "!self.exists(k, k in ['spark.kubernetes.container.image', "
            "'spark.kubernetes.driver.container.image', "
            "'spark.kubernetes.executor.container.image'])",
            "!self.exists(k, k in ['spark.kubernetes.authenticate.oauthToken', "
            "'spark.kubernetes.authenticate.oauthTokenFile', "
            "'spark.kubernetes.authenticate.driver.oauthToken', "
            "'spark.kubernetes.authenticate.driver.oauthTokenFile', "
            "'spark.kubernetes.authenticate.executor.oauthToken', "
            "'spark.kubernetes.authenticate.executor.oauthTokenFile'])",
            "!self.exists(k, k in ['spark.master', 'spark.kubernetes.driver.master', "
            "'spark.submit.deployMode', 'spark.kubernetes.submission.waitAppCompletion'])",
            "!self.exists(k, k in ['spark.kubernetes.namespace'])",
            "!self.exists(k, k in ['spark.app.name', 'spark.kubernetes.driver.pod.name'])",
            "!self.exists(k, k in ['spark.driver.cores', 'spark.driver.memory'])",
            "!self.exists(k, k in ['spark.executor.instances', 'spark.executor.cores', "
            "'spark.executor.memory'])",
        ],
    }
    assert spec["sink"]["properties"]["primaryKey"]["minItems"] == 1
    # A bounded map keeps the sparkConf rules' estimated cost within the API server's limit.
    assert spec["spark"]["properties"]["sparkConf"]["maxProperties"] == 256
    assert spec["source"]["properties"]["topics"]["x-kubernetes-list-type"] == "set"


def test_defaults_let_the_api_server_fill_a_minimal_view() -> None:
    spec = schema()["properties"]["spec"]["properties"]
    # The cutover default is written out in full: the API server checks a default against
    # the CEL rule before filling nested defaults.
    assert spec["cutover"]["default"] == {"maxLagMessages": 0, "maxLagSeconds": 10,
                                          "stableForSeconds": 10, "mode": "auto",
                                          "progressDeadlineSeconds": 600,
                                          "retainPreviousSeconds": 600,
                                          "keepPreviousRunningSeconds": 300}
    assert spec["source"]["properties"]["maxOffsetsPerTrigger"]["default"] == 1_000_000
    assert spec["spark"]["default"] == {}
    assert spec["spark"]["properties"]["driver"]["default"] == {}
    assert spec["deletionPolicy"]["default"] == "Retain"
    assert spec["sink"]["properties"]["postgres"]["properties"]["schema"]["default"] == "public"
    assert "default" not in yaml.safe_dump(schema()["properties"]["status"])


def test_status_lists_are_maps_keyed_by_their_names() -> None:
    status = schema()["properties"]["status"]["properties"]
    assert status["conditions"]["x-kubernetes-list-map-keys"] == ["type"]
    assert status["revisions"]["x-kubernetes-list-map-keys"] == ["revision"]
    assert status["conditions"]["items"]["properties"]["status"]["enum"] == [
        "True", "False", "Unknown"]
