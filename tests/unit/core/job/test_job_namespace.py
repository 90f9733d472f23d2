"""Jobs in a job namespace (DV_JOB_NAMESPACE): the name, the rendering (no owner reference
across namespaces, the view's namespace as a label, Secrets mounted by their copies' names),
the copies a creation carries, and the refusal when the namespace is not the platform's."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from derived_views.api.constants import JOBS_FOR_LABEL, VIEW_NAMESPACE_LABEL
from derived_views.api.spec import DerivedViewSpec
from derived_views.core import actions as A
from derived_views.core import naming
from derived_views.core.job.sparkapplication import render_spark_application
from derived_views.core.settings import CheckpointSettings, JobPlacement
from derived_views.process.environment import SettingsError, from_env
from derived_views.reconcile.job_namespaces import JobNamespaces, placement
from dvjob.config import parse_config
from support.world.samples import R1, SQL_V1, make_settings, spec_body
from support.world.world import World

TEMPLATE = "{namespace}-dv-jobs"


@pytest.mark.parametrize(("template", "problem"), [
    ("", None), (TEMPLATE, None), ("dv-jobs-{namespace}", None),
    ("dv-jobs", "exactly once"),  # one namespace for every tenant: refused
    ("{namespace}-{namespace}", "exactly once"),
    ("{namespace}_jobs", "namespace names"),
])
def test_a_template_names_one_job_namespace_per_view_namespace(template: str,
                                                               problem: str | None) -> None:
    said = naming.job_namespace_problem(template)
    assert (said is None) if problem is None else (said is not None and problem in said)


def test_the_job_namespace_and_the_copies_names() -> None:
    assert naming.job_namespace("", "shop") == "shop"
    assert naming.job_namespace(TEMPLATE, "shop") == "shop-dv-jobs"
    with pytest.raises(ValueError, match="not a namespace name"):
        naming.job_namespace(TEMPLATE, "n" * 60)
    assert naming.secret_copy_name("orders", "views-db") == "dv-orders-views-db"
    long = naming.secret_copy_name("v" * 200, "s" * 200)
    assert len(long) <= 253 and long != naming.secret_copy_name("v" * 200, "s" * 199)


def _render(config: Any) -> dict[str, Any]:
    spec = DerivedViewSpec.model_validate(spec_body(SQL_V1))
    return render_spark_application(config.spark.template, settings=config, namespace="shop",
                                    view="orders", uid="u-1", spec=spec, revision=R1,
                                    checkpoint_location="s3a://checkpoints/dv/shop/orders/r")


def test_a_job_in_a_job_namespace_is_labelled_with_its_view_and_mounts_copies() -> None:
    config = make_settings(jobs=JobPlacement(namespace=TEMPLATE, operator_namespace="derived-views"), checkpoints=CheckpointSettings(secret="dv-checkpoints"))
    manifest = _render(config)
    meta = manifest["metadata"]
    assert meta["namespace"] == "shop-dv-jobs"
    assert "ownerReferences" not in meta  # an owner cannot be in another namespace
    assert meta["labels"][VIEW_NAMESPACE_LABEL] == "shop"
    assert manifest["spec"]["driver"]["labels"][VIEW_NAMESPACE_LABEL] == "shop"
    mounted = {s["name"] for s in manifest["spec"]["driver"]["secrets"]}
    assert mounted == {"dv-orders-views-db", "dv-orders-kafka-creds", "dv-checkpoints"}
    job = parse_config(manifest["spec"]["arguments"][1])
    assert job.owner is not None and job.owner.namespace == "shop"  # the index is the view's
    assert job.secrets is not None and job.secrets.sink == "dv-orders-views-db"


def test_a_job_in_its_views_namespace_is_owned_by_the_view() -> None:
    manifest = _render(make_settings())
    assert manifest["metadata"]["namespace"] == "shop"
    assert manifest["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    assert VIEW_NAMESPACE_LABEL not in manifest["metadata"]["labels"]


def _world(labels: dict[str, str] | None) -> World:
    world = World(spec_body(SQL_V1), settings=make_settings(jobs=JobPlacement(namespace=TEMPLATE, operator_namespace="derived-views"), checkpoints=CheckpointSettings(secret="dv-checkpoints", base="s3a://checkpoints/dv")))
    problem = placement(world.settings, world.namespace, JobNamespaces(),
                        lambda _name: labels)[1]
    original = world.observe

    def observe() -> Any:
        return dataclasses.replace(original(), job_namespace_problem=problem)

    world.observe = observe  # type: ignore[method-assign]
    return world


def test_the_first_job_carries_the_copies_of_its_secrets() -> None:
    world = _world({JOBS_FOR_LABEL: "shop"})
    creates = [a for a in world.reconcile() if isinstance(a, A.CreateSparkApplication)]
    assert len(creates) == 1
    create = creates[0]
    assert create.namespace == "shop-dv-jobs"
    assert create.copies == (
        A.SecretCopy("derived-views", "dv-checkpoints", "dv-checkpoints", platform=True),
        A.SecretCopy("shop", "kafka-creds", "dv-orders-by-customer-kafka-creds"),
        A.SecretCopy("shop", "views-db", "dv-orders-by-customer-views-db"))


@pytest.mark.parametrize(("labels", "said"), [
    (None, "which does not exist"),
    ({}, "is not labelled derivedviews.io/jobs-for=shop"),
    ({JOBS_FOR_LABEL: "other"}, "is not labelled derivedviews.io/jobs-for=shop"),
])
def test_no_job_where_the_platform_made_no_job_namespace(labels: dict[str, str] | None,
                                                         said: str) -> None:
    world = _world(labels)
    actions = world.reconcile()
    assert not [a for a in actions if isinstance(a, A.CreateSparkApplication)]
    assert world.condition("Stalled") == ("True", "JobNamespaceMissing")
    message = world.parsed_status().condition("Stalled").message  # type: ignore[union-attr]
    assert "shop-dv-jobs" in message and said in message


def test_settings_refuse_a_shared_job_namespace_and_need_the_operators() -> None:
    with pytest.raises(SettingsError, match="exactly once"):
        from_env({"DV_JOB_NAMESPACE": "dv-jobs"})
    with pytest.raises(SettingsError, match="DV_OPERATOR_NAMESPACE"):
        from_env({"DV_JOB_NAMESPACE": TEMPLATE, "DV_CHECKPOINT_SECRET": "c"})
    settings = from_env({"DV_JOB_NAMESPACE": TEMPLATE, "DV_CHECKPOINT_SECRET": "c",
                         "DV_OPERATOR_NAMESPACE": "derived-views"})
    assert (settings.jobs.namespace, settings.jobs.operator_namespace) == (TEMPLATE, "derived-views")


def test_namespace_labels_are_read_once_a_minute() -> None:
    now = [0.0]
    reads: list[str] = []
    cache = JobNamespaces(clock=lambda: now[0])

    def read(name: str) -> dict[str, str] | None:
        reads.append(name)
        return {JOBS_FOR_LABEL: "shop"}

    for _ in range(3):
        cache.labels("shop-dv-jobs", read)
    now[0] = 61
    cache.labels("shop-dv-jobs", read)
    assert reads == ["shop-dv-jobs", "shop-dv-jobs"]
