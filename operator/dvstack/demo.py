"""`make demo`: replay a Kafka topic into PostgreSQL on the local stack, with progress.

Brings the stack up, produces order events, creates a SparkApplication that
runs the project's replay job, prints the lag per partition until the index
has caught up with the log, then shows the top customers from the index.
The stack is left running (`make stack-down` stops it).
"""

from __future__ import annotations

import os
import shutil
import sys
import time
import uuid

import psycopg
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from dvstack import cli, replay
from dvstack.settings import load

NAMESPACE = "demo"
APP = "orders-by-customer-demo"


def _bar(done: int, total: int, width: int = 30) -> str:
    filled = int(width * done / total) if total else width
    return "#" * filled + "." * (width - filled)


def main() -> None:
    events_n = int(os.environ.get("DEMO_EVENTS", "100000"))
    settings = load()
    info = cli.up(settings)
    api = config.new_client_from_config(config_file=info["kubeconfig"])
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)

    run = uuid.uuid4().hex[:8]
    topic, revision = f"demo-orders-{run}", f"demo{run}"
    table = f"orders_by_customer__{revision}"
    print(f"\n1. topic {topic}: 3 partitions, producing {events_n:,} JSON order events...")
    t0 = time.monotonic()
    replay.create_topic(info["kafka_bootstrap"], topic, 3)
    replay.produce(info["kafka_bootstrap"], topic, replay.make_orders(events_n))
    ends = replay.topic_end_offsets(info["kafka_bootstrap"], topic)
    print(f"   produced in {time.monotonic() - t0:.1f}s; end offsets {ends}")

    replay.ensure_namespace_and_sink_secret(core, NAMESPACE, "views-db", info["pg"])
    try:
        custom.delete_namespaced_custom_object("sparkoperator.k8s.io", "v1beta2", NAMESPACE,
                                               "sparkapplications", APP)
    except ApiException as exc:
        if exc.status != 404:
            raise
    checkpoint = settings.state_dir / "demo-checkpoints" / revision
    app = replay.spark_application(
        name=APP, namespace=NAMESPACE, revision=revision, view=f"{NAMESPACE}/orders-by-customer",
        bootstrap=info["kafka_bootstrap"], topics=[topic], sql=replay.ORDERS_BY_CUSTOMER_SQL,
        table=table, primary_key=["customer_id"], secret="views-db", checkpoint=str(checkpoint),
        image_app_root=info["image_app_root"], max_offsets_per_trigger=25_000)
    print(f"\n2. SparkApplication {NAMESPACE}/{APP} (revision {revision}) -> table {table}")
    print(f"   transform: {replay.ORDERS_BY_CUSTOMER_SQL}")
    started = time.monotonic()
    deadline = started + 900
    custom.create_namespaced_custom_object("sparkoperator.k8s.io", "v1beta2", NAMESPACE,
                                           "sparkapplications", app)
    total = sum(ends.values())
    last_line = ""
    while True:
        status = custom.get_namespaced_custom_object(
            "sparkoperator.k8s.io", "v1beta2", NAMESPACE, "sparkapplications", APP).get("status") or {}
        state = (status.get("applicationState") or {}).get("state", "PENDING")
        if state in ("FAILED", "SUBMISSION_FAILED"):
            sys.exit(f"the job failed: {status['applicationState'].get('errorMessage')}\n"
                     f"logs: {settings.logs_dir / 'spark'}")
        committed = replay.ledger_end_offsets(info["pg_dsn"], revision, topic)
        lag = replay.lag(ends, committed)
        parts = " ".join(f"p{p}:{ends[p] - committed.get(p, 0):>6}" for p in sorted(ends))
        line = f"{state:9} [{_bar(total - lag, total)}] lag {lag:>7,}  ({parts})"
        if line != last_line:
            print(f"   [{time.monotonic() - started:5.1f}s] {line}", flush=True)
            last_line = line
        if committed == ends:
            break
        if time.monotonic() > deadline:
            sys.exit("the replay did not catch up within 15 minutes; see the logs in "
                     f"{settings.logs_dir}")
        time.sleep(1)
    elapsed = time.monotonic() - started
    print(f"\n3. caught up: {total:,} events in {elapsed:.1f}s "
          f"({total / elapsed:,.0f} events/s including Spark start-up)")
    with psycopg.connect(info["pg_dsn"]) as conn:
        rows = conn.execute(f'SELECT customer_id, orders, revenue FROM "{table}" '
                            "ORDER BY revenue DESC, customer_id LIMIT 5").fetchall()
        n = conn.execute(f'SELECT count(*), sum(orders) FROM "{table}"').fetchone()
    assert n is not None
    print(f"   {table}: {n[0]} customers, {n[1]:,} orders; top 5 by revenue:")
    print(f"   {'customer_id':12} {'orders':>7} {'revenue':>10}")
    for cid, orders, revenue in rows:
        print(f"   {cid:12} {orders:>7} {revenue:>10.2f}")
    custom.delete_namespaced_custom_object("sparkoperator.k8s.io", "v1beta2", NAMESPACE,
                                           "sparkapplications", APP)
    replay.delete_topic(info["kafka_bootstrap"], topic)
    shutil.rmtree(checkpoint, ignore_errors=True)
    print("\nthe job was stopped; the stack is still up (make stack-down stops it).")


if __name__ == "__main__":
    main()
