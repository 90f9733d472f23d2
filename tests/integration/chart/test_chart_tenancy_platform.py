"""The chart's tenancy admission policy under a platform's own rules, in the real API server.

A platform lists its Kafka clusters by IP prefix, CIDR, domain and IPv6 network
(tests/tenancy_attempts.py PLATFORM_TENANCY): a name shaped like a listed address,
an address outside the network or an IPv4-mapped one is refused at apply time, in
the words the operator uses (tests/unit/core/test_tenancy.py holds those); what the
rules list passes, however written. Dead letters go to the view namespace's own
topics or the platform's explicit ones. Outcomes go to
.stack/results/tenancy_admission_platform.json.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from derived_views.core.judges.tenancy import DEFAULT_SPARK_CONF_ALLOW, conf_rule
from dvstack.chart import Release, short_id
from dvstack.testing.waiting import wait_for
from support.corpora.tenancy_attempts import (
    ADMISSION,
    IN_NAMESPACE,
    PLATFORM_ALLOWED,
    PLATFORM_REFUSED,
    PLATFORM_TENANCY,
    Attempt,
    G,
    P,
    V,
)
from support.results import results_dir

TIMEOUT = 60
VALID = {"bool": "true", "int": "8", "number": "0.5", "size": "64m", "duration": "30s",
         "timezone": "Europe/Paris", "word": "orders-team"}
RESULTS = results_dir()


def _create(custom: Any, ns: str, attempt: Attempt) -> str | None:
    """None when the API server accepts the view (then deleted), else its message."""
    name = f"v-{short_id()}"
    try:
        custom.create_namespaced_custom_object(G, V, ns, P, attempt.body(name, ns))
    except ApiException as exc:
        return str(json.loads(exc.body or "{}").get("message") or exc.body)
    custom.delete_namespaced_custom_object(G, V, ns, P, name)
    return None


def test_a_platforms_hosts_and_dead_letter_topics_at_apply_time(
        kube_api_client: Any, make_namespace: Callable[[str], str],
        install: Callable[..., Release]) -> None:
    ns = make_namespace("op")
    team = make_namespace("team")
    install(ns, {"watch": {"mode": "namespaces", "namespaces": [team]},
                 "tenancy": PLATFORM_TENANCY})
    custom = client.CustomObjectsApi(kube_api_client)
    wait_for(lambda: _create(custom, team, ADMISSION[0]) is not None, timeout=TIMEOUT,
             what="the tenancy policy to refuse views in the watched namespace")
    outcomes = []
    for attempt in PLATFORM_REFUSED:
        message = _create(custom, team, attempt)
        outcomes.append({"attempt": attempt.what, "message": message})
        assert message is not None, f"{attempt.what} was accepted"
        assert attempt.expected in " ".join(message.split()), message
        assert "ValidatingAdmissionPolicy" in message
    for attempt in PLATFORM_ALLOWED:
        assert _create(custom, team, attempt) is None, attempt.what
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "tenancy_admission_platform.json").write_text(json.dumps(outcomes, indent=2))


def test_the_default_dead_letters_are_the_view_namespaces_own(
        kube_api_client: Any, make_namespace: Callable[[str], str],
        install: Callable[..., Release]) -> None:
    ns = make_namespace("op")
    shop, billing = make_namespace("shop"), make_namespace("billing")
    install(ns, {"watch": {"mode": "namespaces", "namespaces": [shop, billing]}})
    custom = client.CustomObjectsApi(kube_api_client)
    wait_for(lambda: all(_create(custom, team, ADMISSION[0]) is not None
                         for team in (shop, billing)),
             timeout=TIMEOUT, what="the tenancy policy to refuse views in both namespaces")
    for attempt in IN_NAMESPACE:
        assert _create(custom, shop, attempt) is None, attempt.what
    into_shop = Attempt("shop's dead letters from billing", source={"badRecords": {
        "policy": "deadLetter", "deadLetterTopic": f"dlq.{shop}.orders"}})
    refused = _create(custom, billing, into_shop)
    assert refused is not None and (
        f"deadLetterTopic dlq.{shop}.orders: refused by the tenancy policy (chart value "
        f"tenancy.kafka.deadLetterTopics); name a topic matching dlq.{billing}.*"
        in " ".join(refused.split())), refused


def test_every_default_key_at_once_fits_the_cel_cost_budget_and_long_values_are_refused(
        kube_api_client: Any, make_namespace: Callable[[str], str],
        install: Callable[..., Release]) -> None:
    """The API server bounds what CEL may spend per expression: the largest view an author
    could mean (every allowed key) passes, and the largest hostile one (every allowed key with
    a 4096-character value) is refused, by a rule or by the budget (the policy fails closed)."""
    ns = make_namespace("op")
    team = make_namespace("team")
    install(ns, {"watch": {"mode": "namespaces", "namespaces": [team]}})
    custom = client.CustomObjectsApi(kube_api_client)
    wait_for(lambda: _create(custom, team, ADMISSION[0]) is not None, timeout=TIMEOUT,
             what="the tenancy policy to refuse views in the watched namespace")
    rules = [conf_rule(entry) for entry in DEFAULT_SPARK_CONF_ALLOW]
    every = {r.key: VALID.get(r.shape) or r.shape.split("|")[-1] for r in rules}
    assert _create(custom, team, Attempt("every key", {"sparkConf": every})) is None
    long = {r.key: "1" * 4096 for r in rules}
    refused = _create(custom, team, Attempt("every key, long values", {"sparkConf": long}))
    assert refused is not None and "ValidatingAdmissionPolicy" in refused, refused
