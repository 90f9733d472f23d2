"""docs/reliability.md from the fault suite's per-scenario results (one JSON file each)."""

from __future__ import annotations

import datetime as dt
import statistics
from pathlib import Path
from typing import Any

ORDER = ["operator SIGKILL in Pending", "operator SIGKILL in Backfilling",
         "operator SIGKILL between intent and switch", "operator SIGKILL in Retiring",
         "Spark driver SIGKILL mid-replay", "Spark driver SIGKILL between COPY and commit",
         "Kafka broker restart mid-replay", "PostgreSQL restart mid-replay",
         "PostgreSQL restart mid-cutover", "kube-apiserver restart mid-migration",
         "10 spec edits within 5 s", "operator replaced (upgrade) mid-migration"]

HEADER = """# Reliability: the fault suite's results

Written by the fault suite (`make faults`, also part of `make test`) at the end
of a run, from the per-scenario results in `.stack/results/faults/`; do not
edit by hand. Every scenario runs on the real local stack (API server, Kafka,
PostgreSQL, PySpark, S3) with the operator as its own process, a producer
writing {rate} records/s into the source topic for the whole scenario, and a
reader querying the alias in a loop on its own connection.

- **runs**: how many times the fault was injected.
- **converged**: runs after which the migration finished (the new revision
  serves, Ready) and the alias equalled the test's own recomputation of every
  record produced in the scenario.
- **seconds to converge**: from the fault to the view Ready on the migration's
  revision (for the kill in Retiring: to the old revision Retired); median
  and worst over the runs.
- **rows lost / duplicated**: records missing from / counted twice in the
  alias at the end (each key's order count against the recomputation).
- **reader errors**: failed queries of the reader on the alias. Only the
  PostgreSQL restarts may have them (the database itself is down); they are
  marked "expected".
- **load at end**: the machine's 1-minute load average when the scenario
  ended, and its CPU count: seconds stretch with it (a Spark job takes
  seconds to its first batch on an idle machine, minutes on a loaded one).

"""


def _seconds(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.1f} / {max(values):.1f}"


def _row(r: dict[str, Any]) -> str:
    errors = str(r["reader_errors"])
    if r.get("reader_errors_expected"):
        errors += " (expected)"
    return (f"| {r['scenario']} | {r['runs']} | {r['converged']}/{r['runs']} | "
            f"{_seconds(r['seconds_to_converge'])} | {r['rows_lost']} | "
            f"{r['rows_duplicated']} | {errors} | {r.get('load_average', '-')} on "
            f"{r.get('cpus', '-')} | {r.get('note', '')} |")


def write_table(results: list[dict[str, Any]], path: Path, rate: int = 20) -> None:
    rank = {name: i for i, name in enumerate(ORDER)}
    rows = sorted(results, key=lambda r: (rank.get(r["scenario"], len(ORDER)), r["scenario"]))
    newest = max((r.get("finished_at", 0) for r in rows), default=0)
    when = dt.datetime.fromtimestamp(newest, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [HEADER.format(rate=rate).rstrip("\n"), "",
             f"Last run finished {when}.", "",
             "| scenario | runs | converged | seconds to converge (median / worst) | rows lost "
             "| rows duplicated | reader errors | load at end (CPUs) | notes |",
             "|---|---|---|---|---|---|---|---|---|",
             *(_row(r) for r in rows),
             *(f"| {name} | 0 | - | - | - | - | - | - | no result: not run, or failed before "
               "recording |" for name in ORDER if name not in {r["scenario"] for r in rows}),
             ""]
    path.write_text("\n".join(lines))


def write_from(results_dir: Path, path: Path) -> int:
    """Merge the per-scenario results found in `results_dir` into `path`; how many."""
    import json

    found = sorted(results_dir.glob("*.json"))
    if found:
        write_table([json.loads(p.read_text()) for p in found], path)
    return len(found)


if __name__ == "__main__":  # rewrite the table from the last results without a run
    import sys

    from dvstack.settings import load

    REPO = Path(__file__).resolve().parents[3]
    n = write_from(load().state_dir / "results" / "faults", REPO / "docs" / "reliability.md")
    sys.exit(0 if n else 1)
