"""What the cutover checks cost the sink, against a bare scan of the same index, in one run.

Builds an active and a candidate index of N rows each (a text key, two numbers; the
candidate misses 1% of the keys) in a scratch schema of the stack's PostgreSQL, then
times, on the same connection:
- the baseline: `SELECT count(*)` of the candidate (one sequential scan);
- each check as the operator runs it (core.cutover.checks + adapters.postgres.checks): rowCount,
  keySample (1,000 keys each way) and an assertion (`... WHERE balance < 0`).
Reports each check's seconds and its ratio to the baseline (median of 5 runs); nothing
here asserts a time.

Usage: python benchmarks/checks_cost.py [ROWS ...]   (the stack must be up)
"""

from __future__ import annotations

import json
import statistics
import sys
import time
import uuid
from typing import Any

import psycopg

from derived_views.adapters.postgres.checks import run_sql_checks
from derived_views.api.spec import CutoverChecks
from derived_views.core.check_runs import CheckRequest
from dvstack.settings import load
from dvstack.testing.termination import clean_up_on_signals

RUNS = 5
CHECKS = CutoverChecks.model_validate({
    "rowCount": {"maxRelativeDifference": 0.02}, "keySample": {"size": 1000, "maxMissing": 50},
    "assertions": [{"name": "no-negative-balances",
                    "sql": "SELECT customer_id, balance FROM {index} WHERE balance < 0"}]})


def build(conn: psycopg.Connection[Any], schema: str, rows: int) -> None:
    conn.execute(f'CREATE SCHEMA "{schema}"')
    for table, skip in (("active", 0), ("candidate", 100)):
        conn.execute(f'CREATE TABLE "{schema}"."{table}" (customer_id text PRIMARY KEY, '
                     "orders bigint, balance double precision)")
        keep = f"WHERE i % {skip} <> 0" if skip else ""
        conn.execute(f'INSERT INTO "{schema}"."{table}" SELECT format(\'c-%s\', i), i % 97, '
                     f"(i % 1000) * 0.25 FROM generate_series(1, {rows}) i {keep}")
        conn.execute(f'ANALYZE "{schema}"."{table}"')


def measure(conn: psycopg.Connection[Any], schema: str) -> dict[str, float]:
    request = CheckRequest(revision="candidate", schema=schema, index="candidate",
                           active_index="active", primary_key=("customer_id",), same_key=True,
                           checks=CHECKS, checks_hash="bench")
    timings: dict[str, list[float]] = {}
    for _ in range(RUNS):
        started = time.perf_counter()
        conn.execute(f'SELECT count(*) FROM "{schema}"."candidate"').fetchone()
        timings.setdefault("baseline count(*)", []).append(time.perf_counter() - started)
        for name, (_, seconds) in run_sql_checks(conn, request).items():
            timings.setdefault(name, []).append(seconds)
    return {name: statistics.median(values) for name, values in timings.items()}


def main() -> None:
    clean_up_on_signals()  # a killed run deletes what it started, as one that ends
    sizes = [int(a) for a in sys.argv[1:]] or [100_000, 1_000_000]
    dsn = json.loads(load().stack_file.read_text())["pg_dsn"]
    report = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        for rows in sizes:
            schema = f"bench_checks_{uuid.uuid4().hex[:8]}"
            try:
                build(conn, schema, rows)
                medians = measure(conn, schema)
            finally:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            base = medians["baseline count(*)"]
            report[rows] = {name: {"seconds": round(s, 4), "x_baseline": round(s / base, 2)}
                            for name, s in medians.items()}
            print(f"{rows:>10,} rows: " + ", ".join(
                f"{n} {v['seconds'] * 1000:.1f} ms ({v['x_baseline']}x)"
                for n, v in report[rows].items()))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
