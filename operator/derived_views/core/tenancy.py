"""The tenancy policy: what a view's author may choose, set once by the platform team.

Creating a view runs code with the namespace's credentials: the job's image and
entry point, its ServiceAccount, Spark settings that mount volumes or load
classes, Python files from anywhere, the Secrets it is given. The chart's
`tenancy` values (env DV_TENANCY_POLICY, JSON) say which of those an author may
set; the chart's ValidatingAdmissionPolicy refuses what CEL can see at apply
time, and this module refuses the rest (and everything again, for clusters
without that policy) before any job starts: a Stalled PolicyViolation naming
the rule and the chart value that would allow it.

The defaults are what a platform can hand to tenants it does not trust: the
operator's image, entry point and ServiceAccount only, Spark settings limited
to tuning, no Python, only Secrets that exist and are labelled for views, Kafka
only on loopback (a platform names its clusters in `tenancy.kafka.clusters`),
dead letters only to `dlq.*` topics and checkpoints only under the operator's
base: an author who chose the host or bucket would receive the Kafka Secret's
or the checkpoint store's credentials.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from derived_views.api.spec import DerivedViewSpec
from derived_views.core import reasons

SECRET_LABEL = "derivedviews.io/view-secret"
"""A Secret a view may name carries this label with the value "true": its owner says views may
use it (the operator connects with it and gives it to the view's jobs)."""

DEFAULT_SPARK_CONF_ALLOW = (
    "spark.sql.shuffle.partitions", "spark.sql.adaptive.*", "spark.sql.autoBroadcastJoinThreshold",
    "spark.sql.files.maxPartitionBytes", "spark.sql.session.timeZone",
    "spark.sql.streaming.*", "spark.sql.ansi.enabled", "spark.sql.caseSensitive",
    "spark.default.parallelism", "spark.memory.*", "spark.driver.memoryOverhead*",
    "spark.executor.memoryOverhead*", "spark.network.timeout", "spark.executor.heartbeatInterval",
    "spark.task.maxFailures", "spark.speculation*", "spark.locality.wait*",
    "spark.kryoserializer.buffer*", "spark.shuffle.*", "spark.reducer.*", "spark.cleaner.*",
    "spark.ui.enabled", "spark.metrics.namespace",
)
"""Tuning only. Everything else (spark.kubernetes.* volumes, pod templates and secrets,
spark.jars*, spark.files, *.extraJavaOptions, *.extraClassPath, plugins, listeners, SQL
extensions and catalogs, spark.hadoop.*, serializer and Kryo registrator classes, UI filters,
event logs written where the author says) loads code, mounts storage, swaps identities or
writes outside the job's stores."""
DEFAULT_SPARK_CONF_DENY = ("spark.sql.streaming.streamingQueryListeners",
                           "spark.sql.streaming.stateStore.providerClass",
                           "spark.sql.streaming.checkpointFileManagerClass",
                           "spark.sql.streaming.checkpointLocation",
                           "spark.shuffle.manager", "spark.shuffle.sort.io.plugin.class",
                           "spark.sql.variable.substitute*")
"""Within the allowed prefixes: settings that name a class to load, move checkpoints, or turn
on `${env:X}` substitution in SQL (the renderer sets it off after the author's keys anyway)."""
CHART_VALUE = "tenancy"


@dataclass(frozen=True)
class KafkaClusters:
    """Bootstrap servers the views of some namespaces may name (both lists are patterns)."""

    namespaces: tuple[str, ...]
    bootstrap_servers: tuple[str, ...]


DEFAULT_KAFKA_CLUSTERS = (KafkaClusters(("*",), ("127.0.0.1:*", "localhost:*")),)
"""Loopback only: in a job's pod that is the pod itself, where no author listens. A platform
lists its clusters; any other host would receive the Kafka Secret's credentials."""
DEFAULT_SCHEMA_REGISTRIES = ("127.0.0.1:*", "localhost:*")
"""Loopback only, as for Kafka: the operator itself asks a view's registry (before any job
starts), from its own place in the network; a host of the author's choosing would make it
probe any service the operator reaches. A platform lists its registries."""
DEFAULT_DEAD_LETTER_TOPICS = ("dlq.*",)
"""Dead letters are written with the view's Kafka credentials: only to topics kept for them,
never into another team's topic."""


class PolicyError(ValueError):
    """DV_TENANCY_POLICY is malformed; the message says which key."""


@dataclass(frozen=True)
class TenancyPolicy:
    """Patterns are exact values or prefixes ending in `*`; an empty list allows none."""

    images: tuple[str, ...] = ()
    """spec.spark.image values allowed besides the operator's own image."""
    main_application_files: tuple[str, ...] = ()
    """spec.spark.mainApplicationFile values allowed besides the operator's own entry point."""
    service_account_override: bool = False
    """Authors may name spec.spark.serviceAccount (else the platform's account runs every job)."""
    spark_conf_allow: tuple[str, ...] = DEFAULT_SPARK_CONF_ALLOW
    spark_conf_deny: tuple[str, ...] = DEFAULT_SPARK_CONF_DENY
    """Wins over `spark_conf_allow`."""
    python: bool = False
    """Python transforms (arbitrary code in the driver) are allowed."""
    py_files: tuple[str, ...] = ()
    """transform.python.pyFiles URL prefixes allowed (with `python`)."""
    secret_label: str | None = SECRET_LABEL
    """Secrets a view names must carry `<label>=true`; None: any Secret of the namespace."""
    kafka_clusters: tuple[KafkaClusters, ...] = DEFAULT_KAFKA_CLUSTERS
    """source.kafka.bootstrapServers: every server must match a rule of the view's namespace."""
    dead_letter_topics: tuple[str, ...] = DEFAULT_DEAD_LETTER_TOPICS
    """source.badRecords.deadLetterTopic values allowed."""
    schema_registries: tuple[str, ...] = DEFAULT_SCHEMA_REGISTRIES
    """`host:port` of the schema registry a view's registry Secret names (its `url`)."""
    checkpoint_override: bool = False
    """Authors may name spec.spark.checkpointBase (else the operator's base holds every
    checkpoint: the store's keys reach only the platform's own bucket and prefix)."""


@dataclass(frozen=True)
class PolicyRefusal:
    reason: str
    message: str


def matches(value: str, patterns: Iterable[str]) -> bool:
    """`value` equals a pattern, or starts with a pattern's text before its trailing `*`."""
    for pattern in patterns:
        if pattern.endswith("*") and value.startswith(pattern[:-1]):
            return True
        if value == pattern:
            return True
    return False


SERVER = re.compile(r"([A-Za-z0-9][A-Za-z0-9.-]*|\[[0-9A-Fa-f:.]+\]):[0-9]{1,5}")
"""A plain `host:port`. The CRD lets a host hold `@` or `:`; Kafka's Java client then skips
everything before the last `host:port` it can read, so `127.0.0.1:1@attacker.example:9092`
would match a `127.0.0.1:*` pattern yet connect to attacker.example."""


def bootstrap_servers(value: str) -> tuple[str, ...]:
    """The `host:port` entries of a bootstrap list, as the Kafka client splits it."""
    return tuple(s.strip() for s in value.split(",") if s.strip())


def cluster_refusal(spec: DerivedViewSpec, policy: TenancyPolicy,
                    namespace: str | None) -> PolicyRefusal | None:
    """The view's Kafka cluster, unless a rule of its namespace lists every server of it: the
    operator and the job connect there with the view's Kafka Secret. `namespace` None (not
    known to the caller): only rules for every namespace (`*`) apply, so unknown fails closed."""
    rules = [r for r in policy.kafka_clusters
             if ("*" in r.namespaces if namespace is None else matches(namespace, r.namespaces))]
    servers = bootstrap_servers(spec.source.kafka.bootstrap_servers)
    if not servers or not all(SERVER.fullmatch(s) for s in servers) or not any(
            all(matches(s, r.bootstrap_servers) for s in servers) for r in rules):
        where = f" for namespace {namespace}" if namespace is not None else ""
        return _refuse(f"spec.source.kafka.bootstrapServers {spec.source.kafka.bootstrap_servers}"
                       f" is not a Kafka cluster the platform lists{where}",
                       "use one of its clusters (the job and the operator connect there with "
                       "the Kafka Secret)", "kafka.clusters")
    return None


def kafka_refusal(spec: DerivedViewSpec, policy: TenancyPolicy,
                  namespace: str | None) -> PolicyRefusal | None:
    """The Kafka cluster or dead-letter topic the policy does not allow."""
    refusal = cluster_refusal(spec, policy, namespace)
    if refusal is not None:
        return refusal
    topic = spec.source.bad_records.dead_letter_topic
    if topic is not None and not matches(topic, policy.dead_letter_topics):
        allowed = ", ".join(policy.dead_letter_topics) or "none"
        return _refuse(f"spec.source.badRecords.deadLetterTopic {topic}",
                       f"name a topic matching {allowed}", "kafka.deadLetterTopics")
    return None


def spec_refusal(spec: DerivedViewSpec, policy: TenancyPolicy, *, operator_image: str,
                 operator_main_file: str, namespace: str | None) -> PolicyRefusal | None:
    """The first thing `spec` sets that the policy does not allow (Secrets aside)."""
    spark = spec.spark
    if spark.checkpoint_base is not None and not policy.checkpoint_override:
        return _refuse(f"spec.spark.checkpointBase {spark.checkpoint_base}",
                       "remove it to keep checkpoints under the operator base (the checkpoint "
                       "store credentials go where it points)", "checkpoints.authorOverride")
    refusal = kafka_refusal(spec, policy, namespace)
    if refusal is not None:
        return refusal
    if spark.image is not None and spark.image != operator_image and not matches(
            spark.image, policy.images):
        return _refuse(f"spec.spark.image {spark.image}",
                       "remove it to use the image the platform sets", "images")
    main = spark.main_application_file
    if main is not None and main != operator_main_file and not matches(
            main, policy.main_application_files):
        return _refuse(f"spec.spark.mainApplicationFile {main}",
                       "remove it to use the job the platform sets", "mainApplicationFiles")
    if spark.service_account is not None and not policy.service_account_override:
        return _refuse("spec.spark.serviceAccount",
                       "remove it (jobs run as the ServiceAccount the platform sets)",
                       "serviceAccountOverride")
    for key in sorted(spark.spark_conf):
        if not matches(key, policy.spark_conf_allow) or matches(key, policy.spark_conf_deny):
            return _refuse(f"spec.spark.sparkConf key {key}", "remove it", "sparkConf.allow")
    python = spec.transform.python
    if python is not None:
        if not policy.python:
            return _refuse("transform.python",
                           "a Python transform runs arbitrary code with the job's credentials: "
                           "write the transform in SQL", "python.enabled")
        for url in python.py_files:
            if not matches(url, policy.py_files):
                return _refuse(f"transform.python.pyFiles entry {url}",
                               "ship the file from an allowed location",
                               "python.pyFilesPrefixes")
    return None


def secrets_of(spec: DerivedViewSpec) -> tuple[str, ...]:
    """The Secrets a view names (its sink's, its Kafka connection's, its schema registry's),
    in that order."""
    names = [spec.sink.secret_ref.name]
    if spec.source.kafka.secret_ref is not None:
        names.append(spec.source.kafka.secret_ref.name)
    if spec.source.avro is not None:
        names.append(spec.source.avro.registry.secret_ref.name)
    return tuple(dict.fromkeys(names))




def secret_refusal(namespace: str, name: str, labels: Mapping[str, str] | None,
                   policy: TenancyPolicy) -> PolicyRefusal | None:
    """A Secret the view may not use: missing (`labels` None), or present but not labelled for
    views. A job is created only after this said None in the same pass: with the Secret
    missing, the job would start with whatever Secret of that name appeared later."""
    if labels is None:
        return PolicyRefusal(
            reasons.SECRET_MISSING,
            f"secret {namespace}/{name} not found: a view's jobs use only Secrets that exist "
            f"(and are labelled for views) when the job is created; create it in namespace "
            f"{namespace} or fix the view's secretRef")
    if policy.secret_label is None:
        return None
    if labels.get(policy.secret_label) == "true":
        return None
    return PolicyRefusal(
        reasons.SECRET_NOT_LABELLED,
        f"secret {namespace}/{name} is not labelled {policy.secret_label}=true, so views may "
        f"not use it: its owner labels it (kubectl label secret -n {namespace} {name} "
        f"{policy.secret_label}=true) to let views connect with it")


def registry_refusal(address: str, policy: TenancyPolicy) -> PolicyRefusal | None:
    """A schema registry at `address` (host:port, from the view's registry Secret) that the
    policy does not list; checked before the operator sends it any request."""
    if matches(address, policy.schema_registries):
        return None
    return _refuse(f"schema registry {address} (the registry Secret's url)",
                   "name a registry the platform lists", "schemaRegistries")


def _refuse(what: str, fix: str, value: str) -> PolicyRefusal:
    return PolicyRefusal(reasons.POLICY_VIOLATION,
                         f"{what}: refused by the tenancy policy (chart value {CHART_VALUE}."
                         f"{value}); {fix}, or ask the platform team to allow it")


def parse_policy(raw: str | None) -> TenancyPolicy:
    """DV_TENANCY_POLICY (JSON, the chart's `tenancy` values); unset or empty: the defaults."""
    if raw is None or not raw.strip():
        return TenancyPolicy()
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise PolicyError(f"DV_TENANCY_POLICY is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise PolicyError("DV_TENANCY_POLICY must be a JSON object (the chart's tenancy values)")
    conf = _object(doc, "sparkConf")
    python = _object(doc, "python")
    secrets = _object(doc, "secrets")
    kafka = _object(doc, "kafka")
    checkpoints = _object(doc, "checkpoints")
    known = {"images", "mainApplicationFiles", "serviceAccountOverride", "sparkConf", "python",
             "secrets", "admissionPolicy", "kafka", "checkpoints", "schemaRegistries"}
    unknown = sorted(set(doc) - known)
    if unknown:
        raise PolicyError(f"DV_TENANCY_POLICY has unknown keys {unknown}; known: {sorted(known)}")
    defaults = TenancyPolicy()
    return TenancyPolicy(
        images=_patterns(doc, "images", ()),
        main_application_files=_patterns(doc, "mainApplicationFiles", ()),
        service_account_override=_flag(doc, "serviceAccountOverride", False),
        spark_conf_allow=_patterns(conf, "allow", defaults.spark_conf_allow, "sparkConf."),
        spark_conf_deny=_patterns(conf, "deny", defaults.spark_conf_deny, "sparkConf."),
        python=_flag(python, "enabled", False, "python."),
        py_files=tuple(p if p.endswith("*") else f"{p}*"  # prefixes, as the key says
                       for p in _patterns(python, "pyFilesPrefixes", (), "python.")),
        secret_label=(SECRET_LABEL if _flag(secrets, "requireLabel", True, "secrets.")
                      else None),
        kafka_clusters=_clusters(kafka),
        dead_letter_topics=_patterns(kafka, "deadLetterTopics", defaults.dead_letter_topics,
                                     "kafka."),
        checkpoint_override=_flag(checkpoints, "authorOverride", False, "checkpoints."),
        schema_registries=_patterns(doc, "schemaRegistries", defaults.schema_registries),
    )


def _clusters(kafka: Mapping[str, Any]) -> tuple[KafkaClusters, ...]:
    value = kafka.get("clusters")
    if value is None:
        return DEFAULT_KAFKA_CLUSTERS
    if not isinstance(value, list):
        raise PolicyError("DV_TENANCY_POLICY: kafka.clusters must be a list of {namespaces, "
                          "bootstrapServers}")
    rules = []
    for i, rule in enumerate(value):
        where = f"kafka.clusters[{i}]."
        if not isinstance(rule, dict) or set(rule) - {"namespaces", "bootstrapServers"}:
            raise PolicyError(f"DV_TENANCY_POLICY: kafka.clusters[{i}] must be an object with "
                              "keys namespaces and bootstrapServers")
        servers = _patterns(rule, "bootstrapServers", (), where)
        if not servers:
            raise PolicyError(f"DV_TENANCY_POLICY: {where}bootstrapServers must list at least "
                              "one host:port pattern")
        rules.append(KafkaClusters(_patterns(rule, "namespaces", ("*",), where), servers))
    return tuple(rules)


def _object(doc: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = doc.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise PolicyError(f"DV_TENANCY_POLICY: {key} must be an object")
    return value


def _flag(doc: Mapping[str, Any], key: str, default: bool, where: str = "") -> bool:
    value = doc.get(key, default)
    if not isinstance(value, bool):
        raise PolicyError(f"DV_TENANCY_POLICY: {where}{key} must be true or false")
    return value


def _patterns(doc: Mapping[str, Any], key: str, default: tuple[str, ...],
              where: str = "") -> tuple[str, ...]:
    value = doc.get(key)
    if value is None:
        return default
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise PolicyError(f"DV_TENANCY_POLICY: {where}{key} must be a list of strings")
    bad = [v for v in value if not v or "*" in v[:-1]]
    if bad:
        raise PolicyError(f"DV_TENANCY_POLICY: {where}{key} has {bad}: a pattern is a value "
                          "or a prefix ending in a single trailing *")
    return tuple(value)
