"""The tenancy policy's rules, as pure functions of a spec, the policy and Secret labels."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from derived_views.api.spec import DerivedViewSpec
from derived_views.core import reasons
from derived_views.core.judges.tenancy import (
    DEFAULT_DEAD_LETTER_TOPICS,
    DEFAULT_KAFKA_CLUSTERS,
    DEFAULT_SCHEMA_REGISTRIES,
    DEFAULT_SPARK_CONF_ALLOW,
    DEFAULT_SPARK_CONF_DENY,
    SHAPES,
    KafkaClusters,
    PolicyError,
    TenancyPolicy,
    bootstrap_servers,
    cluster_refusal,
    conf_rule,
    host_admitted,
    matches,
    parse_policy,
    registry_refusal,
    secret_refusal,
    secrets_of,
    spec_refusal,
)
from derived_views.core.judges.transform import check_spec
from support.corpora.tenancy_attempts import (
    ADMISSION,
    ALLOWED,
    IN_NAMESPACE,
    MISSING_SECRET,
    PLATFORM_ALLOWED,
    PLATFORM_REFUSED,
    PLATFORM_TENANCY,
    SQL,
    Attempt,
)
from support.paths import REPO

IMAGE, MAIN = "derived-views/spark-job:0.1.0", "local:///opt/job.py"
VALUES = REPO / "charts" / "derived-views" / "values.yaml"


def spec_of(attempt: Attempt, namespace: str | None = None) -> DerivedViewSpec:
    return DerivedViewSpec.model_validate(attempt.body("v", namespace)["spec"])


def refusal(attempt: Attempt, policy: TenancyPolicy | None = None,
            namespace: str | None = None) -> str | None:
    found = spec_refusal(spec_of(attempt, namespace), policy or TenancyPolicy(),
                         operator_image=IMAGE, operator_main_file=MAIN, namespace=namespace)
    return None if found is None else found.message


def kafka(servers: str, dead_letters: str | None = None) -> Attempt:
    source: dict[str, Any] = {"kafka": {"bootstrapServers": servers}}
    if dead_letters is not None:
        source["badRecords"] = {"policy": "deadLetter", "deadLetterTopic": dead_letters}
    return Attempt("k", source=source)


@pytest.mark.parametrize("attempt", ADMISSION, ids=lambda a: a.what)
def test_every_admission_attempt_is_refused_with_the_words_the_api_server_uses(
        attempt: Attempt) -> None:
    message = refusal(attempt, namespace="shop")
    assert message is not None and attempt.expected in message
    # `${` in a setting is no policy's to allow; everything else names the chart value
    assert ("or ask the platform team to allow it" in message) != ("`${`" in message)


@pytest.mark.parametrize("attempt", ALLOWED + IN_NAMESPACE, ids=lambda a: a.what)
def test_tuning_and_the_platforms_own_choices_pass(attempt: Attempt) -> None:
    assert refusal(attempt, namespace="shop") is None


@pytest.mark.parametrize("attempt", PLATFORM_REFUSED, ids=lambda a: a.what)
def test_a_platforms_hosts_admit_addresses_as_addresses_and_names_as_names(
        attempt: Attempt) -> None:
    message = refusal(attempt, parse_policy(json.dumps(PLATFORM_TENANCY)), "shop")
    assert message is not None and attempt.expected in message


@pytest.mark.parametrize("attempt", PLATFORM_ALLOWED, ids=lambda a: a.what)
def test_a_platforms_listed_hosts_and_topics_pass(attempt: Attempt) -> None:
    assert refusal(attempt, parse_policy(json.dumps(PLATFORM_TENANCY)), "shop") is None


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


def test_dead_letters_go_only_to_the_view_namespaces_own_topics() -> None:
    assert refusal(kafka("127.0.0.1:9092", "dlq.shop.orders"), namespace="shop") is None
    message = refusal(kafka("127.0.0.1:9092", "payments"), namespace="shop")
    assert message == ("spec.source.badRecords.deadLetterTopic payments: refused by the tenancy "
                       "policy (chart value tenancy.kafka.deadLetterTopics); name a topic "
                       "matching dlq.shop.*, or ask the platform team to allow it")
    for other in ("dlq.billing.orders", "dlq.shop-eu.orders", "dlq.shop", "dlq.orders"):
        assert refusal(kafka("127.0.0.1:9092", other), namespace="shop"), other
    # a caller that does not know the namespace expands no placeholder: refused
    assert "matching none" in (refusal(kafka("127.0.0.1:9092", "dlq.shop.orders")) or "")
    none = parse_policy('{"kafka": {"deadLetterTopics": []}}')
    assert "matching none" in (refusal(kafka("127.0.0.1:9092", "dlq.x"), none, "shop") or "")
    teams = parse_policy('{"kafka": {"deadLetterTopics": ["orders-dead", "dlq.*", '
                         '"{namespace}-dead"]}}')
    for explicit in ("orders-dead", "dlq.anything", "shop-dead"):  # explicit patterns still work
        assert refusal(kafka("127.0.0.1:9092", explicit), teams, "shop") is None, explicit
    assert refusal(kafka("127.0.0.1:9092", "billing-dead"), teams, "shop") is not None


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
    ('{"kafka": {"clusters": [{"bootstrapServers": ["a*b"]}]}}', "a host pattern is *, a name"),
    ('{"kafka": {"deadLetterTopics": "dlq"}}', "kafka.deadLetterTopics must be a list"),
    ('{"checkpoints": {"authorOverride": 1}}', "checkpoints.authorOverride must be true or"),
    ('{"schemaRegistries": "r:1"}', "schemaRegistries must be a list"),
    ('{"schemaRegistries": ["registry*"]}', "schemaRegistries has 'registry*': a host pattern"),
    ('{"schemaRegistries": ["fd00::1:8080"]}', "IPv6 address or network goes in brackets"),
    ('{"schemaRegistries": ["10.0.0.300/24"]}', "not an IP address or network"),
    ('{"schemaRegistries": ["10.0.0.0/255.255.255.0"]}', "not an IP address or network"),
    ('{"schemaRegistries": ["r:99999x"]}', "the port is a number or *"),
    ('{"kafka": {"clusters": [{"bootstrapServers": ["10.0.0.1*"]}]}}',
     "kafka.clusters[0].bootstrapServers has '10.0.0.1*'"),
    ('{"kafka": {"clusters": [{"bootstrapServers": ["kafka.*.svc:1"]}]}}', "a host pattern is"),
    ('{"kafka": {"deadLetterTopics": ["dlq.{team}.*"]}}', "the one placeholder is {namespace}"),
    ('{"sparkConf": {"allow": ["spark.sql.x=a class"]}}', "the shape after = is one of"),
    ('{"sparkConf": {"allow": ["spark.*.x=int"]}}', "a key is a value or a prefix"),
    ('{"sparkConf": {"allow": [""]}}', "sparkConf.allow must be a list of strings"),
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


def conf(settings: dict[str, str], policy: TenancyPolicy | None = None) -> str | None:
    return refusal(Attempt("c", {"sparkConf": settings}), policy)


@pytest.mark.parametrize(("shape", "good", "bad"), [
    ("bool", ["true", "false"], ["TRUE", "yes", "1", ""]),
    ("int", ["8", "200", "2147483647"], ["-1", "8.0", "1e3", "8 ", "12345678901"]),
    ("number", ["0.6", "2", "5.0"], [".5", "0.6.1", "-0.5", "1e-3"]),
    ("size", ["64m", "1g", "10MB", "512k", "32kb", "1048576", "-1", "0b"],
     ["1.5g", "64mib", "-2", "64 m", "file:///etc/passwd"]),
    ("duration", ["30s", "500ms", "5min", "2h", "1d", "120", "250us"],
     ["30S", "1.5s", "-1s", "30sec", "P1D"]),
    ("timezone", ["UTC", "Etc/UTC", "Europe/Paris", "America/Argentina/Buenos_Aires",
                  "America/Port-au-Prince", "+02:00", "-5", "GMT+1", "Etc/GMT+5"],
     ["../../etc/passwd", "Europe/Paris/a/b", "org.evil.Zone", "a b"]),
    ("word", ["orders-team", "dv_1"], ["org.evil.Sink", "a/b", "", "x" * 65]),
])
def test_each_shape_takes_tuning_values_and_no_class_path_or_url(
        shape: str, good: list[str], bad: list[str]) -> None:
    rule = conf_rule(f"spark.x={shape}")
    assert [v for v in good if not rule.accepts(v)] == []
    assert [v for v in bad if rule.accepts(v)] == []
    assert rule.describe() == SHAPES[shape][1]


def test_the_default_allowlist_is_explicit_keys_each_with_a_shape() -> None:
    rules = [conf_rule(entry) for entry in DEFAULT_SPARK_CONF_ALLOW]
    assert all(r.shape != "any" and not r.key.endswith("*") for r in rules)
    assert len({r.key for r in rules}) == len(rules)
    for codec in ("spark.io.compression.codec", "spark.shuffle.mapStatus.compression.codec",
                  "spark.sql.streaming.stateStore.compression.codec"):
        assert conf({codec: "zstd"}) is None
        # a codec key also takes a class name, which the driver loads
        for hostile in ("org.apache.spark.io.ZStdCompressionCodec", "org.evil.Codec", "ZSTD"):
            assert f"key {codec} takes one of lz4, lzf, snappy, zstd" in (
                conf({codec: hostile}) or ""), hostile
    # keys whose value is a class, once under an allowed prefix
    for key in ("spark.sql.streaming.commitProtocolClass", "spark.sql.streaming.stateStore."
                "providerClass", "spark.sql.adaptive.customCostEvaluatorClass",
                "spark.shuffle.manager", "spark.shuffle.sort.io.plugin.class",
                "spark.sql.streaming.streamingQueryListeners", "spark.sql.streaming."
                "checkpointLocation", "spark.sql.streaming.disabledV2Writers"):
        assert f"spec.spark.sparkConf key {key}: refused" in (conf({key: "x"}) or ""), key


def test_no_value_holds_a_substitution_whatever_the_policy_allows() -> None:
    trusting = parse_policy('{"sparkConf": {"allow": ["spark.*"], "deny": []}}')
    for value in ("${env:PGPASSWORD}", "org.evil.${system:user.name}", "${spark.app.id}", "a${"):
        for policy in (None, trusting):
            message = conf({"spark.sql.session.timeZone": value}, policy)
            assert message == ("spec.spark.sparkConf key spark.sql.session.timeZone: `${` asks "
                               "Spark to substitute a variable into the value (`${env:X}` and "
                               "`${system:X}` would put the environment and the JVM properties "
                               "of the job there) and no value may hold one: remove it")
    assert conf({"spark.anything": "s3a://bucket/x"}, trusting) is None  # the platform's choice


def test_checks_run_in_order_keys_then_substitutions_then_shapes() -> None:
    mixed = {"spark.sql.shuffle.partitions": "many", "spark.sql.session.timeZone": "${env:X}",
             "spark.jars": "https://attacker.example/a.jar"}
    assert "key spark.jars: refused" in (conf(mixed) or "")
    del mixed["spark.jars"]
    assert "`${`" in (conf(mixed) or "")
    del mixed["spark.sql.session.timeZone"]
    assert "key spark.sql.shuffle.partitions takes a whole number (e.g. 8)" in (conf(mixed) or "")


def test_a_key_of_several_rules_takes_what_any_accepts_and_is_told_the_first_shape() -> None:
    policy = parse_policy('{"sparkConf": {"allow": ["spark.a=int", "spark.b=bool", '
                          '"spark.*=on|off", "spark.derivedviews.failpoint.*"]}}')
    assert conf({"spark.a": "8"}, policy) is None
    assert conf({"spark.a": "on"}, policy) is None
    assert "takes a whole number" in (conf({"spark.a": "x"}, policy) or "")
    assert "takes one of on, off" in (conf({"spark.c": "x"}, policy) or "")
    # a key alone takes any value: the fault tests' own failpoint, a path
    assert conf({"spark.derivedviews.failpoint.beforeCommit": "/tmp/hold"}, policy) is None


@pytest.mark.parametrize(("pattern", "admitted", "refused"), [
    ("10.0.0.*", ["10.0.0.1:9092", "10.0.0.255:1"],
     ["10.0.0.1.nip.io:9092", "10.0.0.evil.example:9092", "10.0.1.1:9092", "10.0.0.01:9092",
      "[::ffff:10.0.0.1]:9092"]),
    ("10.1.0.0/24:9092", ["10.1.0.0:9092", "10.1.0.255:9092"],
     ["10.1.1.0:9092", "10.1.0.5:9093", "10.1.0.5.attacker.example:9092"]),
    ("10.2.0.9/20", ["10.2.0.1:1", "10.2.15.255:1"], ["10.2.16.0:1"]),  # host bits masked
    ("127.0.0.1:*", ["127.0.0.1:1"], ["127.1:1", "2130706433:1", "127.0.0.1.nip.io:1",
                                       "0x7f000001:1", "[::1]:1"]),
    ("[fd00::/64]:9092", ["[fd00::7]:9092", "[FD00:0:0::8]:9092"],
     ["[fd01::7]:9092", "[fd00::7]:9093", "fd00.attacker.example:9092"]),
    ("[::1]", ["[::1]:9092", "[0:0::1]:1"], ["[::2]:1", "127.0.0.1:1", "localhost:1"]),
    ("*.kafka.platform.svc:9093", ["b-0.kafka.platform.svc:9093", "B.Kafka.Platform.SVC:9093"],
     ["kafka.platform.svc:9093", "b.kafka.platform.svc.attacker.example:9093",
      "xkafka.platform.svc:9093", "10.0.0.1:9093"]),
    ("localhost:*", ["localhost:1", "LOCALHOST:2"], ["localhost.attacker.example:1",
                                                     "127.0.0.1:1"]),
    ("*", ["kafka:1", "10.0.0.1:1", "[fd00::1]:1"], ["127.1:1", "[::ffff:1.2.3.4]:1", "a_b:1"]),
    ("*:9092", ["kafka:9092"], ["kafka:9093"]),
])
def test_host_patterns_admit_addresses_as_addresses_and_names_as_names(
        pattern: str, admitted: list[str], refused: list[str]) -> None:
    assert [a for a in admitted if not host_admitted(a, [pattern])] == []
    assert [a for a in refused if host_admitted(a, [pattern])] == []


def test_schema_registries_match_as_hosts_too() -> None:
    listed = parse_policy('{"schemaRegistries": ["10.0.0.0/24", "[fd00::/64]:8081"]}')
    assert registry_refusal("10.0.0.7:8081", listed) is None
    assert registry_refusal("fd00::7:8081", listed) is None  # urllib's hostname, unbracketed
    for hostile in ("10.0.0.7.nip.io:8081", "10.0.1.7:8081", "fd00::7:80", "::ffff:10.0.0.7:1"):
        assert registry_refusal(hostile, listed) is not None, hostile
