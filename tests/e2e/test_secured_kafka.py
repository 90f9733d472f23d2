"""A view over a SASL/SCRAM-secured listener, end to end.

The view names its own Secret (SCRAM-SHA-512 over SASL_PLAINTEXT); the Spark
job reads with it (credentials, mechanism and protocol all come from the Secret)
and so does the operator's lag reader: without the latter, lag stays unknown
and no revision is ever promoted.  A producer keeps writing over the same
listener while the replay runs; once it stops, the alias must equal the test's
own recomputation of every record it produced.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
from confluent_kafka import Producer
from kubernetes import client

from dvstack.testing import replay
from dvstack.testing.waiting import wait_for
from support.e2e.operator import GATE_SECONDS
from support.e2e.views import G, P, V, ViewHandle, alias_rows, expected_rows

SQL = ("SELECT customer_id, count(*) AS orders, sum(amount) AS revenue "
       "FROM events GROUP BY customer_id")
COLUMNS = ["orders", "revenue"]


def sasl_producer(sasl: dict[str, str]) -> Producer:
    return Producer({"bootstrap.servers": sasl["bootstrap"],
                     "security.protocol": sasl["security_protocol"],
                     "sasl.mechanism": sasl["mechanism"], "sasl.username": sasl["username"],
                     "sasl.password": sasl["password"], "linger.ms": 20,
                     "enable.idempotence": True, "log_level": 3})


def produce(producer: Producer, topic: str, events: list[dict[str, Any]],
            age_seconds: float = 0.0) -> None:
    """`age_seconds` > 0 stamps the records that long ago: history older than the gate."""
    failures: list[str] = []
    stamp = {"timestamp": int((time.time() - age_seconds) * 1000)} if age_seconds else {}
    for event in events:
        producer.produce(topic, key=event["customer_id"].encode(), value=json.dumps(event).encode(),
                         on_delivery=lambda err, _msg: failures.append(str(err)) if err else None,
                         **stamp)
        producer.poll(0)
    assert producer.flush(60) == 0 and not failures, failures[:3]


def committed_batches(dsn: str, revision: str | None) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM dv_ledger WHERE revision = %s",
                           (revision,)).fetchone()
    return int(row[0]) if row else 0


class BackgroundProducer:
    """Writes batches of orders over the SASL listener, at a steady pace, until told to stop."""

    def __init__(self, sasl: dict[str, str], topic: str) -> None:
        self.producer, self.topic = sasl_producer(sasl), topic
        self.events: list[dict[str, Any]] = []
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        seed = 100
        try:
            while not self._stop.is_set():
                batch = replay.make_orders(250, seed=seed)
                produce(self.producer, self.topic, batch)
                self.events += batch
                seed += 1
                self._stop.wait(0.5)  # pacing (about 500 events/s), not synchronisation
        except BaseException as exc:  # reported by stop()
            self.error = exc

    def start(self) -> BackgroundProducer:
        self._thread.start()
        return self

    def stop(self) -> list[dict[str, Any]]:
        self._stop.set()
        self._thread.join(timeout=120)
        assert self.error is None, f"background producer failed: {self.error!r}"
        return self.events


def test_view_over_sasl_scram_listener_reaches_ready_and_matches(
        stack: Any, kube_api_client: Any, namespace: str, operator_process: Path) -> None:
    core, custom = client.CoreV1Api(kube_api_client), client.CustomObjectsApi(kube_api_client)
    sasl = stack.kafka_sasl
    topic, table = f"sec-{uuid.uuid4().hex[:8]}", f"sec_{uuid.uuid4().hex[:8]}"
    replay.create_topic(stack.kafka_bootstrap, topic, 3)
    events = replay.make_orders(20_000, seed=11)
    # older than the gate: the first revision builds until it holds them all
    produce(sasl_producer(sasl), topic, events, age_seconds=3600)
    replay.ensure_namespace_and_sink_secret(core, namespace, "views-db", stack.pg)
    core.create_namespaced_secret(namespace, {
        "metadata": {"name": "kafka-scram", "labels": {"derivedviews.io/view-secret": "true"}},
        "stringData": {"username": sasl["username"], "password": sasl["password"],
                       "mechanism": sasl["mechanism"],
                       "securityProtocol": sasl["security_protocol"]}})
    custom.create_namespaced_custom_object(G, V, namespace, P, {
        "apiVersion": f"{G}/{V}", "kind": "DerivedView",
        "metadata": {"name": "secured", "namespace": namespace},
        "spec": {"source": {"kafka": {"bootstrapServers": sasl["bootstrap"],
                                      "secretRef": {"name": "kafka-scram"}},
                            "topics": [topic], "schema": replay.ORDER_SCHEMA},
                 "transform": {"sql": SQL},
                 "sink": {"postgres": {"secretRef": {"name": "views-db"}, "table": table},
                          "primaryKey": ["customer_id"]},
                 "cutover": {"stableForSeconds": 2, "maxLagSeconds": GATE_SECONDS},
                 "spark": {"sparkConf": {"spark.sql.shuffle.partitions": "4"}},
                 "deletionPolicy": "Delete"}})
    created = time.monotonic()
    view = ViewHandle(custom, namespace, "secured")
    writer = BackgroundProducer(sasl, topic).start()
    try:
        # The job has committed replayed batches (over SASL) and the operator knows the lag
        # (its reader connects with the Secret too); the producer keeps writing after that.
        # The revision may already serve: its first batch can hold the whole backlog, and a
        # poll can miss the passes between that commit and the switch (CI, stop 56).
        def replaying_with_known_lag() -> bool:
            status = view.status()
            return (status.get("lagMessages") is not None
                    and committed_batches(stack.pg_dsn, status.get("revision")) > 0)

        wait_for(replaying_with_known_lag, timeout=300, interval=0.5,
                 what="the first revision to replay over SASL with its lag known")
        written = len(writer.events)
        wait_for(lambda: len(writer.events) >= written + 1000, timeout=120, interval=0.2,
                 what="the producer to write more batches during the replay")
    finally:
        during = writer.stop()
    events += during

    revision = view.wait_serving_new(None, "the view to replay over SASL and serve", timeout=300)
    ready_after = time.monotonic() - created
    wait_for(lambda: alias_rows(stack.pg_dsn, table, COLUMNS) == expected_rows(events, COLUMNS),
             timeout=120, interval=1,
             what="the alias to equal the recomputation of every produced record")

    apps = custom.list_namespaced_custom_object(
        "sparkoperator.k8s.io", "v1beta2", namespace, "sparkapplications")["items"]
    app = next(a for a in apps if a["metadata"]["labels"]["derivedviews.io/revision"] == revision)
    # the Kafka Secret is mounted as files on driver and executors (never in their env), and
    # the job is told which Secret plays which role
    for role in ("driver", "executor"):
        mounted = {m["name"] for m in app["spec"][role].get("secrets") or []}
        assert "kafka-scram" in mounted, app["spec"][role]
        assert not any("secretKeyRef" in json.dumps(e) for e in app["spec"][role].get("env") or [])
    assert json.loads(app["spec"]["arguments"][1])["secrets"]["kafka"] == "kafka-scram"
    assert sasl["password"] not in json.dumps(app)  # only references, never the value

    results = Path(stack.state_dir) / "results"
    results.mkdir(exist_ok=True)
    (results / "secured_kafka.json").write_text(json.dumps({
        "events_before_view": 20_000, "events_during_replay": len(during),
        "seconds_create_to_ready": round(ready_after, 1)}, indent=2))

    custom.delete_namespaced_custom_object(G, V, namespace, P, "secured")
    wait_for(view.gone, timeout=120, interval=1, what="the view to be deleted")
    replay.delete_topic(stack.kafka_bootstrap, topic)
