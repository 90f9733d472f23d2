"""The chart's tenancy ValidatingAdmissionPolicy, installed into the real API server.

What CEL can see in a DerivedView is refused at apply time with the same
words the operator would use; the operator checks the rest (tests/e2e).
Each attempt's outcome is written to .stack/results/tenancy_admission.json
for docs/security.md.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from dvstack.chart import Kubectl, Release, short_id
from dvstack.testing.waiting import wait_for
from support.corpora.tenancy_attempts import ADMISSION, ALLOWED, PY, Attempt, G, P, V
from support.results import results_dir

TIMEOUT = 60
RESULTS = results_dir()


def _create(custom: Any, ns: str, attempt: Attempt) -> str | None:
    """None when the API server accepts the view, else its message."""
    name = f"v-{short_id()}"
    try:
        custom.create_namespaced_custom_object(G, V, ns, P, attempt.body(name))
    except ApiException as exc:
        return str(json.loads(exc.body or "{}").get("message") or exc.body)
    custom.delete_namespaced_custom_object(G, V, ns, P, name)
    return None


def _policy_active(custom: Any, ns: str) -> bool:
    """The binding is asynchronous: the policy acts once a known-bad view is refused."""
    return _create(custom, ns, ADMISSION[0]) is not None


def _type_checked(kubectl: Kubectl, release: Release) -> dict[str, Any] | None:
    """The policy's status once the API server has type-checked its generation."""
    name = f"{release.namespace}-{release.name}-derived-views-tenancy"[:63].rstrip("-")
    policy = kubectl.get_json("validatingadmissionpolicy", name) or {}
    status = policy.get("status") or {}
    if status.get("observedGeneration") != policy.get("metadata", {}).get("generation"):
        return None
    return dict(status)


def test_the_policy_refuses_what_cel_sees_in_the_watched_namespaces_only(
        kube_api_client: Any, kubectl: Kubectl, make_namespace: Callable[[str], str],
        install: Callable[..., Release]) -> None:
    ns = make_namespace("op")
    team = make_namespace("team")
    elsewhere = make_namespace("other")
    release = install(ns, {"watch": {"mode": "namespaces", "namespaces": [team]}})
    custom = client.CustomObjectsApi(kube_api_client)
    wait_for(lambda: _policy_active(custom, team), timeout=TIMEOUT,
             what="the tenancy policy to refuse views in the watched namespace")
    # The API server type-checked every expression against the CRD's schema.
    checked = wait_for(lambda: _type_checked(kubectl, release), timeout=TIMEOUT,
                       what="the policy's type check")
    assert not (checked.get("typeChecking") or {}).get("expressionWarnings"), checked

    outcomes = []
    for attempt in ADMISSION:
        message = _create(custom, team, attempt)
        outcomes.append({"attempt": attempt.what, "refused_by": "admission" if message else None,
                         "message": message})
        assert message is not None, f"{attempt.what} was accepted"
        assert attempt.expected in " ".join(message.split()), message
        assert "ValidatingAdmissionPolicy" in message
    for attempt in ALLOWED:
        assert _create(custom, team, attempt) is None, attempt.what

    # A spec change into a refused one is refused; the operator's metadata updates are not.
    name = f"v-{short_id()}"
    custom.create_namespaced_custom_object(G, V, team, P, ALLOWED[0].body(name))
    try:
        custom.patch_namespaced_custom_object(
            G, V, team, P, name, {"spec": {"spark": {"serviceAccount": "namespace-admin"}}})
        raise AssertionError("a spec change to a refused ServiceAccount was accepted")
    except ApiException as exc:
        assert "spec.spark.serviceAccount: refused" in " ".join(str(exc.body).split())
    custom.patch_namespaced_custom_object(G, V, team, P, name,
                                          {"metadata": {"finalizers": ["example.com/x"]}})
    custom.patch_namespaced_custom_object(G, V, team, P, name,
                                          {"metadata": {"finalizers": None}})

    # Outside the watched namespaces this release's policy does not apply.
    assert _create(custom, elsewhere, ADMISSION[0]) is None
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "tenancy_admission.json").write_text(json.dumps(outcomes, indent=2))


def test_a_platform_that_trusts_python_limits_where_its_files_come_from(
        kube_api_client: Any, make_namespace: Callable[[str], str],
        install: Callable[..., Release]) -> None:
    ns = make_namespace("op")
    team = make_namespace("team")
    install(ns, {"watch": {"mode": "namespaces", "namespaces": [team]},
                 "tenancy": {"python": {"enabled": True,
                                        "pyFilesPrefixes": ["s3a://platform-code/"]},
                             "images": ["registry.example/teams/*"]}})
    custom = client.CustomObjectsApi(kube_api_client)
    wait_for(lambda: _policy_active(custom, team), timeout=TIMEOUT,
             what="the tenancy policy to refuse views in the watched namespace")
    outside = _create(custom, team, Attempt("py outside", transform=PY))
    assert outside is not None and "transform.python.pyFiles entry: refused" in outside
    inside = {"python": {"function": "views.orders:run",
                         "pyFiles": ["s3a://platform-code/views.zip"]}}
    assert _create(custom, team, Attempt("py inside", transform=inside)) is None
    assert _create(custom, team, Attempt("team image",
                                         {"image": "registry.example/teams/spark:1"})) is None
    assert _create(custom, team, Attempt("other image",
                                         {"image": "registry.example/other:1"})) is not None


def test_kafka_clusters_are_listed_per_namespace_and_every_server_counts(
        kube_api_client: Any, make_namespace: Callable[[str], str],
        install: Callable[..., Release]) -> None:
    ns = make_namespace("op")
    shop, billing = make_namespace("shop"), make_namespace("billing")
    install(ns, {"watch": {"mode": "namespaces", "namespaces": [shop, billing]},
                 "tenancy": {"kafka": {"clusters": [
                     {"namespaces": [shop], "bootstrapServers": ["kafka.shop.svc:9093"]},
                     {"bootstrapServers": ["kafka.platform.svc:*"]}],
                     "deadLetterTopics": ["orders-dead"]},
                     "checkpoints": {"authorOverride": True}}})
    custom = client.CustomObjectsApi(kube_api_client)
    wait_for(lambda: all(_policy_active(custom, team) for team in (shop, billing)),
             timeout=TIMEOUT, what="the tenancy policy to refuse views in both namespaces")

    def kafka(servers: str) -> Attempt:
        return Attempt("k", source={"kafka": {"bootstrapServers": servers}})

    assert _create(custom, shop, kafka("kafka.shop.svc:9093")) is None
    assert _create(custom, billing, kafka("kafka.platform.svc:9092")) is None
    refused = _create(custom, billing, kafka("kafka.shop.svc:9093"))
    assert refused is not None and (
        f"kafka.shop.svc:9093 is not a Kafka cluster the platform lists for namespace {billing}"
        in " ".join(refused.split())), refused
    # every server of the list must be listed by one rule
    assert _create(custom, shop, kafka("kafka.shop.svc:9093, kafka.attacker.example:9092"))
    assert _create(custom, shop, kafka("127.0.0.1:9092")) is not None  # the default is replaced
    dead = {"badRecords": {"policy": "deadLetter", "deadLetterTopic": "orders-dead"}}
    assert _create(custom, shop, Attempt("d", source={
        "kafka": {"bootstrapServers": "kafka.shop.svc:9093"}, **dead})) is None
    assert _create(custom, shop, Attempt("c", {"checkpointBase": "s3a://team/ck"}, source={
        "kafka": {"bootstrapServers": "kafka.shop.svc:9093"}})) is None
