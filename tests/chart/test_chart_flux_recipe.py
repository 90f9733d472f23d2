"""The Flux recipe in gitops/flux: real chart values, and health checks on real conditions."""

from __future__ import annotations

from typing import Any

import yaml

from derived_views.core import conditions
from dvstack.spark import crd as spark_crd
from support.chart_render import Render
from support.paths import REPO

FLUX = REPO / "gitops" / "flux"


def docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((FLUX / name).read_text()) if d]


def test_the_helmrelease_values_render_the_chart(render: Render) -> None:
    (release,) = docs("operator/helmrelease.yaml")
    assert release["spec"]["chart"]["spec"]["chart"] == "./charts/derived-views"
    objects = render(release["spec"]["values"], namespace="derived-views")
    sts = next(o for o in objects if o["kind"] == "StatefulSet")
    env = {e["name"]: e.get("value") for e in sts["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["DV_SPARK_IMAGE"] == "registry.example.com/derived-views/spark-job:0.1.0"
    assert env["DV_CHECKPOINT_BASE"] == "s3a://derived-views-checkpoints/"


def test_views_wait_for_the_operator_and_check_only_conditions_it_sets() -> None:
    _spark, operator, views = docs("kustomizations.yaml")
    assert views["spec"]["dependsOn"] == [{"name": operator["metadata"]["name"]}]
    assert operator["spec"]["path"] == "./gitops/flux/operator"
    assert views["spec"]["wait"] is True
    (check,) = views["spec"]["healthCheckExprs"]
    assert (check["apiVersion"], check["kind"]) == ("derivedviews.io/v1alpha1", "DerivedView")
    named = {"inProgress": {"Reconciling"}, "failed": {"Stalled", "Degraded"},
             "current": {"Ready"}}
    for field, types in named.items():
        for type_ in types:
            assert f"c.type == '{type_}'" in check[field], (field, type_)
    assert {"Ready", "Reconciling", "Stalled", "Degraded"} <= set(conditions.ORDER)


def test_the_git_repository_ships_what_the_kustomization_reads() -> None:
    (repo,) = docs("git-repository.yaml")
    ignore = repo["spec"]["ignore"]
    assert "!/charts/" in ignore and "!/gitops/flux/operator/" in ignore
    assert "!/gitops/flux/spark-operator/" in ignore


def test_the_operator_waits_for_the_spark_operator_that_runs_its_jobs() -> None:
    """Views start SparkApplications: the Spark Operator (its CRD and webhook) comes first,
    at the version whose CRD the tests run against, serving the views' namespace."""
    spark, operator, views = docs("kustomizations.yaml")
    assert operator["spec"]["dependsOn"] == [{"name": spark["metadata"]["name"]}]
    assert spark["spec"]["path"] == "./gitops/flux/spark-operator" and spark["spec"]["wait"]
    repository, release = docs("spark-operator/helmrelease.yaml")
    assert repository["kind"] == "HelmRepository"
    assert release["spec"]["chart"]["spec"]["sourceRef"]["name"] == repository["metadata"]["name"]
    assert f"v{release['spec']['chart']['spec']['version']}" == spark_crd.VERSION
    assert views["spec"]["targetNamespace"] in release["spec"]["values"]["spark"]["jobNamespaces"]
    assert release["spec"]["values"]["webhook"]["enable"] is True
