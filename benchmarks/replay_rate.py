"""Replay rate of the derived-view job versus a bare Kafka consumer, in one run.

Produces N order events into a fresh 3-partition topic, then measures on the
same topic and the same machine:
- the raw rate: a bare confluent-kafka consumer reading from offset 0;
- the replay rate: the project's Spark job (through a SparkApplication and
  the local executor) from creation until the ledger equals the end offsets,
  both including Spark's start-up and in steady state (first to last batch
  commit, from the ledger's commit times).
Reports the ratios; nothing here asserts a time.

Usage: python benchmarks/replay_rate.py [EVENTS]   (the stack must be up)
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
import uuid

import psycopg
from kubernetes import client, config

from dvstack import replay
from dvstack.settings import load
from dvstack.waiting import wait_for


def main() -> None:
    events_n = int(sys.argv[1]) if len(sys.argv) > 1 else 300_000
    info = json.loads(load().stack_file.read_text())
    api = config.new_client_from_config(config_file=info["kubeconfig"])
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    run = uuid.uuid4().hex[:8]
    topic, revision, ns = f"bench-{run}", f"bench{run}", "bench"
    replay.create_topic(info["kafka_bootstrap"], topic, 3)
    replay.produce(info["kafka_bootstrap"], topic, replay.make_orders(events_n))
    ends = replay.topic_end_offsets(info["kafka_bootstrap"], topic)

    raw = replay.raw_consume_rate(info["kafka_bootstrap"], topic, events_n)

    replay.ensure_namespace_and_sink_secret(core, ns, "views-db", info["pg"])
    with tempfile.TemporaryDirectory() as checkpoint:
        app = replay.spark_application(
            name=f"bench-{run}", namespace=ns, revision=revision, view=f"{ns}/bench",
            bootstrap=info["kafka_bootstrap"], topics=[topic], sql=replay.ORDERS_BY_CUSTOMER_SQL,
            table=f"bench__{revision}", primary_key=["customer_id"], secret="views-db",
            checkpoint=checkpoint, image_app_root=info["image_app_root"],
            max_offsets_per_trigger=100_000)
        t0 = time.monotonic()
        custom.create_namespaced_custom_object("sparkoperator.k8s.io", "v1beta2", ns,
                                               "sparkapplications", app)
        wait_for(lambda: replay.ledger_end_offsets(info["pg_dsn"], revision, topic) == ends,
                 timeout=1800, interval=0.5, what="the replay to catch up")
        total_s = time.monotonic() - t0
        custom.delete_namespaced_custom_object("sparkoperator.k8s.io", "v1beta2", ns,
                                               "sparkapplications", f"bench-{run}")
    with psycopg.connect(info["pg_dsn"]) as conn:
        rows = conn.execute(
            "SELECT batch_id, end_offsets, committed_at FROM dv_ledger WHERE revision = %s "
            "ORDER BY batch_id", (revision,)).fetchall()
        conn.execute(f'DROP TABLE IF EXISTS "bench__{revision}"')
        conn.execute("DELETE FROM dv_ledger WHERE revision = %s", (revision,))
    replay.delete_topic(info["kafka_bootstrap"], topic)
    first_total = sum(rows[0][1][topic].values())
    steady_events = events_n - first_total
    steady_s = (rows[-1][2] - rows[0][2]).total_seconds()
    replay_total = events_n / total_s
    replay_steady = steady_events / steady_s if steady_s > 0 else float("nan")
    result = {
        "events": events_n, "batches": len(rows),
        "raw_consume_events_per_s": round(raw),
        "replay_events_per_s_including_startup": round(replay_total),
        "replay_events_per_s_steady": round(replay_steady),
        "ratio_including_startup": round(replay_total / raw, 4),
        "ratio_steady": round(replay_steady / raw, 4),
        "seconds_create_to_caught_up": round(total_s, 1),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
