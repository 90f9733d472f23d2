"""Replay rate of the derived-view job against two baselines measured in the same run.

For each topic size (default 0.5M, 1M, 2M and 4M order events in a fresh
3-partition topic) and each view shape, on the same topic and machine:
- raw consume: a bare confluent-kafka consumer reading the topic from offset 0;
- COPY ingest: PostgreSQL COPY of the same records, as rows of the mirror
  view's columns (text encoded before the clock starts), into a logged table
  with a primary key, from one client: what the database takes at best;
- replay: the project's Spark job (a SparkApplication run by the local
  executor) from creation until the ledger equals the end offsets, both
  including Spark's start-up and in steady state (events after the first
  batch over the time from the first to the last batch commit in the ledger).
Shapes: `aggregate` (orders per customer, 500 output rows: Spark-bound) and
`mirror` (one output row per order: sink-bound).  The ratios are against
min(raw, COPY); nothing here asserts a time.

The headline figures replay the largest topic with the product's default batch
bound (source.maxOffsetsPerTrigger); the linearity curve replays every size
with a fixed bound of 250,000 records, so each size has several batches and
the sizes differ only in the topic's length.  Where the time goes comes from
the job's own `dvjob timing` lines (executors staging, the merge transaction)
and the ledger's commit times (the rest: Spark's planning, offsets, checkpoint).

Results go to .stack/results/bench_replay.json; benchmarks/report.py turns
them into docs/performance.md.

Usage: python benchmarks/replay_rate.py [--sizes 500000,1000000,...] [--shapes aggregate,mirror]
       (the stack must be up)
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from kubernetes import client, config

from derived_views.api.spec import DEFAULT_MAX_OFFSETS_PER_TRIGGER
from dvstack import replay
from dvstack.settings import KAFKA_VERSION, SPARK_VERSION, load
from dvstack.waiting import wait_for

NAMESPACE = "bench"
SECRET = "views-db"
PARTITIONS = 3
LINEARITY_MAX_OFFSETS = 250_000
TIMING_PREFIX = "dvjob timing "
FULL_JIT = "-XX:TieredStopAtLevel=4"
"""The replay rate is steady-state speed: C2 too, after the stand-in's quick-start C1."""


@dataclass(frozen=True)
class Shape:
    name: str
    description: str
    sql: str
    primary_key: list[str]


SHAPES = {
    "aggregate": Shape("aggregate", "orders per customer: 500 output rows, a GROUP BY kept in "
                       "Spark's state (Spark-bound)", replay.ORDERS_BY_CUSTOMER_SQL,
                       ["customer_id"]),
    "mirror": Shape("mirror", "one output row per order: every event becomes an index row "
                    "(sink-bound)", "SELECT order_id, customer_id, amount, ts FROM events",
                    ["order_id"]),
}


def copy_ingest_rate(dsn: str, orders: list[dict[str, Any]]) -> float:
    """Rows/s of one COPY of the orders (mirror columns) into a logged table with a key."""
    text = "".join(f"{o['order_id']}\t{o['customer_id']}\t{o['amount']!r}\t{o['ts']}\n"
                   for o in orders).encode()
    chunk = 1 << 20
    table = f"bench_copy_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE TABLE "{table}" (order_id text PRIMARY KEY, customer_id text, '
                     "amount double precision, ts timestamp)")
        try:
            started = time.monotonic()
            with conn.transaction(), conn.cursor() as cur, cur.copy(
                    f'COPY "{table}" (order_id, customer_id, amount, ts) FROM STDIN') as copy:
                for at in range(0, len(text), chunk):
                    copy.write(text[at:at + chunk])
            seconds = time.monotonic() - started
        finally:
            conn.execute(f'DROP TABLE IF EXISTS "{table}"')
    return len(orders) / seconds


def batch_timings(logs_dir: Path, app_name: str) -> list[dict[str, Any]]:
    """The job's `dvjob timing` lines (one per batch written), from its driver log."""
    found: list[dict[str, Any]] = []
    for log in sorted((logs_dir / "spark").glob(f"{NAMESPACE}_{app_name}-driver*.log")):
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith(TIMING_PREFIX):
                found.append(json.loads(line[len(TIMING_PREFIX):]))
    return found


def profile(ledger: list[Any], timings: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Mean seconds per steady batch (every batch after the first that staged rows): the
    executors' staging job, the merge transaction, and the rest of the interval between two
    ledger commits (Spark's offsets, planning and checkpoint, the driver's bookkeeping)."""
    commits = {row[0]: row[2] for row in ledger}
    steady = [t for t in timings if t["batch"] > 0 and "stage_seconds" in t
              and t["batch"] - 1 in commits and t["batch"] in commits]
    if not steady:
        return None
    interval = sum((commits[t["batch"]] - commits[t["batch"] - 1]).total_seconds()
                   for t in steady) / len(steady)
    stage = sum(t["stage_seconds"] for t in steady) / len(steady)
    merge = sum(t["transaction_seconds"] for t in steady) / len(steady)
    return {"batches": len(steady), "seconds_per_batch": round(interval, 2),
            "staging_seconds": round(stage, 2), "merge_transaction_seconds": round(merge, 2),
            "other_seconds": round(interval - stage - merge, 2)}


def run_replay(info: dict[str, Any], custom: Any, shape: Shape, topic: str, events_n: int,
               ends: dict[int, int], max_offsets: int) -> dict[str, Any]:
    """One replay of `topic` by the real job; rates from the ledger's commit times."""
    run = uuid.uuid4().hex[:8]
    revision, name = f"bench{run}", f"bench-{run}"
    table = f"bench__{revision}"
    with tempfile.TemporaryDirectory() as checkpoint:
        app = replay.spark_application(
            name=name, namespace=NAMESPACE, revision=revision, view=f"{NAMESPACE}/{shape.name}",
            bootstrap=info["kafka_bootstrap"], topics=[topic], sql=shape.sql, table=table,
            primary_key=shape.primary_key, secret=SECRET, checkpoint=checkpoint,
            image_app_root=info["image_app_root"], max_offsets_per_trigger=max_offsets)
        # steady-state speed: both JIT tiers (the stand-in's drivers default to C1 only)
        app["spec"]["driver"]["javaOptions"] = FULL_JIT
        started = time.monotonic()
        custom.create_namespaced_custom_object("sparkoperator.k8s.io", "v1beta2", NAMESPACE,
                                               "sparkapplications", app)
        try:
            wait_for(lambda: replay.ledger_end_offsets(info["pg_dsn"], revision, topic) == ends,
                     timeout=3600, interval=0.25, what=f"the {shape.name} replay to catch up")
            total_s = time.monotonic() - started
        finally:
            custom.delete_namespaced_custom_object("sparkoperator.k8s.io", "v1beta2", NAMESPACE,
                                                   "sparkapplications", name)
    with psycopg.connect(info["pg_dsn"]) as conn:
        ledger = conn.execute(
            "SELECT batch_id, end_offsets, committed_at FROM dv_ledger WHERE revision = %s "
            "ORDER BY batch_id", (revision,)).fetchall()
        found = conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()
        conn.execute(f'DROP TABLE IF EXISTS "{table}"')
        conn.execute("DELETE FROM dv_ledger WHERE revision = %s", (revision,))
    first_events = sum(ledger[0][1][topic].values())
    steady_s = (ledger[-1][2] - ledger[0][2]).total_seconds()
    return {
        "events": events_n, "batches": len(ledger), "output_rows": found[0] if found else None,
        "max_offsets_per_trigger": max_offsets,
        "replay_events_per_s_steady": (round((events_n - first_events) / steady_s)
                                       if len(ledger) > 1 and steady_s > 0 else None),
        "replay_events_per_s_including_startup": round(events_n / total_s),
        "seconds_create_to_caught_up": round(total_s, 1),
        "profile": profile(ledger, batch_timings(Path(info["logs_dir"]), name)),
    }


def ratios(point: dict[str, Any]) -> dict[str, Any]:
    raw, copy = point["raw_consume_events_per_s"], point["copy_ingest_rows_per_s"]
    steady = point["replay_events_per_s_steady"]
    if steady is None:
        return {"ratio_vs_raw": None, "ratio_vs_copy": None, "ratio_vs_min": None}
    return {"ratio_vs_raw": round(steady / raw, 3), "ratio_vs_copy": round(steady / copy, 3),
            "ratio_vs_min": round(steady / min(raw, copy), 3)}


def machine(info: dict[str, Any]) -> dict[str, Any]:
    with psycopg.connect(info["pg_dsn"]) as conn:
        row = conn.execute("SHOW server_version").fetchone()
    pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return {"cpus": os.cpu_count(), "memory_gib": round(pages / 2**30, 1),
            "python": platform.python_version(), "spark": SPARK_VERSION, "kafka": KAFKA_VERSION,
            "postgres": row[0] if row else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="500000,1000000,2000000,4000000")
    parser.add_argument("--shapes", default="aggregate,mirror")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    shapes = [SHAPES[s] for s in args.shapes.split(",")]
    settings = load()
    info = json.loads(settings.stack_file.read_text())
    api = config.new_client_from_config(config_file=info["kubeconfig"])
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    replay.ensure_namespace_and_sink_secret(core, NAMESPACE, SECRET, info["pg"])
    points: list[dict[str, Any]] = []
    headline: list[dict[str, Any]] = []
    for size in sizes:
        topic = f"bench-{uuid.uuid4().hex[:8]}"
        orders = replay.make_orders(size)
        replay.create_topic(info["kafka_bootstrap"], topic, PARTITIONS)
        try:
            replay.produce(info["kafka_bootstrap"], topic, orders)
            ends = replay.topic_end_offsets(info["kafka_bootstrap"], topic)
            raw = replay.raw_consume_rate(info["kafka_bootstrap"], topic, size)
            copy = copy_ingest_rate(info["pg_dsn"], orders)
            del orders
            runs = [(shape, LINEARITY_MAX_OFFSETS, points) for shape in shapes]
            if size == max(sizes):
                runs += [(shape, DEFAULT_MAX_OFFSETS_PER_TRIGGER, headline) for shape in shapes]
            for shape, bound, into in runs:
                point = {"shape": shape.name, "raw_consume_events_per_s": round(raw),
                         "copy_ingest_rows_per_s": round(copy),
                         **run_replay(info, custom, shape, topic, size, ends, bound)}
                point.update(ratios(point))
                print(json.dumps(point, default=str), flush=True)
                into.append(point)
        finally:
            replay.delete_topic(info["kafka_bootstrap"], topic)
    result = {
        "measured_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": machine(info), "events_per_shape": max(sizes),
        "shapes": [{**p, "description": SHAPES[p["shape"]].description,
                    "sql": SHAPES[p["shape"]].sql} for p in headline],
        "linearity": points,
        "linearity_max_offsets_per_trigger": LINEARITY_MAX_OFFSETS,
    }
    out = settings.state_dir / "results" / "bench_replay.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result["shapes"], indent=2))


if __name__ == "__main__":
    main()
