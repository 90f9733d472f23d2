"""Replay rate of the derived-view job against baselines measured in the same run.

For each topic size (default 0.5M, 1M, 2M and 4M order events in a fresh
3-partition topic) and each view shape, on the same topic and machine:
- ConsumerPerformance: Kafka's own consumer benchmark
  (org.apache.kafka.tools.ConsumerPerformance, from the broker's jars), the read
  limit of this broker and machine; see `consumer_perf_rate` for the figure used;
- raw consume: a bare confluent-kafka consumer (one Python client) reading the
  topic from offset 0, the baseline of earlier runs, kept for comparison;
- COPY ingest: PostgreSQL COPY of the same records, as rows of the mirror
  view's index table (the job's own DDL: same column types and key, logged),
  text encoded before the clock starts, from one client: the write limit;
- replay: the project's Spark job (a SparkApplication run by the local
  executor) from creation until the ledger equals the end offsets, both
  including Spark's start-up and in steady state (events after the first
  batch over the time from the first to the last batch commit in the ledger).
Shapes: `aggregate` (orders per customer, 500 output rows: Spark-bound) and
`mirror` (one output row per order: sink-bound), each with its Avro twin
(`aggregate-avro`, `mirror-avro`): the same SQL over the same events written to a
topic of their own (same keys, same partitions) as Avro in the Confluent wire
format, the writer's schema registered in the stack's schema registry, read with
`source.format: avro`.  The twins replay the largest size only, with the headline's
bound (along the linearity curve they would double the run); ConsumerPerformance
and the raw consumer read the Avro topic again (its bytes differ), COPY is the same
rows.  Goals (issue 29): the
aggregate at >= 0.25x ConsumerPerformance, the mirror at >= 0.6x COPY; each
point carries its ratios, its goal and, from its profile, the ceiling each
phase of a batch implies.  Nothing here asserts a time.

The headline figures replay the largest topic with the product's default batch
bound (source.maxOffsetsPerTrigger); the linearity curve replays every size
with a fixed bound of 250,000 records, so each size has several batches and
the sizes differ only in the topic's length.  Where the time goes comes from
the job's own `dvjob timing` lines (executors staging, the merge transaction)
and the ledger's commit times (the rest: Spark's planning, offsets, checkpoint).
At the largest size the mirror also replays as one batch into an empty index,
with the sink's bulk merge (dvjob.sinks.postgres.bulk) and without it; its merge
transaction's rows/s is set against the COPY of the same run.

Results go to .stack/results/bench_replay.json; benchmarks/report.py turns
them into docs/performance.md.

Usage: python benchmarks/replay_rate.py [--sizes 500000,1000000,...]
                                        [--shapes aggregate,mirror,aggregate-avro,mirror-avro]
                                        [--save-as NAME]
       (the stack must be up)
"""

from __future__ import annotations

import argparse
import copy
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import psycopg
from kubernetes import client, config
from pyspark.sql.types import DoubleType, StringType, StructField, StructType, TimestampType

from derived_views.api.spec import DEFAULT_MAX_OFFSETS_PER_TRIGGER
from derived_views.core.job.sparkapplication import DRIVER_ONLY_ROLES, secret_mounts
from derived_views.core.judges.avro_schema import spark_ddl
from dvstack import artefacts
from dvstack.services import kafka_broker, kafka_connect
from dvstack.settings import KAFKA_VERSION, SPARK_VERSION, Settings, load
from dvstack.testing import avro_orders, replay
from dvstack.testing import results as results_file
from dvstack.testing.schema_registry_client import register
from dvstack.testing.termination import clean_up_on_signals
from dvstack.testing.waiting import wait_for

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "spark_templates"))
sys.path.insert(0, str(REPO / "benchmarks"))

import jdbc_sink  # noqa: E402
from spark_batch import DSN_ENV  # noqa: E402

from dvjob.first_batch import FIRST_BATCH_CONF  # noqa: E402
from dvjob.sinks.postgres.sink import index_ddl  # noqa: E402
from dvjob.sinks.registry import BULK_LOAD_CONF  # noqa: E402
from dvjob.sinks.schema import TableLayout, table_layout  # noqa: E402

NAMESPACE = "bench"
SECRET = "views-db"
REGISTRY_SECRET = "registry"
PARTITIONS = 3
LINEARITY_MAX_OFFSETS = 250_000
TIMING_PREFIX = "dvjob timing "
FULL_JIT = "-XX:TieredStopAtLevel=4"
"""The replay rate is steady-state speed: C2 too, after the stand-in's quick-start C1."""
CONSUMER_PERF = "org.apache.kafka.tools.ConsumerPerformance"
CONSUMER_PERF_RUNS = 2
"""The first run also warms the page cache and the JIT; the better of the two is kept."""
CONSUMER_PERF_TIMEOUT_MS = 30_000
"""ConsumerPerformance's --timeout: the longest wait for a record before it gives up."""
MIRROR_OUTPUT = StructType([StructField("order_id", StringType()),
                            StructField("customer_id", StringType()),
                            StructField("amount", DoubleType()),
                            StructField("ts", TimestampType())])
"""The mirror transform's output as Spark types it (replay.ORDER_SCHEMA's columns)."""


AVRO_READER = json.dumps(avro_orders.ORDER_EVENT)
"""The Avro shapes' reader schema: the writer's own, so each record decodes without
resolving a field (what is measured is decoding, not schema evolution)."""


@dataclass(frozen=True)
class Shape:
    name: str
    description: str
    sql: str
    primary_key: list[str]
    format: str = "json"
    """The source topic's values: `json`, or `avro` in the Confluent wire format."""
    twin: str | None = None
    """An Avro shape's JSON shape: the same SQL over the same events."""


def avro_twin(shape: Shape) -> Shape:
    """The JSON shape over the Avro topic: the same SQL and key, so the two runs differ in
    the values' encoding and the job's decoding alone."""
    return replace(shape, name=f"{shape.name}-avro", format="avro", twin=shape.name,
                   description=f"{shape.description}; the same events in Avro")


JSON_SHAPES = {
    "aggregate": Shape("aggregate", "orders per customer: 500 output rows, a GROUP BY kept in "
                       "Spark's state (Spark-bound)", replay.ORDERS_BY_CUSTOMER_SQL,
                       ["customer_id"]),
    "mirror": Shape("mirror", "one output row per order: every event becomes an index row "
                    "(sink-bound)", "SELECT order_id, customer_id, amount, ts FROM events",
                    ["order_id"]),
}
SHAPES = {**JSON_SHAPES, **{twin.name: twin for twin in map(avro_twin, JSON_SHAPES.values())}}


# --- ConsumerPerformance: the read limit ----------------------------------------------------

def parse_consumer_perf(stdout: str) -> dict[str, float]:
    """ConsumerPerformance's summary, by its header's names (the last line with as many fields
    as the header follows it; a timeout warning may come between)."""
    lines = [line.strip() for line in stdout.splitlines()]
    header_at = next((i for i, line in enumerate(lines) if line.startswith("start.time,")), None)
    if header_at is None:
        raise ValueError(f"no ConsumerPerformance header in its output: {stdout[-500:]!r}")
    names = [name.strip() for name in lines[header_at].split(",")]
    rows = [line.split(",") for line in lines[header_at + 1:]]
    rows = [row for row in rows if len(row) == len(names)]
    if not rows:
        raise ValueError(f"no ConsumerPerformance summary line in its output: {stdout[-500:]!r}")
    values = dict(zip(names, (v.strip() for v in rows[-1]), strict=True))
    return {name: float(values[name]) for name in names if name not in ("start.time", "end.time")}


def consumer_perf_figures(summary: Mapping[str, float], expected: int) -> dict[str, float]:
    """One run's figures, named as the results carry them; a run that read fewer records than
    the topic holds (its --timeout passed) measured something else: refused."""
    read = int(summary["data.consumed.in.nMsg"])
    if read < expected:
        raise RuntimeError(f"ConsumerPerformance read {read} of {expected} records "
                           f"(timeout {CONSUMER_PERF_TIMEOUT_MS} ms)")
    return {"consumer_perf_events_per_s": round(summary["nMsg.sec"]),
            "consumer_perf_mb_per_s": round(summary["MB.sec"], 1),
            "consumer_perf_fetch_events_per_s": round(summary["fetch.nMsg.sec"]),
            "consumer_perf_fetch_ms": int(summary["fetch.time.ms"]),
            "consumer_perf_rebalance_ms": int(summary["rebalance.time.ms"])}


def best_run(runs: Sequence[Mapping[str, float]]) -> dict[str, Any]:
    """The run with the highest rate, and every run's rate (so the spread shows)."""
    best = max(runs, key=lambda run: run["consumer_perf_events_per_s"])
    return {**best, "consumer_perf_runs": [run["consumer_perf_events_per_s"] for run in runs]}


def consumer_perf_rate(settings: Settings, bootstrap: str, topic: str,
                       expected: int) -> dict[str, Any]:
    """Kafka's ConsumerPerformance reading the whole topic, the better of two runs.

    The figure used is its `nMsg.sec`, the tool's own headline rate: records over the time
    from the consumer's creation to its last record, timed inside the JVM, so the JVM's
    start is not counted.  It includes the consumer group's join (`rebalance.time.ms`, half
    a second or more here), which weighs on small topics and which the job's source (it
    assigns partitions, no group) never pays: `fetch.nMsg.sec`, which leaves the join out,
    `fetch.time.ms` and `MB.sec` are kept beside it, so the stricter limit shows too.  Each run is a new group, so each reads from the earliest offset; the
    first run warms the page cache and the JIT.
    """
    runs = []
    for _ in range(CONSUMER_PERF_RUNS):
        command = kafka_broker.tool_command(
            settings, CONSUMER_PERF, "--bootstrap-server", bootstrap, "--topic", topic,
            "--messages", str(expected), "--timeout", str(CONSUMER_PERF_TIMEOUT_MS),
            "--group", f"dv-consumer-perf-{uuid.uuid4().hex[:8]}")
        done = subprocess.run(command, capture_output=True, text=True, check=False,
                              timeout=CONSUMER_PERF_TIMEOUT_MS / 1000 + 600)
        if done.returncode != 0:
            raise RuntimeError(f"ConsumerPerformance exited with {done.returncode}: "
                               f"{(done.stderr or done.stdout)[-2000:]}")
        runs.append(consumer_perf_figures(parse_consumer_perf(done.stdout), expected))
    return best_run(runs)


# --- COPY into the index's shape: the write limit ---------------------------------------------

def mirror_layout() -> TableLayout:
    """The mirror view's index table, derived by the job's own code from its output."""
    return table_layout(MIRROR_OUTPUT, SHAPES["mirror"].primary_key)


def copy_text(orders: Sequence[Mapping[str, Any]]) -> bytes:
    """The orders as COPY text rows of the mirror's index, values as the job sends them
    (timestamps as ISO text with an explicit UTC offset, dvjob.sinks.schema)."""
    return "".join(f"{o['order_id']}\t{o['customer_id']}\t{o['amount']!r}\t"
                   f"{str(o['ts']).replace('T', ' ')}.000000+00:00\n" for o in orders).encode()


def copy_ingest_rate(dsn: str, orders: list[dict[str, Any]]) -> float:
    """Rows/s of one COPY of the orders into a table made by the job's DDL for the mirror
    (same column types, same primary key, logged), in one transaction, from one client."""
    text = copy_text(orders)
    layout = mirror_layout()
    chunk = 1 << 20
    table = f"bench_copy_{uuid.uuid4().hex[:8]}"
    columns = ", ".join(f'"{name}"' for name in layout.column_names)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(index_ddl("public", table, layout))
        try:
            started = time.monotonic()
            with conn.transaction(), conn.cursor() as cur, cur.copy(
                    f'COPY "public"."{table}" ({columns}) FROM STDIN') as copy:
                for at in range(0, len(text), chunk):
                    copy.write(text[at:at + chunk])
            seconds = time.monotonic() - started
        finally:
            conn.execute(f'DROP TABLE IF EXISTS "public"."{table}"')
    return len(orders) / seconds


# --- Spark's own batch job: the ceiling of a replay ------------------------------------------

BATCH_RANGES = 6
"""The read split into twice the topic's partitions: Spark's own way to use more tasks."""


def batch_jars(settings: Settings) -> list[Path]:
    """What the batch job needs beside PySpark: the Kafka source and PostgreSQL's JDBC
    driver (the one the stack's Debezium connector ships)."""
    driver_dir = kafka_connect.plugin_path(artefacts.kafka_connect_libs(settings))
    drivers = sorted(driver_dir.glob("*/postgresql-*.jar"))
    if not drivers:
        raise RuntimeError(f"no PostgreSQL JDBC driver under {driver_dir}")
    return [*artefacts.spark_kafka_jars(settings), drivers[0]]


def spark_batch_rate(settings: Settings, info: dict[str, Any], shape: Shape, topic: str,
                     events_n: int, ranges: int, parse: str = "plain") -> dict[str, Any]:
    """benchmarks/spark_batch.py over the topic, in a process of its own (see there)."""
    command = [sys.executable, str(REPO / "benchmarks" / "spark_batch.py"),
               "--bootstrap", info["kafka_bootstrap"], "--topic", topic, "--shape", shape.name,
               "--sql", shape.sql, "--schema", replay.ORDER_SCHEMA, "--cores", "2",
               "--jars", ",".join(map(str, batch_jars(settings))), "--events", str(events_n),
               "--ranges", str(ranges), "--parse", parse]
    table = f"bench_batch_{uuid.uuid4().hex[:8]}"
    if shape.name == "mirror":
        with psycopg.connect(info["pg_dsn"], autocommit=True) as conn:
            conn.execute(index_ddl("public", table, mirror_layout()))
        command += ["--table", f'public."{table}"']
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False,
                              timeout=3600, env={**os.environ, DSN_ENV: info["pg_dsn"]})
    finally:
        if shape.name == "mirror":
            with psycopg.connect(info["pg_dsn"], autocommit=True) as conn:
                conn.execute(f'DROP TABLE IF EXISTS "public"."{table}"')
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"the Spark batch job exited with {done.returncode}: "
                           f"{(done.stderr or done.stdout)[-2000:]}")
    return dict(json.loads(lines[-1]))


def spark_batch_rates(settings: Settings, info: dict[str, Any], shape: Shape, topic: str,
                      events_n: int) -> dict[str, Any]:
    """The shape's ceiling as Spark's batch job: one range per partition, then BATCH_RANGES;
    and for the aggregate (Spark-bound, where the parse weighs) the batch job with the
    job's own parse, which tells the parse's share of the gap."""
    plain = spark_batch_rate(settings, info, shape, topic, events_n, 0)
    split = spark_batch_rate(settings, info, shape, topic, events_n, BATCH_RANGES)
    parsed = (spark_batch_rate(settings, info, shape, topic, events_n, 0, parse="job")
              if shape.name == "aggregate" else None)
    figures = {"spark_batch_events_per_s": plain["events_per_s"],
               "spark_batch_seconds": plain["seconds"],
               # a replay's JVM is always a new one: the batch job's first run is its like
               "spark_batch_cold_events_per_s": round(events_n / plain["seconds"][0]),
               "spark_batch_ranges": BATCH_RANGES,
               "spark_batch_ranges_events_per_s": split["events_per_s"],
               "spark_batch_ranges_seconds": split["seconds"]}
    if parsed is not None:
        figures["spark_batch_job_parse_events_per_s"] = parsed["events_per_s"]
        figures["spark_batch_job_parse_seconds"] = parsed["seconds"]
    if plain.get("output_rows") is not None:
        figures["spark_batch_output_rows"] = plain["output_rows"]
    return figures


def batch_timings(logs_dir: Path, app_name: str) -> list[dict[str, Any]]:
    """The job's `dvjob timing` lines (one per batch written), from its driver log."""
    found: list[dict[str, Any]] = []
    for log in sorted((logs_dir / "spark").glob(f"{NAMESPACE}_{app_name}-driver*.log")):
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith(TIMING_PREFIX):
                found.append(json.loads(line[len(TIMING_PREFIX):]))
    return found


def _records_to(end_offsets: Mapping[str, Mapping[str, int]]) -> int:
    return sum(int(offset) for parts in end_offsets.values() for offset in parts.values())


def profile(ledger: list[Any], timings: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Mean seconds per steady batch (every batch after the first that staged rows): the
    executors' staging job, the merge transaction, and the rest of the interval between two
    ledger commits (Spark's offsets, planning and checkpoint, the driver's bookkeeping); and
    the mean source records of those batches, from the ledger's end offsets, which turns
    each phase's seconds into the rate it alone would allow (`ceilings`)."""
    commits = {row[0]: row[2] for row in ledger}
    ends = {row[0]: row[1] for row in ledger}
    steady = [t for t in timings if t["batch"] > 0 and "stage_seconds" in t
              and t["batch"] - 1 in commits and t["batch"] in commits]
    if not steady:
        return None
    interval = sum((commits[t["batch"]] - commits[t["batch"] - 1]).total_seconds()
                   for t in steady) / len(steady)
    stage = sum(t["stage_seconds"] for t in steady) / len(steady)
    merge = sum(t["transaction_seconds"] for t in steady) / len(steady)
    records = sum(_records_to(ends[t["batch"]]) - _records_to(ends[t["batch"] - 1])
                  for t in steady) / len(steady)
    return {"batches": len(steady), "records_per_batch": round(records),
            "seconds_per_batch": round(interval, 2),
            "staging_seconds": round(stage, 2), "merge_transaction_seconds": round(merge, 2),
            "other_seconds": round(interval - stage - merge, 2)}


def as_avro(app: Mapping[str, Any], reader_schema: str, sink_secret: str,
            registry_secret: str) -> dict[str, Any]:
    """The SparkApplication reading Avro values, as the operator renders an Avro view's:
    `source.format: avro` with its reader schema and the DDL the operator derives from it,
    the registry and sink Secrets named in `secrets` and mounted where the job looks for
    them (the registry's in the driver alone, which plans the decoding)."""
    avro_app = copy.deepcopy(dict(app))
    spec = avro_app["spec"]
    flag, text = spec["arguments"]
    job = json.loads(text)
    job["source"].update(format="avro", schema=spark_ddl(reader_schema),
                         avro={"readerSchema": reader_schema})
    secrets = {"sink": sink_secret, "registry": registry_secret}
    job["secrets"] = secrets
    spec["arguments"] = [flag, json.dumps(job)]
    spec["driver"]["secrets"] = secret_mounts(dict(secrets))
    spec["executor"]["secrets"] = secret_mounts(
        {role: name for role, name in secrets.items() if role not in DRIVER_ONLY_ROLES})
    return avro_app


def run_replay(info: dict[str, Any], custom: Any, shape: Shape, topic: str, events_n: int,
               ends: dict[int, int], max_offsets: int,
               first_batch: int | None = None, bulk_load: bool | None = None) -> dict[str, Any]:
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
        if shape.format == "avro":
            app = as_avro(app, AVRO_READER, SECRET, REGISTRY_SECRET)
        # steady-state speed: both JIT tiers (the stand-in's drivers default to C1 only)
        app["spec"]["driver"]["javaOptions"] = FULL_JIT
        if first_batch is not None:  # the job's first-batch bound (dvjob.first_batch), 0: off
            app["spec"]["sparkConf"][FIRST_BATCH_CONF] = str(first_batch)
        if bulk_load is not None:  # the PostgreSQL sink's bulk merge (dvjob.sinks.postgres.bulk)
            app["spec"]["sparkConf"][BULK_LOAD_CONF] = str(bulk_load).lower()
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
    timings = batch_timings(Path(info["logs_dir"]), name)
    return {
        "events": events_n, "batches": len(ledger), "output_rows": found[0] if found else None,
        "max_offsets_per_trigger": max_offsets,
        "replay_events_per_s_steady": (round((events_n - first_events) / steady_s)
                                       if len(ledger) > 1 and steady_s > 0 else None),
        "replay_events_per_s_including_startup": round(events_n / total_s),
        "seconds_create_to_caught_up": round(total_s, 1),
        "profile": profile(ledger, timings),
        "first_batch_timing": next((t for t in timings if t["batch"] == 0), None),
    }


def first_load(info: dict[str, Any], custom: Any, topic: str, events_n: int,
               ends: dict[int, int], copy_rate: float) -> dict[str, Any]:
    """A first replay into an empty index as one batch (the mirror, no first-batch bound),
    with the sink's bulk merge and without it: the merge transaction's rows/s against COPY
    into a table of the same shape, measured in the same run."""
    runs: dict[str, Any] = {}
    for bulk in (True, False):
        point = run_replay(info, custom, SHAPES["mirror"], topic, events_n, ends, events_n,
                           first_batch=0, bulk_load=bulk)
        timing = point.get("first_batch_timing") or {}
        merge_s = timing.get("transaction_seconds")
        rate = events_n / merge_s if merge_s else None
        runs["bulk" if bulk else "row_by_row"] = {
            "batches": point["batches"], "output_rows": point["output_rows"],
            "seconds_create_to_caught_up": point["seconds_create_to_caught_up"],
            "staging_seconds": timing.get("stage_seconds"),
            "merge_transaction_seconds": merge_s,
            "bulk_merge_seconds": timing.get("bulk_merge_seconds"),
            "merge_rows_per_s": round(rate) if rate else None,
            "merge_ratio_vs_copy": _ratio(rate, copy_rate)}
        print(json.dumps({"first_load": "bulk" if bulk else "row_by_row",
                          **runs["bulk" if bulk else "row_by_row"]}), flush=True)
    return {"events": events_n, "copy_ingest_rows_per_s": round(copy_rate), **runs}


@dataclass(frozen=True)
class Goal:
    """A shape's goal: its steady rate at least `at_least` times one baseline."""

    baseline: str
    """The point's key of the baseline's rate."""
    ratio: str
    """The point's key of the ratio to that baseline."""
    at_least: float
    label: str


GOALS = {
    "aggregate": Goal("consumer_perf_events_per_s", "ratio_vs_consumer_perf", 0.25,
                      "ConsumerPerformance"),
    "mirror": Goal("copy_ingest_rows_per_s", "ratio_vs_copy", 0.6, "COPY ingest"),
}
"""Issue 29: the aggregate near the read limit, the mirror near the write limit."""
BATCH_GOAL = Goal("spark_batch_events_per_s", "ratio_vs_spark_batch", 1.0,
                  "Spark's batch job")
"""Issue 50: a replay at least as fast as the same SQL as Spark's own batch job, per shape."""
SINK_GOAL = Goal("jdbc_sink_events_per_s", "ratio_vs_jdbc_sink", 1.0, "Debezium's JDBC sink")
"""Issue 50: the mirror at least as fast as what a user would run instead of it."""


def _ratio(rate: float | None, baseline: float | None) -> float | None:
    return None if rate is None or not baseline else round(rate / baseline, 3)


def ratios(point: Mapping[str, Any]) -> dict[str, Any]:
    """Replay steady over each baseline: ConsumerPerformance, COPY, and the one-client Python
    consumer of earlier runs."""
    steady = point.get("replay_events_per_s_steady")
    return {"ratio_vs_spark_batch": _ratio(steady, point.get("spark_batch_events_per_s")),
            "ratio_vs_spark_batch_ranges": _ratio(steady,
                                                  point.get("spark_batch_ranges_events_per_s")),
            "ratio_vs_spark_batch_cold": _ratio(steady, point.get("spark_batch_cold_events_per_s")),
            "ratio_vs_consumer_perf": _ratio(steady, point.get("consumer_perf_events_per_s")),
            "ratio_vs_copy": _ratio(steady, point.get("copy_ingest_rows_per_s")),
            "ratio_vs_jdbc_sink": _ratio(steady, point.get("jdbc_sink_events_per_s")),
            "ratio_vs_raw": _ratio(steady, point.get("raw_consume_events_per_s"))}


def goal(point: Mapping[str, Any], wanted: Goal | None = None) -> dict[str, Any] | None:
    """The shape's goal (or `wanted`) judged on this point: the ratio reached, the rate the
    goal needs (its share of the baseline measured in this run) and whether it is met; None
    for a shape without a goal."""
    wanted = wanted or GOALS.get(str(point.get("shape")))
    if wanted is None:
        return None
    baseline, ratio = point.get(wanted.baseline), point.get(wanted.ratio)
    return {"baseline": wanted.label, "at_least": wanted.at_least, "ratio": ratio,
            "needed_events_per_s": None if not baseline else round(wanted.at_least * baseline),
            "met": None if ratio is None else ratio >= wanted.at_least}


PHASES = (("staging", "staging_seconds", "the executors' staging job (Spark's stages: Kafka "
           "read, parse, transform, COPY into an UNLOGGED table)"),
          ("merge", "merge_transaction_seconds", "the merge transaction (PostgreSQL: the "
           "upsert into the logged index, its WAL, the ledger row)"),
          ("other", "other_seconds", "the rest (the driver's JVM: offsets, planning, "
           "checkpoint)"))


def ceilings(point: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per phase of a steady batch, the rate it alone allows: records per batch over its
    seconds (the phases run one after another, so none can be faster than this while it
    takes that long), and whether that is below what the goal needs."""
    prof = point.get("profile")
    if not isinstance(prof, Mapping) or not prof.get("records_per_batch"):
        return []
    needed = (point.get("goal") or {}).get("needed_events_per_s")
    records = prof["records_per_batch"]
    found = []
    for phase, key, what in PHASES:
        seconds = prof.get(key)
        if seconds is None or seconds <= 0:
            continue
        ceiling = round(records / seconds)
        found.append({"phase": phase, "what": what, "seconds": seconds,
                      "ceiling_events_per_s": ceiling,
                      "below_goal": None if needed is None else ceiling < needed})
    return found


def judged(point: dict[str, Any]) -> dict[str, Any]:
    """The point with its ratios, its goal and the ceilings its profile implies."""
    point.update(ratios(point))
    point["goal"] = goal(point)
    if point.get(BATCH_GOAL.baseline) is not None:
        point["batch_goal"] = goal(point, BATCH_GOAL)
    if point.get(SINK_GOAL.baseline) is not None:
        point["sink_goal"] = goal(point, SINK_GOAL)
    point["ceilings"] = ceilings(point)
    return point


def versus_json(points: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each Avro point with its steady rate over its JSON twin's in the same list (same
    events, same bound): what reading Avro instead of JSON gains or costs the job."""
    json_rates = {(p.get("shape"), p.get("events")): p.get("replay_events_per_s_steady")
                  for p in points if not p.get("twin")}
    return [{**p, "ratio_vs_json": _ratio(p.get("replay_events_per_s_steady"),
                                          json_rates.get((p["twin"], p.get("events"))))}
            if p.get("twin") else dict(p) for p in points]


def planned_runs(shapes: Sequence[Shape], size: int,
                 largest: int) -> list[tuple[Shape, int, str]]:
    """The replays of one topic size, as (shape, batch bound, `linearity` or `headline`):
    the JSON shapes at every size with the linearity bound, every shape at the largest size
    with the product's default bound; the Avro twins there only, as the curve would double
    the run."""
    runs = [(shape, LINEARITY_MAX_OFFSETS, "linearity") for shape in shapes
            if shape.format == "json"]
    if size == largest:
        runs += [(shape, DEFAULT_MAX_OFFSETS_PER_TRIGGER, "headline") for shape in shapes]
    return runs


def write_topics(info: dict[str, Any], topics: Mapping[str, str],
                 orders: list[dict[str, Any]]) -> dict[str, dict[int, int]]:
    """The orders written to each format's topic (Avro: its schema registered under the
    topic's value subject first, as a producer's serializer would); each topic's ends."""
    bootstrap = info["kafka_bootstrap"]
    for fmt, topic in topics.items():
        if fmt == "avro":
            schema_id = register(info["schema_registry_url"], f"{topic}-value", AVRO_READER)
            avro_orders.produce_orders(bootstrap, topic, orders, schema_id)
        else:
            replay.produce(bootstrap, topic, orders)
    return {fmt: replay.topic_end_offsets(bootstrap, topic) for fmt, topic in topics.items()}


def read_baselines(settings: Settings, bootstrap: str, topic: str,
                   size: int) -> dict[str, Any]:
    """The read limits of one topic: ConsumerPerformance and the one-client Python consumer."""
    perf = consumer_perf_rate(settings, bootstrap, topic, size)
    raw = replay.raw_consume_rate(bootstrap, topic, size)
    return {**perf, "raw_consume_events_per_s": round(raw)}


def machine(info: dict[str, Any]) -> dict[str, Any]:
    with psycopg.connect(info["pg_dsn"]) as conn:
        row = conn.execute("SHOW server_version").fetchone()
    pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return {"cpus": os.cpu_count(), "memory_gib": round(pages / 2**30, 1),
            "python": platform.python_version(), "spark": SPARK_VERSION, "kafka": KAFKA_VERSION,
            "postgres": row[0] if row else None}


def main() -> None:
    clean_up_on_signals()  # a killed run deletes what it started, as one that ends
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="500000,1000000,2000000,4000000")
    parser.add_argument("--shapes", default=",".join(SHAPES),
                        help=f"any of {', '.join(SHAPES)}")
    parser.add_argument("--save-as", default="bench_replay",
                        help="the results file's name (a partial run must not replace the "
                             "one docs/performance.md is made from)")
    parser.add_argument("--first-batch-offsets", type=int, default=None,
                        help="the job's first-batch bound (default: the job's own; 0: none), "
                             "to measure what bounding a first replay's first batch costs")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    shapes = [SHAPES[s] for s in args.shapes.split(",")]
    settings = load()
    info = json.loads(settings.stack_file.read_text())
    api = config.new_client_from_config(config_file=info["kubeconfig"])
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    replay.ensure_namespace_and_sink_secret(core, NAMESPACE, SECRET, info["pg"])
    if any(shape.format == "avro" for shape in shapes):
        replay.ensure_registry_secret(core, NAMESPACE, info["schema_registry_url"],
                                      REGISTRY_SECRET)
    points: list[dict[str, Any]] = []
    headline: list[dict[str, Any]] = []
    loads: dict[str, Any] | None = None
    for size in sizes:
        runs = planned_runs(shapes, size, max(sizes))
        if not runs:  # Avro shapes alone: nothing to replay below the largest size
            continue
        topic = f"bench-{uuid.uuid4().hex[:8]}"
        topics = {shape.format: topic + ("-avro" if shape.format == "avro" else "")
                  for shape, _, _ in runs}
        orders = replay.make_orders(size)
        for name in topics.values():
            replay.create_topic(info["kafka_bootstrap"], name, PARTITIONS)
        try:
            ends = write_topics(info, topics, orders)
            copy_rate = copy_ingest_rate(info["pg_dsn"], orders)
            baselines = {fmt: {**read_baselines(settings, info["kafka_bootstrap"], name, size),
                               "copy_ingest_rows_per_s": round(copy_rate)}
                         for fmt, name in topics.items()}
            for fmt, figures in baselines.items():
                print(json.dumps({"events": size, "format": fmt, **figures}), flush=True)
            batch = {shape.name: spark_batch_rates(settings, info, shape, topics["json"], size)
                     for shape, _, which in runs
                     if which == "headline" and shape.format == "json"}
            if "mirror" in batch:  # what a user would run instead of the mirror view
                table = f"bench_sink_{uuid.uuid4().hex[:8]}"
                batch["mirror"].update(jdbc_sink.sink_rate(
                    info, orders, index_ddl("public", table, mirror_layout()), table,
                    PARTITIONS))
            del orders
            for name, figures in batch.items():
                print(json.dumps({"events": size, "shape": name, **figures}), flush=True)
            for shape, bound, which in runs:
                fmt = shape.format
                point = judged({"shape": shape.name, "format": fmt,
                                **({"twin": shape.twin} if shape.twin else {}),
                                **baselines[fmt],
                                **(batch.get(shape.name, {}) if which == "headline" else {}),
                                **run_replay(info, custom, shape, topics[fmt], size, ends[fmt],
                                             bound, args.first_batch_offsets),
                                "load_average_1m": round(os.getloadavg()[0], 2)})
                print(json.dumps(point, default=str), flush=True)
                (headline if which == "headline" else points).append(point)
            if size == max(sizes) and "mirror" in args.shapes.split(","):
                loads = first_load(info, custom, topics["json"], size, ends["json"], copy_rate)
        finally:
            for name in topics.values():
                replay.delete_topic(info["kafka_bootstrap"], name)
    headline = versus_json(headline)
    result = {
        "measured_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": machine(info), "events_per_shape": max(sizes),
        "shapes": [{**p, "description": SHAPES[p["shape"]].description,
                    "sql": SHAPES[p["shape"]].sql} for p in headline],
        "linearity": points,
        "first_load": loads,
        "linearity_max_offsets_per_trigger": LINEARITY_MAX_OFFSETS,
        "goals": {shape: {"baseline": g.label, "at_least": g.at_least}
                  for shape, g in GOALS.items()},
        "batch_goal": {"baseline": BATCH_GOAL.label, "at_least": BATCH_GOAL.at_least,
                       "ranges": BATCH_RANGES, "job": "benchmarks/spark_batch.py"},
        "sink_goal": {"baseline": SINK_GOAL.label, "at_least": SINK_GOAL.at_least,
                      "tasks": PARTITIONS, "batch_size": jdbc_sink.BATCH_SIZE,
                      "connector": "benchmarks/jdbc_sink.py"},
        "consumer_perf": {"class": CONSUMER_PERF, "runs": CONSUMER_PERF_RUNS,
                          "figure": "nMsg.sec (the better run)"},
        "avro": ({"reader_schema": avro_orders.ORDER_EVENT, "events": max(sizes)}
                 if any(shape.format == "avro" for shape in shapes) else None),
    }
    results_file.save(settings, args.save_as, result)
    print(json.dumps(result["shapes"], indent=2, default=str))


if __name__ == "__main__":
    main()
