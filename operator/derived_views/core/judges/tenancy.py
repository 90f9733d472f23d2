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
to tuning keys with values of a tuning shape (numbers, sizes, durations,
booleans, Spark's own codec names), no Python, only Secrets that exist and are
labelled for views, Kafka only on loopback (a platform names its clusters in
`tenancy.kafka.clusters`), dead letters only to the view namespace's own
`dlq.<namespace>.*` topics and checkpoints only under the operator's base: an
author who chose the host or bucket would receive the Kafka Secret's or the
checkpoint store's credentials.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from derived_views.api.spec import DerivedViewSpec
from derived_views.core import reasons

SECRET_LABEL = "derivedviews.io/view-secret"
"""A Secret a view may name carries this label with the value "true": its owner says views may
use it (the operator connects with it and gives it to the view's jobs)."""

# --- sparkConf: keys and the shapes of their values -------------------------------------------

SHAPES: dict[str, tuple[str, str]] = {
    "bool": ("true|false", "true or false"),
    "int": ("[0-9]{1,10}", "a whole number (e.g. 8)"),
    "number": ("[0-9]{1,10}([.][0-9]{1,10})?", "a number (e.g. 0.6)"),
    "size": ("-1|[0-9]{1,15}([bBkKmMgGtTpP]|[kKmMgGtTpP][bB])?",
             "a size: a whole number with an optional unit b, k, m, g, t or p (e.g. 64m), or -1"),
    "duration": ("[0-9]{1,15}(us|ms|s|m|min|h|d)?",
                 "a duration: a whole number with an optional unit us, ms, s, m, min, h or d "
                 "(e.g. 30s)"),
    "timezone": ("[A-Za-z][A-Za-z0-9_+-]{0,31}(/[A-Za-z0-9_+-]{1,32}){0,2}"
                 "|(UTC|GMT|UT)?[+-][0-9]{1,2}(:[0-9]{2}){0,2}",
                 "a time zone: a region (e.g. Europe/Paris) or an offset (e.g. +02:00)"),
    "word": ("[A-Za-z0-9_-]{1,64}", "a word of at most 64 letters, digits, _ and -"),
}
"""The shapes of a sparkConf value, by name: a regular expression the whole value matches
(RE2 and Python alike: no backslashes, so the chart quotes it into CEL as is) and what to tell
an author. They follow how Spark 4.0 reads the value (JavaUtils.byteStringAs/timeStringAs for
sizes and durations, SQLConf's session time zone check); none admits a class name, a path or a
URL. A rule may instead list the values it allows (`lz4|lzf|snappy|zstd`), or say `any`."""
ANY = "any"
"""The shape of a key the platform lists without one: any value (still without `${`)."""
ENUM_VALUE = re.compile(r"[A-Za-z0-9_.-]+")
CODECS = "lz4|lzf|snappy|zstd"
"""Spark's own short codec names (CompressionCodec.shortCompressionCodecNames). The codec keys
also take a class name, which the driver loads."""

DEFAULT_SPARK_CONF_ALLOW = (
    # SQL (SQLConf): partitions, adaptive execution, joins, the session
    "spark.sql.shuffle.partitions=int",
    "spark.sql.adaptive.enabled=bool",
    "spark.sql.adaptive.coalescePartitions.enabled=bool",
    "spark.sql.adaptive.coalescePartitions.parallelismFirst=bool",
    "spark.sql.adaptive.coalescePartitions.initialPartitionNum=int",
    "spark.sql.adaptive.coalescePartitions.minPartitionSize=size",
    "spark.sql.adaptive.advisoryPartitionSizeInBytes=size",
    "spark.sql.adaptive.autoBroadcastJoinThreshold=size",
    "spark.sql.adaptive.localShuffleReader.enabled=bool",
    "spark.sql.adaptive.skewJoin.enabled=bool",
    "spark.sql.adaptive.skewJoin.skewedPartitionFactor=number",
    "spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes=size",
    "spark.sql.adaptive.forceOptimizeSkewedJoin=bool",
    "spark.sql.adaptive.optimizeSkewsInRebalancePartitions.enabled=bool",
    "spark.sql.adaptive.rebalancePartitionsSmallPartitionFactor=number",
    "spark.sql.adaptive.maxShuffledHashJoinLocalMapThreshold=size",
    "spark.sql.autoBroadcastJoinThreshold=size",
    "spark.sql.broadcastTimeout=duration",
    "spark.sql.files.maxPartitionBytes=size",
    "spark.sql.session.timeZone=timezone",
    "spark.sql.ansi.enabled=bool",
    "spark.sql.caseSensitive=bool",
    # Structured Streaming (SQLConf): state store and progress
    f"spark.sql.streaming.stateStore.compression.codec={CODECS}",
    "spark.sql.streaming.stateStore.minDeltasForSnapshot=int",
    "spark.sql.streaming.stateStore.maintenanceInterval=duration",
    "spark.sql.streaming.minBatchesToRetain=int",
    "spark.sql.streaming.maxBatchesToRetainInMemory=int",
    "spark.sql.streaming.noDataMicroBatches.enabled=bool",
    "spark.sql.streaming.numRecentProgressUpdates=int",
    "spark.sql.streaming.metricsEnabled=bool",
    "spark.sql.streaming.stopTimeout=duration",
    # core (internal/config/package.scala): parallelism, memory, timeouts, scheduling
    "spark.default.parallelism=int",
    "spark.memory.fraction=number",
    "spark.memory.storageFraction=number",
    "spark.memory.offHeap.enabled=bool",
    "spark.memory.offHeap.size=size",
    "spark.driver.memoryOverhead=size",
    "spark.driver.memoryOverheadFactor=number",
    "spark.driver.minMemoryOverhead=size",
    "spark.driver.maxResultSize=size",
    "spark.executor.memoryOverhead=size",
    "spark.executor.memoryOverheadFactor=number",
    "spark.executor.minMemoryOverhead=size",
    "spark.executor.heartbeatInterval=duration",
    "spark.network.timeout=duration",
    "spark.task.maxFailures=int",
    "spark.speculation=bool",
    "spark.speculation.interval=duration",
    "spark.speculation.multiplier=number",
    "spark.speculation.quantile=number",
    "spark.speculation.minTaskRuntime=duration",
    "spark.locality.wait=duration",
    "spark.locality.wait.process=duration",
    "spark.locality.wait.node=duration",
    "spark.locality.wait.rack=duration",
    # compression, serialization buffers, shuffle and its fetches
    f"spark.io.compression.codec={CODECS}",
    "spark.io.compression.lz4.blockSize=size",
    "spark.io.compression.zstd.level=int",
    "spark.io.compression.zstd.bufferSize=size",
    "spark.kryoserializer.buffer=size",
    "spark.kryoserializer.buffer.max=size",
    "spark.shuffle.compress=bool",
    "spark.shuffle.spill.compress=bool",
    "spark.shuffle.file.buffer=size",
    "spark.shuffle.sort.bypassMergeThreshold=int",
    "spark.shuffle.io.maxRetries=int",
    "spark.shuffle.io.retryWait=duration",
    f"spark.shuffle.mapStatus.compression.codec={CODECS}",
    "spark.reducer.maxSizeInFlight=size",
    "spark.reducer.maxReqsInFlight=int",
    "spark.reducer.maxBlocksInFlightPerAddress=int",
    "spark.cleaner.periodicGC.interval=duration",
    "spark.ui.enabled=bool",
    "spark.metrics.namespace=word",
)
"""Tuning only, each key with the shape of its value (`key=shape`), taken from Spark 4.0's
own definitions (SQLConf.scala, core's internal/config/package.scala; the two
spark.shuffle.io keys are read by the network module's TransportConf). No broad prefix: under
spark.sql.streaming.*, spark.sql.adaptive.* and spark.shuffle.* Spark keeps keys whose value
is a class it loads (commitProtocolClass, customCostEvaluatorClass, providerClass, the
shuffle manager and IO plugin, listeners), and a codec key takes a class name as readily as
lz4. Everything else (spark.kubernetes.* volumes, pod templates and secrets, spark.jars*,
spark.files, *.extraJavaOptions, *.extraClassPath, plugins, listeners, SQL extensions and
catalogs, spark.hadoop.*, serializer and Kryo registrator classes, UI filters, event logs
written where the author says) loads code, mounts storage, swaps identities or writes
outside the job's stores."""
DEFAULT_SPARK_CONF_DENY = ("spark.sql.streaming.streamingQueryListeners",
                           "spark.sql.streaming.stateStore.providerClass",
                           "spark.sql.streaming.checkpointFileManagerClass",
                           "spark.sql.streaming.checkpointLocation",
                           "spark.sql.streaming.commitProtocolClass",
                           "spark.sql.adaptive.customCostEvaluatorClass",
                           "spark.shuffle.manager", "spark.shuffle.sort.io.plugin.class",
                           "spark.sql.variable.substitute*")
"""A second wall for platforms that allow a prefix: settings that name a class to load, move
checkpoints, or turn on `${env:X}` substitution in SQL (the renderer sets it off after the
author's keys anyway)."""
SUBSTITUTION = "${"
"""Spark replaces `${env:X}`, `${system:X}` and `${other.key}` in configuration values before
using them (ConfigReader), so `codec=${env:PGPASSWORD}` put a secret into a class name the
driver logged. No value may hold it, whatever the policy allows."""
CHART_VALUE = "tenancy"


@dataclass(frozen=True)
class ConfRule:
    """One `tenancy.sparkConf.allow` entry: a key (a value or a prefix ending in `*`) and the
    shape of its values."""

    key: str
    shape: str
    """A name of SHAPES, `any`, or the allowed values joined by `|`."""

    @property
    def regex(self) -> str | None:
        """What the whole value must match; None: any value."""
        if self.shape == ANY:
            return None
        if self.shape in SHAPES:
            return SHAPES[self.shape][0]
        return "|".join(v.replace(".", "[.]") for v in self.shape.split("|"))

    def describe(self) -> str:
        if self.shape == ANY:
            return "any value"
        if self.shape in SHAPES:
            return SHAPES[self.shape][1]
        return "one of " + ", ".join(self.shape.split("|"))

    def accepts(self, value: str) -> bool:
        regex = self.regex
        return regex is None or re.fullmatch(f"({regex})", value) is not None


def conf_rule(entry: str, where: str = "sparkConf.allow") -> ConfRule:
    """`key=shape`, or a key alone (any value: a platform's own key it trusts)."""
    key, sep, shape = entry.partition("=")
    shape = shape if sep else ANY
    if not key or "*" in key[:-1] or any(c in key for c in "'\\ \t\n"):
        raise PolicyError(f"DV_TENANCY_POLICY: {where} has {entry!r}: a key is a value or a "
                          "prefix ending in a single trailing *")
    if shape != ANY and shape not in SHAPES and not all(
            ENUM_VALUE.fullmatch(v) for v in shape.split("|")):
        raise PolicyError(f"DV_TENANCY_POLICY: {where} has {entry!r}: the shape after = is one "
                          f"of {', '.join([*SHAPES, ANY])}, or the allowed values joined by | "
                          "(letters, digits, _ . -)")
    return ConfRule(key, shape)


def spark_conf_refusal(conf: Mapping[str, str],
                       policy: TenancyPolicy) -> PolicyRefusal | None:
    """The first sparkConf entry the policy refuses: a key it does not allow (or denies), then
    a value holding `${`, then a value not of its key's shape. A key matching several rules
    takes a value any of them accepts, and is told the shape that comes first in the list."""
    rules = [conf_rule(entry) for entry in policy.spark_conf_allow]

    def rules_of(key: str) -> list[ConfRule]:
        return [r for r in rules if matches(key, (r.key,))]

    for key in sorted(conf):
        if not rules_of(key) or matches(key, policy.spark_conf_deny):
            return _refuse(f"spec.spark.sparkConf key {key}", "remove it", "sparkConf.allow")
    for key in sorted(conf):
        if SUBSTITUTION in conf[key]:
            return PolicyRefusal(reasons.POLICY_VIOLATION, substitution_message(key))
    first = list(dict.fromkeys(r.shape for r in rules))  # the chart's order of shapes
    for key in sorted(conf):
        found = rules_of(key)
        if not any(r.accepts(conf[key]) for r in found):
            told = min(found, key=lambda r: first.index(r.shape))
            return _refuse(f"spec.spark.sparkConf key {key} takes {told.describe()}",
                           "give such a value", "sparkConf.allow")
    return None


def substitution_message(key: str) -> str:
    """Not the policy's to allow: no platform wants the job's environment in a setting."""
    return (f"spec.spark.sparkConf key {key}: `${{` asks Spark to substitute a variable into "
            "the value (`${env:X}` and `${system:X}` would put the environment and the JVM "
            "properties of the job there) and no value may hold one: remove it")


# --- hosts: Kafka clusters and schema registries -----------------------------------------------

IPAddress: TypeAlias = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork: TypeAlias = ipaddress.IPv4Network | ipaddress.IPv6Network
_DNS_NAME = re.compile(r"([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?[.])*[a-z]([a-z0-9-]{0,61}[a-z0-9])?")
"""A DNS name (lower case) whose last label begins with a letter, as top-level domains and
Kubernetes service names do. A host of digits and dots that is no IPv4 address (`127.1`,
`2130706433`, `0x7f.1`, `010.0.0.1`) is neither a name nor an address: Java's and libc's
resolvers read such text as an address, which a name pattern must not admit."""
IPV4_OCTET_PREFIX = re.compile(r"([0-9]{1,3}[.]){1,3}[*]")
HOST_FORMS = ("a host pattern is *, a name (kafka.platform.svc), *.<domain> (every name under "
              "it), an IP address (10.0.0.7, [fd00::7]), a CIDR (10.0.0.0/24, [fd00::/64]) or "
              "whole IPv4 octets and * (10.0.0.*), with an optional :<port> or :*")


@dataclass(frozen=True)
class HostPattern:
    """Where an author's host:port may point: names match names only, addresses and networks
    match IP literals only (as addresses, so `10.0.0.*` never admits `10.0.0.1.attacker.example`
    and `[fd00::1]` is `[fd00:0::1]`)."""

    text: str
    name: str | None = None
    """An exact name, or with `suffix` the domain every matching name ends under."""
    suffix: bool = False
    network: IPNetwork | None = None
    port: int | None = None
    """None: any port."""

    @property
    def any_host(self) -> bool:
        return self.name is None and self.network is None

    def admits(self, host: IPAddress | str, port: int) -> bool:
        if self.port is not None and port != self.port:
            return False
        if self.any_host:
            return True
        if isinstance(host, str):
            return self.name is not None and (
                host.endswith(f".{self.name}") if self.suffix else host == self.name)
        return (self.network is not None and host.version == self.network.version
                and host in self.network)


def host_pattern(text: str, where: str) -> HostPattern:
    """Parse one pattern of `tenancy.kafka.clusters[].bootstrapServers` or
    `tenancy.schemaRegistries`; PolicyError names the forms."""
    def bad(why: str = "") -> PolicyError:
        return PolicyError(f"DV_TENANCY_POLICY: {where} has {text!r}: {why}{HOST_FORMS}")

    if text.startswith("["):
        host, close, rest = text[1:].partition("]")
        if not close or ":" not in host:
            raise bad("an IPv6 address or network goes in brackets; ")
    else:
        if text.count(":") > 1:
            raise bad("an IPv6 address or network goes in brackets; ")
        host, colon, port_text = text.partition(":")
        rest = colon + port_text
    port: int | None = None
    if rest:
        if not re.fullmatch(r":([0-9]{1,5}|[*])", rest):
            raise bad("the port is a number or *; ")
        port = None if rest == ":*" else int(rest[1:])
    if host == "*":
        return HostPattern(text, port=port)
    if text.startswith("[") or "/" in host or re.fullmatch(r"[0-9.]+", host):
        if not re.fullmatch(r"[0-9A-Fa-f:.]+(/[0-9]{1,3})?", host):
            raise bad("not an IP address or network; ")
        try:
            network = ipaddress.ip_network(host, strict=False)
        except ValueError:
            raise bad("not an IP address or network; ") from None
        if network.version == 6 and not text.startswith("["):
            raise bad("an IPv6 address or network goes in brackets; ")
        return HostPattern(text, network=network, port=port)
    if IPV4_OCTET_PREFIX.fullmatch(host):
        octets = host.split(".")[:-1]
        try:
            network = ipaddress.ip_network(
                ".".join(octets + ["0"] * (4 - len(octets))) + f"/{8 * len(octets)}")
        except ValueError:
            raise bad() from None
        return HostPattern(text, network=network, port=port)
    name = host.lower()
    suffix = name.startswith("*.")
    if suffix:
        name = name[2:]
    if not _DNS_NAME.fullmatch(name) or len(name) > 253:
        raise bad()
    return HostPattern(text, name=name, suffix=suffix, port=port)


def parse_address(address: str) -> tuple[IPAddress | str, int] | None:
    """The host (an address, or a lower-case name) and port of `host:port` (IPv6 in brackets,
    or bare as urllib's hostname gives it); None when the host is neither an IP literal nor a
    name, or is an IPv4-mapped or scoped IPv6 address (which reach what an IPv4 rule lists)."""
    if address.startswith("["):
        host, close, rest = address[1:].partition("]")
        if not close or not rest.startswith(":"):
            return None
        port_text = rest[1:]
    else:
        host, _, port_text = address.rpartition(":")
    if not re.fullmatch(r"[0-9]{1,5}", port_text) or not host.isascii() or "%" in host:
        return None  # non-ASCII: str.lower() maps some letters (K, the Kelvin sign) to ASCII
    port = int(port_text)
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        name = host.lower()
        return (name, port) if _DNS_NAME.fullmatch(name) and len(name) <= 253 else None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return None
    return ip, port


def host_admitted(address: str, patterns: Iterable[str]) -> bool:
    """Whether `address` (host:port) matches one of `patterns` as an address or a name."""
    parsed = parse_address(address)
    return parsed is not None and any(
        host_pattern(p, "pattern").admits(*parsed) for p in patterns)


@dataclass(frozen=True)
class KafkaClusters:
    """Bootstrap servers the views of some namespaces may name: `namespaces` are patterns (a
    value or a prefix ending in `*`), `bootstrap_servers` host patterns (HostPattern)."""

    namespaces: tuple[str, ...]
    bootstrap_servers: tuple[str, ...]


DEFAULT_KAFKA_CLUSTERS = (KafkaClusters(("*",), ("127.0.0.1:*", "localhost:*")),)
"""Loopback only: in a job's pod that is the pod itself, where no author listens. A platform
lists its clusters; any other host would receive the Kafka Secret's credentials."""
DEFAULT_SCHEMA_REGISTRIES = ("127.0.0.1:*", "localhost:*")
"""Loopback only, as for Kafka: the operator itself asks a view's registry (before any job
starts), from its own place in the network; a host of the author's choosing would make it
probe any service the operator reaches. A platform lists its registries."""

# --- dead letters --------------------------------------------------------------------------

NAMESPACE_PLACEHOLDER = "{namespace}"
"""Stands for the view's namespace in the platform's patterns and the job namespace's name."""
DEFAULT_DEAD_LETTER_TOPICS = ("dlq.{namespace}.*",)
"""Dead letters are written with the view's Kafka credentials: only to topics kept for them,
and each namespace's to its own (`{namespace}` is the view's), never into another team's
topic or dead letters."""


def dead_letter_patterns(patterns: Iterable[str], namespace: str | None) -> tuple[str, ...]:
    """`patterns` with `{namespace}` replaced by the view's; a caller that does not know the
    namespace gets only the patterns without it (fail closed)."""
    return tuple(p.replace(NAMESPACE_PLACEHOLDER, namespace) if namespace is not None else p
                 for p in patterns if namespace is not None or NAMESPACE_PLACEHOLDER not in p)


class PolicyError(ValueError):
    """DV_TENANCY_POLICY is malformed; the message says which key."""


@dataclass(frozen=True)
class TenancyPolicy:
    """Patterns are exact values or prefixes ending in `*` (hosts: HostPattern); an empty list
    allows none. Built from malformed rules, it raises PolicyError."""

    images: tuple[str, ...] = ()
    """spec.spark.image values allowed besides the operator's own image."""
    main_application_files: tuple[str, ...] = ()
    """spec.spark.mainApplicationFile values allowed besides the operator's own entry point."""
    service_account_override: bool = False
    """Authors may name spec.spark.serviceAccount (else the platform's account runs every job)."""
    spark_conf_allow: tuple[str, ...] = DEFAULT_SPARK_CONF_ALLOW
    """`key=shape` entries (ConfRule); a key alone takes any value."""
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
    """source.badRecords.deadLetterTopic values allowed; `{namespace}` is the view's."""
    schema_registries: tuple[str, ...] = DEFAULT_SCHEMA_REGISTRIES
    """Host patterns of the schema registry a view's registry Secret names (its `url`)."""
    checkpoint_override: bool = False
    """Authors may name spec.spark.checkpointBase (else the operator's base holds every
    checkpoint: the store's keys reach only the platform's own bucket and prefix)."""

    def __post_init__(self) -> None:
        for entry in self.spark_conf_allow:
            conf_rule(entry)
        for i, rule in enumerate(self.kafka_clusters):
            for pattern in rule.bootstrap_servers:
                host_pattern(pattern, f"kafka.clusters[{i}].bootstrapServers")
        for pattern in self.schema_registries:
            host_pattern(pattern, "schemaRegistries")
        for pattern in self.dead_letter_topics:
            rest = pattern.replace(NAMESPACE_PLACEHOLDER, "")
            if "{" in rest or "}" in rest:
                raise PolicyError(f"DV_TENANCY_POLICY: kafka.deadLetterTopics has {pattern!r}: "
                                  "the one placeholder is {namespace} (the view's namespace)")


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
            all(host_admitted(s, r.bootstrap_servers) for s in servers) for r in rules):
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
    patterns = dead_letter_patterns(policy.dead_letter_topics, namespace)
    if topic is not None and not matches(topic, patterns):
        allowed = ", ".join(patterns) or "none"
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
    refusal = spark_conf_refusal(spark.spark_conf, policy)
    if refusal is not None:
        return refusal
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
    if host_admitted(address, policy.schema_registries):
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
        spark_conf_allow=_strings(conf, "allow", defaults.spark_conf_allow, "sparkConf."),
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
        schema_registries=_strings(doc, "schemaRegistries", defaults.schema_registries),
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
        servers = _strings(rule, "bootstrapServers", (), where)
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


def _strings(doc: Mapping[str, Any], key: str, default: tuple[str, ...],
             where: str = "") -> tuple[str, ...]:
    """A list of strings whose form TenancyPolicy checks (sparkConf rules, host patterns)."""
    value = doc.get(key)
    if value is None:
        return default
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise PolicyError(f"DV_TENANCY_POLICY: {where}{key} must be a list of strings")
    return tuple(value)


def _patterns(doc: Mapping[str, Any], key: str, default: tuple[str, ...],
              where: str = "") -> tuple[str, ...]:
    value = _strings(doc, key, default, where)
    bad = [v for v in value if "*" in v[:-1]]
    if bad:
        raise PolicyError(f"DV_TENANCY_POLICY: {where}{key} has {bad}: a pattern is a value "
                          "or a prefix ending in a single trailing *")
    return value
