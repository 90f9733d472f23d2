"""The first real replay on the local stack: topic, events, SparkApplication, progress.

Shared by `make demo`, the e2e test and the replay benchmark so all three
exercise the same path: events produced with confluent-kafka, a
SparkApplication created in the API server, the project's PySpark job run by
the local executor, progress read from the sink's ledger.
"""

from __future__ import annotations

import itertools
import json
import random
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import psycopg
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from derived_views.adapters.kafka.offsets import fetch_end_offsets
from derived_views.adapters.postgres.sink import ledger_positions
from derived_views.core.judges.tenancy import SECRET_LABEL as VIEW_SECRET_LABEL

ORDER_SCHEMA = "order_id STRING, customer_id STRING, amount DOUBLE, ts TIMESTAMP"
ORDERS_BY_CUSTOMER_SQL = (
    "SELECT customer_id, count(*) AS orders, sum(amount) AS revenue "
    "FROM events GROUP BY customer_id"
)
LEDGER = "dv_ledger"
# librdkafka's own notices (a retried idempotence handshake, a queue purged at
# close) are noise in the demo's output; failures still surface as exceptions.
QUIET = {"log_level": 3}
CHECKPOINT_SECRET = "dv-checkpoints"
"""Name of the checkpoint Secret the local stack's tools create (operator: DV_CHECKPOINT_SECRET)."""


def create_topic(bootstrap: str, topic: str, partitions: int, *,
                 config: Mapping[str, str] | None = None) -> None:
    """Create `topic`; `config` sets topic settings (e.g. `cleanup.policy`, `retention.ms`)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1,
                                            config=dict(config or {}))])
    futures[topic].result(timeout=30)


def delete_records_before(bootstrap: str, topic: str, offsets_by_partition: Mapping[int, int]
                          ) -> dict[int, int]:
    """Delete the records of `topic` below the given offset of each partition, as retention
    would: the log's new start per partition (the broker's answer). -1 deletes up to the end."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    futures = admin.delete_records(
        [TopicPartition(topic, p, o) for p, o in sorted(offsets_by_partition.items())],
        request_timeout=30, operation_timeout=30)
    return {tp.partition: int(f.result(timeout=60).low_watermark) for tp, f in futures.items()}


def read_topic(bootstrap: str, topic: str, *, timeout: float = 120.0
               ) -> list[dict[str, Any]]:
    """Every JSON value the log of `topic` holds now, from each partition's log start to its
    end: a test's own reading of what a replay can see (after retention took its part)."""
    ends = fetch_end_offsets(bootstrap, [topic])
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "enable.partition.eof": True, **QUIET})
    wanted = {tp: end for tp, end in ends.items() if end > 0}
    consumer.assign([TopicPartition(t, p, -2) for (t, p) in wanted])  # OFFSET_BEGINNING
    values: list[dict[str, Any]] = []
    done: set[tuple[str, int]] = set()
    deadline = time.monotonic() + timeout
    try:
        while len(done) < len(wanted):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: read {len(values)} records in {timeout:.0f} s, "
                                   f"partitions {sorted(set(wanted) - done)} unfinished")
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            tp = (msg.topic(), msg.partition())
            if msg.error() is not None:
                if msg.error().code() == KafkaError._PARTITION_EOF and msg.offset() >= wanted[tp]:
                    done.add(tp)
                continue
            if msg.offset() < wanted[tp] and msg.value() is not None:
                values.append(json.loads(msg.value()))
            if msg.offset() + 1 >= wanted[tp]:
                done.add(tp)
    finally:
        consumer.close()
    return values


def delete_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    admin.delete_topics([topic])[topic].result(timeout=30)


def make_orders(count: int, *, customers: int = 500, seed: int = 7,
                start_ms: int = 1_767_225_600_000) -> list[dict[str, Any]]:
    """Deterministic order events; amounts are multiples of 0.25 so float sums are exact."""
    return list(itertools.islice(iter_orders(customers=customers, seed=seed,
                                             start_ms=start_ms), count))


def iter_orders(*, customers: int = 500, seed: int = 7,
                start_ms: int = 1_767_225_600_000) -> Iterator[dict[str, Any]]:
    """`make_orders`' events one at a time, without end: a live producer makes each when it
    sends it, instead of millions up front (seconds of CPU and a gigabyte per producer)."""
    rng = random.Random(seed)
    for i in itertools.count():
        yield {
            "order_id": f"o-{seed}-{i}",
            "customer_id": f"c-{rng.randrange(customers):04d}",
            "amount": rng.randrange(1, 400) * 0.25,
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime((start_ms + i * 1000) / 1000)),
        }


def produce(bootstrap: str, topic: str, events: Iterable[Mapping[str, Any]],
            key: Callable[[Mapping[str, Any]], str] | None = None, *,
            age_seconds: float = 0.0,
            encode: Callable[[Mapping[str, Any]], bytes] | None = None) -> None:
    """Produce events keyed by `key` (default: customer_id), as JSON unless `encode` says
    otherwise, and wait for every ack.

    `age_seconds` > 0 stamps every record that long before now (producer-set CreateTime):
    history written long ago, which a view's staleness gate waits for."""
    stamp = int((time.time() - age_seconds) * 1000) if age_seconds > 0 else 0
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                         "batch.num.messages": 10000, "compression.type": "lz4",
                         "enable.idempotence": True, **QUIET})
    failures: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            failures.append(str(err))

    keyfn = key or (lambda e: str(e["customer_id"]))
    value = encode or (lambda e: json.dumps(e).encode())
    for event in events:
        while True:
            try:
                producer.produce(topic, key=keyfn(event).encode(), value=value(event),
                                 on_delivery=on_delivery, timestamp=stamp)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    remaining = producer.flush(60)
    if remaining or failures:
        raise RuntimeError(f"{remaining} events unacknowledged, {len(failures)} failed: {failures[:3]}")


def topic_end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """High watermark per partition (the exclusive end of the log), via the operator's adapter."""
    return {p: end for (_t, p), end in fetch_end_offsets(bootstrap, [topic]).items()}


def ledger_end_offsets(dsn: str, revision: str, topic: str, *, schema: str = "public"
                       ) -> dict[int, int]:
    """End offsets committed in the index for `revision` (newest ledger row), via the adapter."""
    with psycopg.connect(dsn) as conn:
        position = ledger_positions(conn, schema, [revision], ledger=LEDGER).get(revision)
    if position is None:
        return {}
    return {p: o for (t, p), o in position.end_offsets.items() if t == topic}


def raw_consume_rate(bootstrap: str, topic: str, expected: int) -> float:
    """Events/s of a bare confluent-kafka consumer reading the topic from offset 0."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"dv-raw-{time.time_ns()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "fetch.max.bytes": 52428800, **QUIET})
    consumer.subscribe([topic])
    seen = 0
    started: float | None = None
    deadline = time.monotonic() + 300
    try:
        while seen < expected:
            if time.monotonic() > deadline:
                raise TimeoutError(f"raw consumer read {seen}/{expected} events in 300s")
            batch = consumer.consume(num_messages=10000, timeout=1.0)
            if batch and started is None:
                started = time.monotonic()
            seen += sum(1 for m in batch if m.error() is None)
        assert started is not None
        return seen / max(time.monotonic() - started, 1e-9)
    finally:
        consumer.close()


def sink_secret(name: str, pg: dict[str, Any]) -> dict[str, Any]:
    """A Secret with the sink's connection (keys host, port, database, user, password)."""
    return {
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        # Labelled for views: the operator's default tenancy policy uses no other Secret.
        "metadata": {"name": name, "labels": {VIEW_SECRET_LABEL: "true"}},
        "stringData": {"host": str(pg["host"]), "port": str(pg["port"]),
                       "database": str(pg["database"]), "user": str(pg["user"]),
                       "password": str(pg["password"])},
    }


def spark_application(*, name: str, namespace: str, revision: str, view: str,
                      bootstrap: str, topics: list[str], sql: str, table: str,
                      primary_key: list[str], secret: str, checkpoint: str,
                      image_app_root: str, available_now: bool = False,
                      max_offsets_per_trigger: int | None = None,
                      restart_retries: int = 0, image: str | None = None,
                      core_request: str | None = None,
                      service_account: str | None = None) -> dict[str, Any]:
    """A SparkApplication that runs the project's replay job, credentials via secretKeyRef;
    on the real node, with a `core_request` and the job `service_account` for both pods."""
    job_config = {
        "view": view, "revision": revision,
        "source": {"bootstrapServers": bootstrap, "topics": topics, "format": "json",
                   "schema": ORDER_SCHEMA, "maxOffsetsPerTrigger": max_offsets_per_trigger,
                   "kafkaOptions": {}},
        "transform": {"sql": sql},
        "sink": {"table": table, "schema": "public", "primaryKey": primary_key,
                 "ledgerTable": LEDGER},
        "checkpointLocation": checkpoint,
        "trigger": {"availableNow": True} if available_now else {"processingTimeSeconds": 1},
    }
    pods = {**({"coreRequest": core_request} if core_request else {}),
            **({"serviceAccount": service_account} if service_account else {})}
    env = [{"name": var, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}
           for var, key in (("PGHOST", "host"), ("PGPORT", "port"), ("PGDATABASE", "database"),
                            ("PGUSER", "user"), ("PGPASSWORD", "password"))]
    return {
        "apiVersion": "sparkoperator.k8s.io/v1beta2",
        "kind": "SparkApplication",
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {"derivedviews.io/revision": revision}},
        "spec": {
            "type": "Python", "mode": "cluster", "pythonVersion": "3", "sparkVersion": "4.0.0",
            **({"image": image} if image else {}),
            "mainApplicationFile": f"local://{image_app_root}/spark_templates/derived_view_job.py",
            "arguments": ["--config-json", json.dumps(job_config)],
            # the executor's cores, as the operator renders it (derived_views.core.job.stages)
            "sparkConf": {"spark.sql.shuffle.partitions": "2"},
            "restartPolicy": ({"type": "OnFailure", "onFailureRetries": restart_retries,
                               "onFailureRetryInterval": 2} if restart_retries
                              else {"type": "Never"}),
            "driver": {"cores": 1, "memory": "1g", "env": env, **pods},
            "executor": {"instances": 1, "cores": 2, "memory": "1g", "env": env, **pods},
        },
    }


def checkpoint_secret(name: str, s3: dict[str, Any]) -> dict[str, Any]:
    """The Secret the operator's DV_CHECKPOINT_SECRET names: S3 credentials for s3a:// checkpoints
    (keys AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY), from stack.json's `s3` block."""
    return {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "type": "Opaque",
        "stringData": {"AWS_ACCESS_KEY_ID": str(s3["access_key"]),
                       "AWS_SECRET_ACCESS_KEY": str(s3["secret_key"])},
    }


def ensure_namespace_and_sink_secret(core: Any, namespace: str, secret: str,
                                     pg: dict[str, Any]) -> None:
    """Create the namespace if needed and (re)create the sink Secret with current credentials."""
    _ensure_namespace(core, namespace)
    _replace_secret(core, namespace, sink_secret(secret, pg))


def ensure_registry_secret(core: Any, namespace: str, url: str,
                           secret: str = "registry") -> None:
    """Create the namespace if needed and (re)create the schema registry's Secret (key `url`,
    the Confluent-compatible API), labelled for views."""
    _ensure_namespace(core, namespace)
    _replace_secret(core, namespace, {
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": secret, "labels": {VIEW_SECRET_LABEL: "true"}},
        "stringData": {"url": url}})


def ensure_checkpoint_secret(core: Any, namespace: str, s3: dict[str, Any],
                             secret: str = CHECKPOINT_SECRET) -> None:
    """Create the namespace if needed and (re)create the checkpoint Secret (S3 credentials)."""
    _ensure_namespace(core, namespace)
    _replace_secret(core, namespace, checkpoint_secret(secret, s3))


def _ensure_namespace(core: Any, namespace: str) -> None:
    from kubernetes.client.exceptions import ApiException

    try:
        core.create_namespace({"metadata": {"name": namespace}})
    except ApiException as exc:
        if exc.status != 409:
            raise


def _replace_secret(core: Any, namespace: str, body: dict[str, Any]) -> None:
    from kubernetes.client.exceptions import ApiException

    try:
        core.delete_namespaced_secret(body["metadata"]["name"], namespace)
    except ApiException as exc:
        if exc.status != 404:
            raise
    core.create_namespaced_secret(namespace, body)


def lag(ends: dict[int, int], committed: dict[int, int]) -> int:
    return sum(max(end - committed.get(p, 0), 0) for p, end in ends.items())


def kafka_tenancy_env(bootstrap: str, policy: str | None = None) -> dict[str, str]:
    """`DV_TENANCY_POLICY` for an operator on the local stack, where it must differ from the
    product's default: that lists loopback Kafka clusters only, and beside the real node the
    stack's Kafka listens on the node address. The stack's Kafka is then listed, as a
    platform lists its clusters (`tenancy.kafka.clusters`); `policy` is kept otherwise."""
    host = bootstrap.rsplit(":", 1)[0]
    if host in ("127.0.0.1", "localhost"):
        return {"DV_TENANCY_POLICY": policy} if policy else {}
    rules = json.loads(policy or "{}")
    rules.setdefault("kafka", {}).setdefault("clusters", [  # the default's, and the stack's
        {"namespaces": ["*"], "bootstrapServers": ["127.0.0.1:*", "localhost:*"]},
        {"namespaces": ["*"], "bootstrapServers": [f"{host}:*"]}])
    # the stack's schema registry listens on the same address
    rules.setdefault("schemaRegistries", ["127.0.0.1:*", "localhost:*", f"{host}:*"])
    return {"DV_TENANCY_POLICY": json.dumps(rules)}


SPARK_JOB_ACCOUNT = "derived-views-spark"
"""The chart's job ServiceAccount (templates/spark-rbac.yaml), for tests without the chart."""


def spark_job_account(kube_api_client: Any, namespace: str) -> str:
    """What the chart's spark-rbac.yaml creates in a job namespace: a driver creates its
    executors' pods, their Service and ConfigMap with it. The stand-in checks none of it; a
    real driver without it is refused its own pod."""
    from kubernetes import client

    client.CoreV1Api(kube_api_client).create_namespaced_service_account(
        namespace, {"metadata": {"name": SPARK_JOB_ACCOUNT}})
    rbac = client.RbacAuthorizationV1Api(kube_api_client)
    rbac.create_namespaced_role(namespace, {
        "metadata": {"name": SPARK_JOB_ACCOUNT},
        "rules": [{"apiGroups": [""],
                   "resources": ["pods", "services", "configmaps", "persistentvolumeclaims"],
                   "verbs": ["get", "list", "watch", "create", "update", "patch", "delete",
                             "deletecollection"]}]})
    rbac.create_namespaced_role_binding(namespace, {
        "metadata": {"name": SPARK_JOB_ACCOUNT},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                    "name": SPARK_JOB_ACCOUNT},
        "subjects": [{"kind": "ServiceAccount", "name": SPARK_JOB_ACCOUNT,
                      "namespace": namespace}]})
    return SPARK_JOB_ACCOUNT


def jobs_on_real_node(kube_api_client: Any, namespace: str, info: dict[str, Any]
                      ) -> dict[str, str]:
    """Run a benchmark namespace's jobs on the stack's real node (a stack started with
    DV_NODE=1): the namespace labelled for the real Spark Operator, which the stand-in then
    leaves alone (docs/real-node.md), the Spark jobs' ServiceAccount, and the operator
    settings that render them as pods of the project's Spark image (returned)."""
    from kubernetes import client

    from dvstack.node.support import NAMESPACE_LABEL

    if not info.get("node"):
        raise SystemExit("the stack runs without the real node: start it with DV_NODE=1")
    client.CoreV1Api(kube_api_client).patch_namespace(
        namespace, {"metadata": {"labels": {NAMESPACE_LABEL: "true"}}})
    return {"DV_SPARK_IMAGE": info["images"]["spark"],
            "DV_SPARK_TEMPLATE": info["spark_template"],
            "DV_SPARK_SERVICE_ACCOUNT": spark_job_account(kube_api_client, namespace)}
