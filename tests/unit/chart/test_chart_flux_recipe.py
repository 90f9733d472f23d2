"""The Flux recipe in gitops/flux: real chart values, and health checks on real conditions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from conftest import Render
from derived_views.core import conditions

FLUX = Path(__file__).resolve().parents[3] / "gitops" / "flux"


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
    operator, views = docs("kustomizations.yaml")
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
