"""Bad records end to end: `fail` stops the view naming the record, `skip` gets it past them.

A view serves a topic of good orders; then one record of each bad kind arrives: not JSON, a
field of the wrong type, a NUL character in text, and an order without a customer (a NULL
primary key after the transform), and a producer keeps writing orders. Under the default
policy the serving job stops and the view is Degraded with the first bad record's
topic/partition@offset; switching to `skip` restarts the job from its checkpoint (no
replay), and the view is Ready again only once the resumed job has committed and its index
is within the gate (not when the job starts: readers would still see an index tens of
seconds old). The alias equals the test's own recomputation of the good orders, and the BAD
column of `kubectl get dv`, the status and `dv status` count the four. What people see is
written to `.stack/results/bad_records.json`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import psycopg
from confluent_kafka import Producer
from kubernetes import client

from dvstack.testing import replay
from dvstack.testing.traffic import LiveProducer
from dvstack.testing.waiting import wait_for
from support.e2e.operator import GATE_SECONDS
from support.e2e.views import G, P, V, ViewHandle, wait_alias_equals

COLUMNS = ["orders", "revenue"]


def bad_values(topic_seed: str) -> list[str]:
    return ["not json {",
            json.dumps({"order_id": f"{topic_seed}-b1", "customer_id": "c-1", "amount": "lots"}),
            json.dumps({"order_id": f"{topic_seed}-b2", "customer_id": "c\u0000x",
                        "amount": 1.0}),
            json.dumps({"order_id": f"{topic_seed}-b3", "customer_id": None, "amount": 9.0})]


def shell(stack: Any, *args: str) -> str:
    env = {**os.environ, "KUBECONFIG": stack.kubeconfig}
    return subprocess.run(list(args), env=env, capture_output=True, text=True, check=True,
                          timeout=60).stdout


def test_skip_gets_a_view_past_bad_records_and_counts_them(
        stack: Any, kube_api_client: Any, namespace: str, operator_process: Path) -> None:
    core, custom = client.CoreV1Api(kube_api_client), client.CustomObjectsApi(kube_api_client)
    topic, table = f"bad-{uuid.uuid4().hex[:8]}", f"bad_{uuid.uuid4().hex[:8]}"
    replay.create_topic(stack.kafka_bootstrap, topic, 1)
    good = replay.make_orders(2_000, seed=11)
    replay.produce(stack.kafka_bootstrap, topic, good[:1_000])
    replay.ensure_namespace_and_sink_secret(core, namespace, "views-db", stack.pg)
    custom.create_namespaced_custom_object(G, V, namespace, P, {
        "apiVersion": f"{G}/{V}", "kind": "DerivedView",
        "metadata": {"name": "bad", "namespace": namespace},
        "spec": {"source": {"kafka": {"bootstrapServers": stack.kafka_bootstrap},
                            "topics": [topic], "schema": replay.ORDER_SCHEMA},
                 "transform": {"sql": replay.ORDERS_BY_CUSTOMER_SQL},
                 "sink": {"postgres": {"secretRef": {"name": "views-db"}, "table": table},
                          "primaryKey": ["customer_id"]},
                 "cutover": {"stableForSeconds": 2, "maxLagSeconds": GATE_SECONDS},
                 "spark": {"restartPolicy": {"type": "Never"}}}})
    view = ViewHandle(custom, namespace, "bad")
    revision = view.wait_serving_new(None, "the view to serve the good orders")
    producer = Producer({"bootstrap.servers": stack.kafka_bootstrap, "enable.idempotence": True})
    for value in bad_values(topic):
        producer.produce(topic, key=b"bad", value=value.encode())
    assert producer.flush(30) == 0
    # one partition: the bad records are at 1,000 to 1,003; a batch's range of them is split
    # into tasks (minPartitions), and the one whose task fails first is named
    bad_offsets = range(1_000, 1_000 + len(bad_values(topic)))
    replay.produce(stack.kafka_bootstrap, topic, good[1_000:])
    seen: dict[str, Any] = {}
    live = LiveProducer(stack.kafka_bootstrap, topic, rate=20).start()
    try:
        # fail (the default): Degraded, naming the record and the way past it
        wait_for(lambda: view.condition("Degraded").get("status") == "True", timeout=900,
                 interval=2, what="the first bad record to stop the job (Degraded)")
        degraded = view.condition("Degraded")
        named = re.search(rf"refused record {re.escape(topic)}/0@(\d+): ", degraded["message"])
        assert named is not None and int(named.group(1)) in bad_offsets, degraded
        assert "skip or deadLetter" in degraded["message"]
        seen["fail"] = {"degraded": degraded,
                        "kubectl_get_dv": shell(stack, "kubectl", "get", "dv", "-n", namespace),
                        "dv_status": shell(stack, sys.executable, "-m", "derived_views.cli",
                                           "status", "bad", "-n", namespace)}

        # skip: the same revision restarts from its checkpoint and goes past them; Ready
        # comes back once the resumed job has committed and is within the gate again
        assert view.condition("Ready").get("status") == "False"
        # the stopped index grows older than the gate (as a stop of more than the gate does)
        wait_for(lambda: ((view.status().get("active") or {}).get("lag") or {}).get(
            "seconds", 0) > GATE_SECONDS, timeout=300, interval=1,
            what="the stopped index to fall behind the gate", on_timeout=view.brief)
        with psycopg.connect(stack.pg_dsn) as conn:
            patched_at = conn.execute("SELECT clock_timestamp()").fetchone()[0]
        view.patch({"spec": {"source": {"badRecords": {"policy": "skip"}}}})
        reasons: list[str] = []

        def ready_again() -> bool:
            reasons.append(str(view.condition("Ready").get("reason")))
            return view.ready() and view.active() == revision

        wait_for(ready_again, timeout=900, interval=0.25,
                 what="the view to serve with the bad records skipped")
        assert "Stale" in reasons, sorted(set(reasons))  # set going, not yet fresh
        ready = view.status()
        with psycopg.connect(stack.pg_dsn) as conn:
            committed = conn.execute("SELECT max(committed_at) FROM dv_ledger WHERE "
                                     "revision = %s", (revision,)).fetchone()[0]
        assert committed > patched_at, (committed, patched_at)  # the resumed job committed
        staleness = ready["active"]["lag"].get("seconds")
        assert staleness is not None and staleness <= GATE_SECONDS, ready["active"]
        seen["ready_again"] = {"after_patch_s": round(
            (committed - patched_at).total_seconds(), 1), "staleness_s": staleness}
    finally:
        events = live.stop()
    assert not live.failures, live.failures
    wait_alias_equals(stack.pg_dsn, table, good + events, COLUMNS,
                      "the alias to equal the good orders (bad ones left out)")
    wait_for(lambda: view.status().get("badRecords") == 4, timeout=120, interval=1,
             what="the status to count the four bad records")
    assert view.record(revision).get("badRecords") == 4
    assert view.status()["revision"] == revision  # a policy change is no new revision
    listing = shell(stack, "kubectl", "get", "dv", "-n", namespace)
    header, row = listing.splitlines()[:2]
    assert "BAD" in header.split()
    # kubectl aligns columns: read BAD under its header (an empty CANDIDATE shifts split())
    start = header.index("BAD")
    assert row[start:header.index("READY")].strip() == "4", listing
    detail = shell(stack, sys.executable, "-m", "derived_views.cli", "status", "bad",
                   "-n", namespace)
    assert "skip; 4 left out" in detail, detail
    seen["skip"] = {"kubectl_get_dv": listing, "dv_status": detail,
                    "live_events": len(events), "live_rate": round(live.achieved_rate(), 1)}
    results = Path(stack.state_dir) / "results"
    results.mkdir(parents=True, exist_ok=True)
    (results / "bad_records.json").write_text(json.dumps(seen, indent=2, default=str))
