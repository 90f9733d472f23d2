"""A replay's ceiling: the view's SQL as Spark's own batch job over the same topic.

The streaming replay is Spark too, so the rate Spark itself reaches on the same records,
machine and cores is the ceiling it is judged against (issue 50): `spark.read` of the
Kafka topic from its first to its last offset, `from_json` with the view's schema, the
view's SQL over it, and then, per shape:

- `aggregate`: the result collected to the driver (500 rows);
- `mirror`: the result written into an index table made by the job's own DDL with
  Spark's JDBC writer (PostgreSQL's driver, `reWriteBatchedInserts=true`: what a user
  who tuned it would run), emptied before each run.

Each variant runs twice in one session (the first warms the JIT and the page cache, as
ConsumerPerformance's runs do); the better run counts. The clock covers the action alone,
not the JVM's start or the session (as ConsumerPerformance times itself inside its JVM):
the replay's steady rate, which it is set against, leaves its start-up out too. `ranges`
reads the topic split into that many Kafka ranges (`minPartitions`), Spark's own way to
spread one partition's records over more tasks than the topic has partitions.

Run by benchmarks/replay_rate.py in a process of its own (its JVM must not outlive it);
prints one JSON object.

Usage: python benchmarks/spark_batch.py --bootstrap HOST:PORT --topic T --shape S
       --sql SQL --schema DDL --cores N --jars A.jar,B.jar --events N [--ranges N]
       [--parse plain|job] [--table SCHEMA.TABLE]   (mirror: the database's DSN in DV_SPARK_BATCH_DSN)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "spark_templates"))

DSN_ENV = "DV_SPARK_BATCH_DSN"
"""The mirror's database, as a libpq DSN: in the environment, not on a command line."""
RUNS = 2
"""The first run warms the JIT and the page cache; the better of the two is kept."""
SHUFFLE_PARTITIONS = "4"
"""As the job's template sets it (spark_templates/sparkapplication.yaml)."""


def best(seconds: Sequence[float], events: int) -> dict[str, Any]:
    """The better run's rate, and every run's seconds (so the spread shows)."""
    fastest = min(seconds)
    return {"events_per_s": round(events / fastest), "seconds": [round(s, 2) for s in seconds]}


def jdbc_target(dsn: str) -> tuple[str, dict[str, str]]:
    """PostgreSQL's JDBC URL and properties for a libpq DSN (batched INSERTs rewritten into
    multi-row ones, the driver's own bulk path)."""
    parts = conninfo_to_dict(dsn)
    url = (f"jdbc:postgresql://{parts.get('host', 'localhost')}:{parts.get('port', 5432)}/"
           f"{parts.get('dbname', 'postgres')}?reWriteBatchedInserts=true")
    return url, {"user": str(parts.get("user", "")), "password": str(parts.get("password", "")),
                 "driver": "org.postgresql.Driver"}


def timed(action: Callable[[], object], runs: int = RUNS,
          before: Callable[[], object] | None = None) -> list[float]:
    """Seconds of each run of `action`; `before` (untimed) resets what a run writes."""
    found = []
    for _ in range(runs):
        if before is not None:
            before()
        started = time.monotonic()
        action()
        found.append(time.monotonic() - started)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--shape", choices=("aggregate", "mirror"), required=True)
    parser.add_argument("--sql", required=True)
    parser.add_argument("--schema", required=True, help="the records' DDL, as the view's")
    parser.add_argument("--cores", type=int, required=True)
    parser.add_argument("--jars", required=True)
    parser.add_argument("--events", type=int, required=True)
    parser.add_argument("--ranges", type=int, default=0,
                        help="minPartitions of the read (0: one range per Kafka partition)")
    parser.add_argument("--table", default="", help="the mirror's table, made beforehand")
    parser.add_argument("--parse", choices=("plain", "job"), default="plain",
                        help="plain from_json, or the job's own parse (dvjob.source.parse: "
                             "the bad-record checks and Kafka's metadata columns), to tell "
                             "what the job's parse costs from what Spark's engine costs")
    args = parser.parse_args()

    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = (SparkSession.builder.master(f"local[{args.cores}]").appName("spark-batch-ceiling")
             .config("spark.jars", args.jars).config("spark.ui.enabled", "false")
             .config("spark.driver.memory", "1g")
             .config("spark.sql.shuffle.partitions", SHUFFLE_PARTITIONS)
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    try:
        reader = (spark.read.format("kafka").option("kafka.bootstrap.servers", args.bootstrap)
                  .option("subscribe", args.topic).option("startingOffsets", "earliest")
                  .option("endingOffsets", "latest"))
        if args.ranges:
            reader = reader.option("minPartitions", str(args.ranges))
        if args.parse == "job":
            from dvjob.source.parse import parse_events, value_schema
            events = parse_events(reader.load(), value_schema(args.schema))
        else:
            events = (reader.load()
                      .select(F.from_json(F.col("value").cast("string"), args.schema).alias("e"))
                      .select("e.*"))
        events.createOrReplaceTempView("events")
        # A new query per run: an action repeated on one DataFrame reuses its shuffle's
        # output (the aggregate's second run would only merge), which is not a replay.
        if args.shape == "aggregate":
            rows: list[int] = []
            seconds = timed(lambda: rows.append(len(spark.sql(args.sql).collect())))
            out = {"output_rows": rows[-1]}
        else:
            dsn = os.environ[DSN_ENV]
            url, props = jdbc_target(dsn)

            def truncate() -> None:
                with psycopg.connect(dsn, autocommit=True) as conn:
                    conn.execute(f"TRUNCATE {args.table}")

            seconds = timed(lambda: spark.sql(args.sql).write.jdbc(url, args.table, "append",
                                                                   props), before=truncate)
            out = {"output_rows": args.events}
        print(json.dumps({"shape": args.shape, "ranges": args.ranges or None,
                          "parse": args.parse,
                          **best(seconds, args.events), **out}), flush=True)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
