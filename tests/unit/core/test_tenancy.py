"""The tenancy policy's rules, as pure functions of a spec, the policy and Secret labels."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from derived_views.api.spec import DerivedViewSpec
from derived_views.core import reasons
from derived_views.core.sql_check import check_spec
from derived_views.core.tenancy import (
    DEFAULT_DEAD_LETTER_TOPICS,
    DEFAULT_KAFKA_CLUSTERS,
    DEFAULT_SCHEMA_REGISTRIES,
    DEFAULT_SPARK_CONF_ALLOW,
    DEFAULT_SPARK_CONF_DENY,
    KafkaClusters,
    PolicyError,
    TenancyPolicy,
    bootstrap_servers,
    cluster_refusal,
    matches,
    parse_policy,
    registry_refusal,
    secret_refusal,
    secrets_of,
    spec_refusal,
)
from tenancy_attempts import ADMISSION, ALLOWED, MISSING_SECRET, SQL, Attempt

IMAGE, MAIN = "derived-views/spark-job:0.1.0", "local:///opt/job.py"
VALUES = Path(__file__).resolve().parents[3] / "charts" / "derived-views" / "values.yaml"


def spec_of(attempt: Attempt) -> DerivedViewSpec:
    return DerivedViewSpec.model_validate(attempt.body("v")["spec"])


def refusal(attempt: Attempt, policy: TenancyPolicy | None = None,
            namespace: str | None = None) -> str | None:
    found = spec_refusal(spec_of(attempt), policy or TenancyPolicy(), operator_image=IMAGE,
                         operator_main_file=MAIN, namespace=namespace)
    return None if found is None else found.message


def kafka(servers: str, dead_letters: str | None = None) -> Attempt:
    source: dict[str, Any] = {"kafka": {"bootstrapServers": servers}}
    if dead_letters is not None:
        source["badRecords"] = {"policy": "deadLetter", "deadLetterTopic": dead_letters}
    return Attempt("k", source=source)


@pytest.mark.parametrize("attempt", ADMISSION, ids=lambda a: a.what)
def test_every_admission_attempt_is_refused_with_the_words_the_api_server_uses(
        attempt: Attempt) -> None:
    message = refusal(attempt)
    assert message is not None and attempt.expected in message
    assert "or ask the platform team to allow it" in message


@pytest.mark.parametrize("attempt", ALLOWED, ids=lambda a: a.what)
def test_tuning_and_the_platforms_own_choices_pass(attempt: Attempt) -> None:
    assert refusal(attempt) is None


@pytest.mark.parametrize(("what", "sql", "expected"), SQL, ids=[s[0] for s in SQL])
def test_every_sql_attempt_is_a_policy_violation_before_any_job(what: str, sql: str,
                                                                 expected: str) -> None:
    found = check_spec(spec_of(Attempt(what, transform={"sql": sql})))
    assert found is not None and found.reason == reasons.POLICY_VIOLATION
    assert expected in found.message and found.message.startswith("transform.sql: ")


def test_a_platform_can_allow_what_the_defaults_refuse() -> None:
    policy = parse_policy('{"images": ["registry.example/teams/*"], "serviceAccountOverride": '
                          'true, "python": {"enabled": true, "pyFilesPrefixes": '
                          '["s3a://code/"]}, "sparkConf": {"allow": ["spark.kubernetes.*", '
                          '"spark.sql.shuffle.partitions"]}}')
    assert refusal(Attempt("i", {"image": "registry.example/teams/x:1"}), policy) is None
    assert refusal(Attempt("i", {"image": "registry.example/other:1"}), policy) is not None
    assert refusal(Attempt("sa", {"serviceAccount": "team"}), policy) is None
    assert refusal(Attempt("k", {"sparkConf": {"spark.kubernetes.x": "1"}}), policy) is None
    # the allow list replaces the defaults: tuning keys are now refused
    assert refusal(Attempt("k", {"sparkConf": {"spark.sql.adaptive.enabled": "true"}}),
                   policy) is not None
    inside = {"python": {"function": "m:f", "pyFiles": ["s3a://code/v.zip"]}}
    outside = {"python": {"function": "m:f", "pyFiles": ["s3a://codex/v.zip"]}}
    assert refusal(Attempt("p", transform=inside), policy) is None
    assert "pyFiles entry s3a://codex/v.zip" in (refusal(Attempt("p", transform=outside), policy)
                                                 or "")


def test_deny_wins_over_allow_and_patterns_are_exact_or_prefixes() -> None:
    assert matches("spark.sql.adaptive.enabled", ["spark.sql.adaptive.*"])
    assert not matches("spark.sql.adaptiveX", ["spark.sql.adaptive.*"])
    assert not matches("spark.serializerX", ["spark.serializer"])
    policy = TenancyPolicy(spark_conf_allow=("spark.sql.*",),
                           spark_conf_deny=("spark.sql.extensions",))
    assert refusal(Attempt("d", {"sparkConf": {"spark.sql.extensions": "x"}}), policy)


def test_secrets_need_their_owners_label_unless_the_platform_says_otherwise() -> None:
    strict, open_ = TenancyPolicy(), parse_policy('{"secrets": {"requireLabel": false}}')
    found = secret_refusal("shop", "db", {"team": "a"}, strict)
    assert found is not None and found.reason == "SecretNotLabelled"
    assert "kubectl label secret -n shop db derivedviews.io/view-secret=true" in found.message
    assert secret_refusal("shop", "db", {"derivedviews.io/view-secret": "true"}, strict) is None
    assert secret_refusal("shop", "db", {"derivedviews.io/view-secret": "yes"}, strict)
    assert secret_refusal("shop", "db", {}, open_) is None


def test_a_missing_secret_is_refused_whatever_the_label_rule() -> None:
    """A job created while the Secret is missing would start with whatever Secret of that name
    appeared later: refused until it exists, even when no label is required."""
    for policy in (TenancyPolicy(), parse_policy('{"secrets": {"requireLabel": false}}')):
        found = secret_refusal("shop", "db", None, policy)
        assert found is not None and found.reason == "SecretMissing"
        assert found.message.startswith("secret shop/db not found: ")
        assert MISSING_SECRET.expected in found.message
        assert "create it in namespace shop or fix the view's secretRef" in found.message


def test_kafka_clusters_default_to_loopback_and_every_server_must_be_listed() -> None:
    assert refusal(kafka("127.0.0.1:19092")) is None
    assert refusal(kafka("localhost:9092, 127.0.0.1:9093")) is None
    for hostile in ("kafka.attacker.example:9092", "127.0.0.1:9092,kafka.attacker.example:9092",
                    "127.0.0.2:9092", "localhost.attacker.example:9092",
                    "127.0.0.1:1@kafka.attacker.example:9092", "localhost:1:kafka.attacker:9092"):
        message = refusal(kafka(hostile))
        assert message is not None and "(chart value tenancy.kafka.clusters)" in message, hostile
        assert message.startswith(f"spec.source.kafka.bootstrapServers {hostile} is not a "
                                  "Kafka cluster the platform lists")
    assert bootstrap_servers(" a:1 , b:2") == ("a:1", "b:2")


def test_kafka_cluster_rules_apply_per_namespace_and_fail_closed_without_one() -> None:
    policy = parse_policy('{"kafka": {"clusters": [{"namespaces": ["shop-*"], '
                          '"bootstrapServers": ["kafka.shop:9093"]}, {"bootstrapServers": '
                          '["kafka.platform:*"]}]}}')
    assert policy.kafka_clusters == (KafkaClusters(("shop-*",), ("kafka.shop:9093",)),
                                     KafkaClusters(("*",), ("kafka.platform:*",)))
    assert refusal(kafka("kafka.shop:9093"), policy, "shop-eu") is None
    assert refusal(kafka("kafka.platform:9092"), policy, "shop-eu") is None
    message = refusal(kafka("kafka.shop:9093"), policy, "billing")
    assert message is not None and "lists for namespace billing" in message
    # one rule must hold every server: no mixing a shop broker into another rule's list
    assert refusal(kafka("kafka.shop:9093,kafka.platform:9092"), policy, "shop-eu") is not None
    # a caller that does not know the namespace gets only the rules for every namespace
    assert refusal(kafka("kafka.shop:9093"), policy) is not None
    assert refusal(kafka("kafka.platform:9092"), policy) is None
    none = parse_policy('{"kafka": {"clusters": []}}')
    assert cluster_refusal(spec_of(kafka("127.0.0.1:9092")), none, "shop") is not None


def test_dead_letters_go_only_to_the_platforms_topics() -> None:
    assert refusal(kafka("127.0.0.1:9092", "dlq.orders")) is None
    message = refusal(kafka("127.0.0.1:9092", "payments"))
    assert message == ("spec.source.badRecords.deadLetterTopic payments: refused by the tenancy "
                       "policy (chart value tenancy.kafka.deadLetterTopics); name a topic "
                       "matching dlq.*, or ask the platform team to allow it")
    none = parse_policy('{"kafka": {"deadLetterTopics": []}}')
    assert "matching none" in (refusal(kafka("127.0.0.1:9092", "dlq.x"), none) or "")
    teams = parse_policy('{"kafka": {"deadLetterTopics": ["orders-dead"]}}')
    assert refusal(kafka("127.0.0.1:9092", "orders-dead"), teams) is None


def test_schema_registries_default_to_loopback_and_platforms_list_theirs() -> None:
    assert registry_refusal("127.0.0.1:18081", TenancyPolicy()) is None
    refused = registry_refusal("10.0.0.7:8081", TenancyPolicy())
    assert refused is not None and refused.reason == reasons.POLICY_VIOLATION
    assert refused.message == (
        "schema registry 10.0.0.7:8081 (the registry Secret's url): refused by the tenancy "
        "policy (chart value tenancy.schemaRegistries); name a registry the platform lists, "
        "or ask the platform team to allow it")
    listed = parse_policy('{"schemaRegistries": ["registry.platform.svc:8080"]}')
    assert registry_refusal("registry.platform.svc:8080", listed) is None
    assert registry_refusal("127.0.0.1:18081", listed) is not None  # the list replaces it
    assert registry_refusal("registry.platform.svc:8080", parse_policy(
        '{"schemaRegistries": []}')) is not None


def test_the_checkpoint_base_is_the_platforms_unless_it_lets_authors_choose() -> None:
    own = Attempt("c", {"checkpointBase": "s3a://checkpoints/dv"})  # even the operator's own
    message = refusal(own)
    assert message is not None and message.startswith(
        "spec.spark.checkpointBase s3a://checkpoints/dv: refused by the tenancy policy (chart "
        "value tenancy.checkpoints.authorOverride); remove it")
    assert refusal(own, parse_policy('{"checkpoints": {"authorOverride": true}}')) is None


def test_the_secrets_a_view_names() -> None:
    body: dict[str, Any] = Attempt("s").body("v")
    body["spec"]["source"]["kafka"]["secretRef"] = {"name": "kafka"}
    assert secrets_of(DerivedViewSpec.model_validate(body["spec"])) == ("db", "kafka")


@pytest.mark.parametrize(("raw", "words"), [
    ("[1]", "must be a JSON object"), ("{", "is not JSON"),
    ('{"imagez": []}', "unknown keys ['imagez']"),
    ('{"images": "x"}', "images must be a list of strings"),
    ('{"images": ["a*b"]}', "a single trailing *"),
    ('{"python": {"enabled": "yes"}}', "python.enabled must be true or false"),
    ('{"sparkConf": []}', "sparkConf must be an object"),
    ('{"kafka": {"clusters": {}}}', "kafka.clusters must be a list"),
    ('{"kafka": {"clusters": [{"hosts": ["a:1"]}]}}', "kafka.clusters[0] must be an object"),
    ('{"kafka": {"clusters": [{"namespaces": ["*"]}]}}',
     "kafka.clusters[0].bootstrapServers must list at least one"),
    ('{"kafka": {"clusters": [{"bootstrapServers": ["a*b"]}]}}', "a single trailing *"),
    ('{"kafka": {"deadLetterTopics": "dlq"}}', "kafka.deadLetterTopics must be a list"),
    ('{"checkpoints": {"authorOverride": 1}}', "checkpoints.authorOverride must be true or"),
    ('{"schemaRegistries": "r:1"}', "schemaRegistries must be a list"),
])
def test_a_malformed_policy_is_refused_naming_the_key(raw: str, words: str) -> None:
    with pytest.raises(PolicyError) as caught:
        parse_policy(raw)
    assert words in str(caught.value)


def test_the_charts_defaults_are_the_operators_defaults() -> None:
    """The chart renders its values into the admission policy; the operator falls back to its
    own when DV_TENANCY_POLICY is unset: the two must be one policy."""
    values = yaml.safe_load(VALUES.read_text())["tenancy"]
    assert tuple(values["sparkConf"]["allow"]) == DEFAULT_SPARK_CONF_ALLOW
    assert tuple(values["sparkConf"]["deny"]) == DEFAULT_SPARK_CONF_DENY
    assert tuple(values["kafka"]["deadLetterTopics"]) == DEFAULT_DEAD_LETTER_TOPICS
    assert parse_policy(json.dumps(values)).kafka_clusters == DEFAULT_KAFKA_CLUSTERS
    assert tuple(values["schemaRegistries"]) == DEFAULT_SCHEMA_REGISTRIES
    assert parse_policy(json.dumps(values)) == parse_policy(None) == TenancyPolicy()


def test_docs_security_lists_every_attempt_the_tests_try() -> None:
    doc = (VALUES.parents[2] / "docs" / "security.md").read_text()
    rows = {line.split("|")[1].strip() for line in doc.splitlines() if line.startswith("| ")}
    tried = {a.what for a in ADMISSION} | {what for what, _, _ in SQL} | {MISSING_SECRET.what}
    assert tried <= rows, sorted(tried - rows)
