"""Turns the benchmark results of one run into docs/performance.md and its plots.

The benchmark scripts print and save raw JSON; people read a page.  Keeping the
page generated from the JSON (never edited by hand) means every figure on it
comes from one run on one machine, next to the baseline it is compared with,
and a result that was not measured says so instead of silently showing an old
number.

Usage: python benchmarks/report.py RESULTS_DIR DOCS_DIR
  reads RESULTS_DIR/bench_replay.json, RESULTS_DIR/apply_to_ready[_beside].json,
  RESULTS_DIR/operator_scale.json and RESULTS_DIR/steady_cost*.json (any may be missing), writes DOCS_DIR/performance.md
  and the PNGs under DOCS_DIR/performance/.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import math
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.axes import Axes

REPLAY_FILE = "bench_replay.json"
READY_FILE = "apply_to_ready.json"
READY_BESIDE_FILE = "apply_to_ready_beside.json"
SCALE_FILE = "operator_scale.json"
STEADY_FILES = "steady_cost*.json"
"""One view's (steady_cost.json), several views' (steady_cost_<N>views.json) and the real
node's (..._node.json): benchmarks/steady_cost.py's names."""
EXECUTORS_FILES = "replay_executors_*.json"
"""`make bench-node`'s replays of one backlog on the real node with 1, 2, ... executors
(benchmarks/apply_to_ready.py --node --replay-executors N --save-as replay_executors_N)."""
LONG_RUN = "_long"
"""The suffix of a steady-cost run whose window opens minutes after Ready (`make bench`)."""
PROGRESS_FILE = "replay_progress.json"
PROGRESS_WATCH_FILE = "replay_progress_watch.txt"
PLOTS_DIR = "performance"
RATES_PNG = "replay_rates.png"
LINEARITY_PNG = "linearity.png"
READY_PNG = "apply_to_ready.png"
PROGRESS_PNG = "replay_progress.png"
"""Drawn by `dv plot`'s code (benchmarks/apply_to_ready.py --plot), not by this script."""
IDLE_PATCHES_PER_SECOND = 0.01
"""Status patches an idle operator may make: none (one in 100 s is rounding)."""
NOT_MEASURED = "Not measured in this run: run `make bench`."
NA = "n/a"
TIMES = "\u00d7"  # the multiplication sign, spelt out for the linter (RUF001)
DIVIDED = "\u00f7"  # the division sign, likewise

Json = dict[str, Any]


# --- formatting -------------------------------------------------------------------------------

def _num(value: object) -> float | None:
    """A finite JSON number, or None for a missing, null or non-numeric value."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _count(value: object) -> str:
    n = _num(value)
    return NA if n is None else f"{n:,.0f}"


def _fixed(value: object, digits: int = 1, unit: str = "") -> str:
    n = _num(value)
    return NA if n is None else f"{n:,.{digits}f}{unit}"


def _ratio(value: object) -> str:
    n = _num(value)
    return NA if n is None else f"{n:.2f}{TIMES}"


def _millions(events: float) -> str:
    return f"{events / 1e6:g}M"


def _verdict(ok: bool | None) -> str:
    return NA if ok is None else ("met" if ok else "**not met**")


def _below(value: object, limit: float, inclusive: bool = False) -> bool | None:
    n = _num(value)
    if n is None:
        return None
    return n <= limit if inclusive else n < limit


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |"
              for row in rows]
    return lines


# --- selecting what is there ------------------------------------------------------------------

def _shapes(replay: Json) -> list[Json]:
    shapes = replay.get("shapes")
    return [s for s in shapes if isinstance(s, dict)] if isinstance(shapes, list) else []


def _linearity(replay: Json) -> dict[str, list[Json]]:
    """Linearity points per shape (in order of first appearance), sorted by events."""
    points = replay.get("linearity")
    series: dict[str, list[Json]] = {}
    for point in points if isinstance(points, list) else []:
        if isinstance(point, dict) and _num(point.get("events")) is not None:
            series.setdefault(str(point.get("shape", NA)), []).append(point)
    for shape_points in series.values():
        shape_points.sort(key=lambda p: _num(p["events"]) or 0.0)
    return series


def _has_linearity_plot(replay: Json) -> bool:
    return any(_num(p.get("replay_events_per_s_steady")) is not None
               for points in _linearity(replay).values() for p in points)


def _is_avro(point: Json) -> bool:
    """A point replayed from the Avro topic (results before Avro carry no format: JSON)."""
    return point.get("format") == "avro"


def _avro_pairs(replay: Json) -> list[tuple[Json | None, Json]]:
    """Each headline Avro point with its JSON twin's (same events), None when the run did
    not replay the twin."""
    shapes = _shapes(replay)
    twins = {(s.get("shape"), s.get("events")): s for s in shapes if not _is_avro(s)}
    return [(twins.get((s.get("twin"), s.get("events"))), s) for s in shapes if _is_avro(s)]


# --- markdown ---------------------------------------------------------------------------------

def render_markdown(replay: Json | None, scale: Json | None, ready: Json | None = None,
                    progress: Json | None = None, watch: str | None = None,
                    steady: Sequence[Json] = (), ready_beside: Json | None = None,
                    executors: Sequence[Json] = ()) -> str:
    """The whole of performance.md; None for a result file that was not there."""
    lines = ["# Performance", "",
             "Generated by `make bench` from the JSON results of one run "
             "(`benchmarks/report.py`); do not edit by hand.", ""]
    lines += _intro(replay, scale, ready)
    lines += _goals_section(replay, ready, ready_beside, steady, executors)
    lines += _baselines_section(replay)
    lines += _replay_section(replay)
    lines += _batch_section(replay)
    lines += _avro_section(replay)
    lines += _linearity_section(replay)
    lines += _ready_section(ready)
    lines += _progress_section(progress, watch)
    lines += _steady_section(steady)
    lines += _executors_section(executors)
    lines += _scale_section(scale)
    lines += _profile_section(replay)
    lines += _first_load_section(replay)
    return "\n".join(lines).rstrip() + "\n"


def _intro(replay: Json | None, scale: Json | None, ready: Json | None = None) -> list[str]:
    lines: list[str] = []
    if replay is not None:
        machine = replay.get("machine")
        m: Json = machine if isinstance(machine, dict) else {}
        lines += [f"- Replay rate measured at: {replay.get('measured_at') or NA}",
                  f"- Machine: {_count(m.get('cpus'))} CPUs, "
                  f"{_fixed(m.get('memory_gib'), 1, ' GiB')} memory; Spark {m.get('spark') or NA}"
                  f", PostgreSQL {m.get('postgres') or NA}, Kafka {m.get('kafka') or NA}"]
    if ready is not None and ready.get("measured_at"):
        lines.append(f"- Apply to Ready measured at: {ready['measured_at']}")
    if scale is not None and scale.get("measured_at"):
        lines.append(f"- Operator scale measured at: {scale['measured_at']}")
    if lines:
        lines.append("")
    lines += [
        "Every ratio is against a baseline measured in the same run, on the same topic and "
        "machine:", "",
        "- **ConsumerPerformance**: Kafka's own consumer benchmark "
        "(`org.apache.kafka.tools.ConsumerPerformance`, the broker's jars) reading the whole "
        "topic, the better of two runs: the read limit. Its `nMsg.sec` is used (timed inside "
        "the JVM, so the JVM's start is not counted; it includes the consumer group's join, "
        "shown beside it with the fetch-only rate);",
        "- **COPY ingest**: PostgreSQL `COPY` of the same records into a table made by the "
        "job's own DDL for the mirror view's index (same column types, same primary key, "
        "logged), from one client: the write limit;",
        "- **Spark's batch job**: the same SQL over the same topic as a plain Spark batch "
        "job, the ceiling of a replay (section \"The ceiling\");",
        "- **Debezium's JDBC sink**: for the mirror, the connector a user would run instead of "
        "the view, upserting the same events into a table of the same DDL;",
        "- **raw consume**: a bare confluent-kafka consumer, one Python client, reading the "
        "topic from offset 0: the baseline of earlier runs, kept for comparison;",
        "- **replay steady**: the events after the first batch divided by the time from the "
        "first to the last batch commit in the sink's ledger;",
        "- **including start-up**: all events divided by the time from the SparkApplication's "
        "creation until the view is caught up.", "",
        "Ratios are replay steady divided by the baseline.", ""]
    return lines


def _goal_label(goal: object) -> str:
    if not isinstance(goal, dict):
        return NA
    return f"≥ {_fixed(goal.get('at_least'), 2)}{TIMES} {goal.get('baseline') or NA}"


def _goal_cells(goal: object) -> list[str]:
    """A table's Goal and Met cells for a point's judged goal (n/a cells when not judged)."""
    met = goal.get("met") if isinstance(goal, dict) else None
    return [_goal_label(goal), _verdict(met if isinstance(met, bool) else None)]


def _goal_point(replay: Json, shape: str) -> tuple[Json, str] | None:
    """The point a shape's goal is judged on: the headline run when it has a steady rate,
    else the largest linearity run that has one (a small run's headline is a single batch)."""
    for s in _shapes(replay):
        if s.get("shape") == shape and _num(s.get("replay_events_per_s_steady")) is not None:
            return s, "headline"
    known = [p for p in _linearity(replay).get(shape, [])
             if _num(p.get("replay_events_per_s_steady")) is not None]
    return (known[-1], "linearity") if known else None


def _shape_names(replay: Json) -> list[str]:
    names = [str(s.get("shape")) for s in _shapes(replay)]
    names += [n for n in _linearity(replay) if n not in names]
    return names


def _goals_section(replay: Json | None, ready: Json | None,
                   ready_beside: Json | None = None, steady: Sequence[Json] = (),
                   executors: Sequence[Json] = ()) -> list[str]:
    lines = ["## Goals", ""]
    rows: list[list[str]] = []
    notes: list[str] = []
    goals = replay.get("goals") if replay is not None else None
    avro = {s.get("shape") for s in _shapes(replay) if _is_avro(s)} if replay is not None \
        else set()
    for shape in _shape_names(replay) if replay is not None else []:
        found = _goal_point(replay, shape) if replay is not None else None
        if found is None:
            wanted = goals.get(shape) if isinstance(goals, dict) else None
            if wanted is None and (shape in avro or isinstance(goals, dict)):
                continue  # a shape without a goal (the Avro twins): nothing to judge
            rows.append([f"`{shape}` replay steady {_goal_label(wanted)}", NA,
                         "no run with a steady rate (each had a single batch)", NA, NA])
            continue
        point, which = found
        goal = point.get("goal")
        if not isinstance(goal, dict):
            continue
        where = (f"{_count(point.get('events'))} events, batches of at most "
                 f"{_count(point.get('max_offsets_per_trigger'))}"
                 + ("" if which == "headline" else " (linearity run)"))
        met = goal.get("met")
        rows.append([f"`{shape}` replay steady {_goal_label(goal)}",
                     f"{_ratio(goal.get('ratio'))} "
                     f"({_count(point.get('replay_events_per_s_steady'))} ev/s)",
                     where, f"{_count(goal.get('needed_events_per_s'))} ev/s",
                     _verdict(met if isinstance(met, bool) else None)])
        if met is False:
            notes.append(_bound_note(shape, point))
    rows += _batch_goal_rows(replay)
    for measured in (r for r in (ready, ready_beside) if r is not None):
        median = measured.get("median")
        total = median.get("total") if isinstance(median, dict) else None
        limit = _num(measured.get("goal_seconds"))
        met = None if limit is None else _below(total, limit)
        rows.append([f"Apply to Ready, {_count(measured.get('events'))}-event topic"
                     f"{_beside_label(measured)} < {_fixed(limit, 0, ' s')}",
                     _fixed(total, 1, " s") + " (median)",
                     f"runs: {len(measured.get('runs') or [])}{_beside_held(measured)}", "—",
                     _verdict(met)])
        if met is False:
            notes.append(_ready_bound_note(measured))
    for result in steady:
        met = _steady_met(result)
        rows.append(_steady_goal_row(result, met))
        if met is False:
            notes.append(_steady_bound_note(result))
    if executors:
        row, note = _executors_goal(executors)
        rows.append(row)
        if note:
            notes.append(note)
    if not rows:
        return [*lines, NOT_MEASURED, ""]
    lines += [*_table(["Goal", "Measured", "On", "Needs", "Met"], rows), ""]
    if notes:
        lines += ["What bounds a goal that is not met. For a replay, from the profile of the "
                  "run it was judged on: each phase of a steady batch runs after the other, so "
                  "a phase alone caps the rate at the batch's records over its seconds.", ""]
        lines += [f"- {note}" for note in notes] + [""]
    return lines


def _batch_goal_rows(replay: Json | None) -> list[list[str]]:
    """Per headline shape measured against Spark's batch job, and the mirror against
    Debezium's JDBC sink: the replay at least as fast."""
    rows = []
    judged = (("batch_goal", "the batch job on the same topic"),
              ("sink_goal", "Debezium's JDBC sink on the same events"))
    for s in _shapes(replay) if replay is not None else []:
        for key, against in judged:
            goal = s.get(key)
            if not isinstance(goal, dict):
                continue
            met = goal.get("met")
            rows.append([f"`{s.get('shape')}` replay steady {_goal_label(goal)}",
                         f"{_ratio(goal.get('ratio'))} "
                         f"({_count(s.get('replay_events_per_s_steady'))} ev/s)",
                         f"{_count(s.get('events'))} events, {against}",
                         f"{_count(goal.get('needed_events_per_s'))} ev/s",
                         _verdict(met if isinstance(met, bool) else None)])
    return rows


def _bound_note(shape: str, point: Json) -> str:
    """Which phases of a batch cap the rate below the goal, and at what."""
    prof = point.get("profile")
    ceilings = [c for c in point.get("ceilings") or [] if isinstance(c, dict)]
    if not isinstance(prof, dict) or not ceilings:
        return f"`{shape}`: no profile of steady batches in this run; nothing to say what bounds it."
    needed = (point.get("goal") or {}).get("needed_events_per_s")
    phases = "; ".join(f"{c.get('phase')} {_fixed(c.get('seconds'), 2, ' s')} "
                       f"(≤ {_count(c.get('ceiling_events_per_s'))} ev/s alone)"
                       for c in ceilings)
    text = (f"`{shape}` needs {_count(needed)} ev/s. Per steady batch of "
            f"{_count(prof.get('records_per_batch'))} records "
            f"({_fixed(prof.get('seconds_per_batch'), 2, ' s')}): {phases}.")
    below = [c for c in ceilings if c.get("below_goal") is True]
    if below:
        text += " Below the goal on its own: " + "; ".join(
            f"{c.get('what') or c.get('phase')}, whose ceiling "
            f"{_count(c.get('ceiling_events_per_s'))} ev/s is "
            f"{_ratio(_share(c.get('ceiling_events_per_s'), needed))} of what the goal needs"
            for c in below) + "."
    else:
        text += (" No phase alone is below the goal: their sum is, "
                 f"{_fixed(prof.get('seconds_per_batch'), 2, ' s')} per batch.")
    return text


def _beside_label(ready: Json) -> str:
    beside = ready.get("beside_serving")
    rate = _num(beside.get("rate")) if isinstance(beside, dict) else None
    return "" if rate is None else f" beside a view serving {rate:g} ev/s"


def _beside_held(ready: Json) -> str:
    """Whether the serving view stayed Ready while the runs were measured."""
    beside = ready.get("beside_serving")
    if not isinstance(beside, dict):
        return ""
    samples, missed = _num(beside.get("samples")), _num(beside.get("not_ready_samples"))
    if samples is None or missed is None:
        return ""
    return f"; the serving view Ready in {samples - missed:,.0f} of {samples:,.0f} samples"


def _ready_bound_note(ready: Json) -> str:
    """The largest parts of apply to Ready (medians), the policy's fixed wait among them."""
    names, median = ready.get("part_names"), ready.get("median")
    if not isinstance(names, dict) or not isinstance(median, dict):
        return "Apply to Ready: no parts in this run's results."
    known = sorted(((_num(median.get(key)), str(label)) for key, label in names.items()
                    if _num(median.get(key)) is not None), reverse=True)
    largest = "; ".join(f"{label.lstrip('→ ')} {_fixed(seconds, 2, ' s')}"
                        for seconds, label in known[:3])
    cutover = ready.get("cutover")
    stable = _num(cutover.get("stable_for_seconds")) if isinstance(cutover, dict) else None
    limit, total = _num(ready.get("goal_seconds")), _num(median.get("total"))
    text = f"Apply to Ready (median {_fixed(total, 2, ' s')}): the largest parts are {largest}."
    if stable and limit is not None and total is not None:
        text += (f" The gate's stableForSeconds ({stable:g} s, a policy default) is a fixed "
                 f"part: it leaves {limit - stable:g} s of the {limit:g} s goal for everything "
                 f"else, which took {total - stable:.2f} s.")
    return text


def _share(part: object, whole: object) -> float | None:
    a, b = _num(part), _num(whole)
    return None if a is None or not b else a / b


def _baselines_section(replay: Json | None) -> list[str]:
    lines = ["## Baselines", ""]
    if replay is None:
        return [*lines, NOT_MEASURED, ""]
    by_size: dict[tuple[float, bool], Json] = {}
    for point in [*_shapes(replay), *(p for ps in _linearity(replay).values() for p in ps)]:
        events = _num(point.get("events"))
        if events is not None:
            by_size.setdefault((events, _is_avro(point)), point)
    if not by_size:
        return [*lines, "No baselines in this run's results.", ""]
    lines += ["Measured once per topic size, before its replays"
              + ("; and once on the Avro topic of the same events, read again as its bytes "
                 "differ (COPY is the same rows)." if any(avro for _, avro in by_size)
                 else "."), ""]
    header = ["Events", "ConsumerPerformance (ev/s)", "its fetch only (ev/s)", "its MB/s",
              "its group join (ms)", "its runs (ev/s)", "Raw consume, Python (ev/s)",
              "COPY ingest (rows/s)"]
    rows = []
    for events, avro in sorted(by_size):
        p = by_size[(events, avro)]
        runs = p.get("consumer_perf_runs")
        rows.append([_count(events) + (", Avro topic" if avro else ""),
                     _count(p.get("consumer_perf_events_per_s")),
                     _count(p.get("consumer_perf_fetch_events_per_s")),
                     _fixed(p.get("consumer_perf_mb_per_s")),
                     _count(p.get("consumer_perf_rebalance_ms")),
                     ", ".join(_count(r) for r in runs) if isinstance(runs, list) and runs
                     else NA,
                     _count(p.get("raw_consume_events_per_s")),
                     _count(p.get("copy_ingest_rows_per_s"))])
    return [*lines, *_table(header, rows), ""]


def _replay_section(replay: Json | None) -> list[str]:
    lines = ["## Replay rate", ""]
    if replay is None:
        return [*lines, NOT_MEASURED, ""]
    shapes = _shapes(replay)
    if not shapes:
        return [*lines, "No shapes in this run's results.", ""]
    lines += [f"Events per shape: {_count(replay.get('events_per_shape'))}.", ""]
    for s in shapes:
        sql = f" `{s['sql']}`" if s.get("sql") else ""
        lines.append(f"- `{s.get('shape', NA)}`: {s.get('description') or NA} "
                     f"({_count(s.get('output_rows'))} output rows, {_count(s.get('batches'))} "
                     f"batches of at most {_count(s.get('max_offsets_per_trigger'))} offsets)."
                     f"{sql}")
    lines.append("")
    header = ["Shape", "Events", "Replay steady (ev/s)", "vs ConsumerPerformance", "vs COPY",
              "vs raw consume", "Goal", "Met", "Incl. start-up (ev/s)",
              "Create → caught up (s)"]
    rows = []
    for s in shapes:
        goal = s.get("goal")
        rows.append([str(s.get("shape", NA)), _count(s.get("events")),
                     _count(s.get("replay_events_per_s_steady")),
                     _ratio(s.get("ratio_vs_consumer_perf")), _ratio(s.get("ratio_vs_copy")),
                     _ratio(s.get("ratio_vs_raw")), *_goal_cells(goal),
                     _count(s.get("replay_events_per_s_including_startup")),
                     _fixed(s.get("seconds_create_to_caught_up"))])
    lines += _table(header, rows)
    lines += ["", f"![Replay rate against its baselines, per shape]({PLOTS_DIR}/{RATES_PNG})", ""]
    return lines


def _batch_section(replay: Json | None) -> list[str]:
    """Issue 50's ceiling: the same SQL as Spark's own batch job, beside the replay."""
    lines = ["## The ceiling: the same SQL as Spark's batch job; for the mirror, the JDBC sink",
             ""]
    points = [s for s in _shapes(replay) if s.get("spark_batch_events_per_s") is not None] \
        if replay is not None else []
    if not points:
        return [*lines, NOT_MEASURED, ""]
    wanted = replay.get("batch_goal") if replay is not None else None
    ranges = wanted.get("ranges") if isinstance(wanted, dict) else None
    lines += ["The streaming replay is Spark too: the rate Spark's own batch job reaches on the "
              "same topic, machine and cores is its ceiling (`benchmarks/spark_batch.py`: "
              "`spark.read` of the topic, `from_json`, the view's SQL; the aggregate "
              "collected, the mirror written with Spark's JDBC writer into the job's table; "
              "the better of two runs, the action alone timed). The read split into "
              f"{_count(ranges)} ranges (`minPartitions`) is Spark's own way to spread a "
              "partition over more tasks; the job's parse (`dvjob.source.parse`: the "
              "bad-record checks, Kafka's metadata columns) in place of plain `from_json` "
              "tells what the parse costs.", ""]
    header = ["Shape", "Events", "Spark batch (ev/s)", "its runs (s)", "its cold run (ev/s)",
              f"split in {_count(ranges)} (ev/s)", "with the job's parse (ev/s)",
              "Replay steady (ev/s)", "vs batch",
              "vs split batch", "Goal", "Met"]
    rows = []
    for s in points:
        goal = s.get("batch_goal")
        runs = s.get("spark_batch_seconds")
        rows.append([str(s.get("shape", NA)), _count(s.get("events")),
                     _count(s.get("spark_batch_events_per_s")),
                     ", ".join(_fixed(r, 1) for r in runs) if isinstance(runs, list) else NA,
                     _count(s.get("spark_batch_cold_events_per_s")),
                     _count(s.get("spark_batch_ranges_events_per_s")),
                     _count(s.get("spark_batch_job_parse_events_per_s")),
                     _count(s.get("replay_events_per_s_steady")),
                     _ratio(s.get("ratio_vs_spark_batch")),
                     _ratio(s.get("ratio_vs_spark_batch_ranges")), *_goal_cells(goal)])
    lines += [*_table(header, rows), ""]
    lines += ["The goal is judged on the batch job's better (warm) run. A replay's JVM is always "
              "a new one and warms its JIT during its first batches, as the batch job's first "
              "run does: set against that cold run, the replay is "
              + ", ".join(f"`{s.get('shape')}` {_ratio(s.get('ratio_vs_spark_batch_cold'))}"
                          for s in points) + ".", ""]
    return lines + _sink_lines(replay)


def _sink_lines(replay: Json | None) -> list[str]:
    """For the mirror, what a user would run instead: Debezium's JDBC sink connector."""
    points = [s for s in _shapes(replay) if s.get("jdbc_sink_events_per_s") is not None] \
        if replay is not None else []
    if not points:
        return []
    wanted = replay.get("sink_goal") if replay is not None else None
    tasks = wanted.get("tasks") if isinstance(wanted, dict) else None
    size = wanted.get("batch_size") if isinstance(wanted, dict) else None
    lines = ["For the mirror, the ceiling is also what a user would run instead of the view: "
             "Debezium's JDBC sink connector on the stack's Kafka Connect worker "
             "(`benchmarks/jdbc_sink.py`), upserting the same events by their key into a "
             "table of the job's DDL, with "
             f"{_count(tasks)} tasks and batches of {_count(size)} rows. It reads a twin "
             "topic of the same events with the schema the connector needs. Steady is from "
             "its first offset commit on, as the replay's is from its first batch on.", ""]
    header = ["Shape", "Events", "JDBC sink steady (ev/s)", "incl. start-up (ev/s)",
              "its seconds", "rows written", "Replay steady (ev/s)", "vs JDBC sink", "Goal",
              "Met"]
    rows = []
    for s in points:
        goal = s.get("sink_goal")
        rows.append([str(s.get("shape", NA)), _count(s.get("events")),
                     _count(s.get("jdbc_sink_events_per_s")),
                     _count(s.get("jdbc_sink_events_per_s_including_startup")),
                     _fixed(s.get("jdbc_sink_seconds"), 1),
                     _count(s.get("jdbc_sink_output_rows")),
                     _count(s.get("replay_events_per_s_steady")),
                     _ratio(s.get("ratio_vs_jdbc_sink")), *_goal_cells(goal)])
    return [*lines, *_table(header, rows), ""]


def _both(json_point: Json | None, avro_point: Json, key: str,
          show: Callable[[object], str]) -> str:
    """One figure of the JSON twin and of the Avro shape, in that order."""
    return f"{show((json_point or {}).get(key))} · {show(avro_point.get(key))}"


def _avro_section(replay: Json | None) -> list[str]:
    """The Avro shapes beside their JSON twins: what the rows measure, then the rates."""
    pairs = _avro_pairs(replay) if replay is not None else []
    if not pairs:
        return []
    events = _count(pairs[0][1].get("events"))
    avro = replay.get("avro") if replay is not None else None
    schema = avro.get("reader_schema") if isinstance(avro, dict) else None
    lines = ["## Avro against JSON", "",
             f"The `-avro` shapes replay the same {events} order events as their JSON twins "
             "(same keys, same partitions, same SQL and primary key), written to a topic of "
             "their own as Avro in the Confluent wire format (a magic byte 0, the 4-byte "
             "schema id, the Avro binary), the writer's schema registered under the topic's "
             "value subject in the stack's schema registry. The job reads them with "
             "`source.format: avro`: each record decoded with its writer's schema and resolved "
             "to the reader schema (here the same schema) by Spark's `from_avro`, where the "
             "JSON twin parses text with `from_json`; the rest of the job is the same. So "
             f"Avro {DIVIDED} JSON is what the values' encoding changes in the replay rate: "
             "fewer bytes read from Kafka, a binary decoding instead of a text parse. "
             "ConsumerPerformance and the raw consumer read the Avro topic again, whose records "
             "are smaller (its MB/s beside the JSON topic's); COPY is the same rows. Avro is "
             f"measured at one size, {events} events, with the headline's batch bound, not "
             "along the linearity curve, which would double the run.", ""]
    if isinstance(schema, dict):
        lines += [f"Writer and reader schema: `{json.dumps(schema, separators=(',', ':'))}`.",
                  ""]
    header = ["Shape", "Events", "JSON steady (ev/s)", "Avro steady (ev/s)",
              f"Avro {DIVIDED} JSON", "vs ConsumerPerformance (JSON · Avro)",
              "vs COPY (JSON · Avro)", "ConsumerPerformance MB/s (JSON · Avro)",
              "Incl. start-up, ev/s (JSON · Avro)"]
    rows = [[str(a.get("shape", NA)), _count(a.get("events")),
             _count((j or {}).get("replay_events_per_s_steady")),
             _count(a.get("replay_events_per_s_steady")), _ratio(a.get("ratio_vs_json")),
             _both(j, a, "ratio_vs_consumer_perf", _ratio),
             _both(j, a, "ratio_vs_copy", _ratio),
             _both(j, a, "consumer_perf_mb_per_s", _fixed),
             _both(j, a, "replay_events_per_s_including_startup", _count)]
            for j, a in pairs]
    return [*lines, *_table(header, rows), ""]


def _linearity_section(replay: Json | None) -> list[str]:
    lines = ["## Linearity", ""]
    if replay is None:
        return [*lines, NOT_MEASURED, ""]
    series = _linearity(replay)
    if not series:
        return [*lines, "No linearity points in this run's results.", ""]
    bound = _count(replay.get("linearity_max_offsets_per_trigger"))
    lines += ["The same shapes replayed from topics of growing size, with batches of at most "
              f"{bound} records at every size (so each size has several batches): a steady "
              "rate that holds as the topic grows means the replay time grows linearly with "
              "the events.", ""]
    header = ["Shape", "Events", "Replay steady (ev/s)", "Incl. start-up (ev/s)",
              "Create → caught up (s)", "Batches", "vs ConsumerPerformance", "vs COPY"]
    rows = [[shape, _count(p["events"]), _count(p.get("replay_events_per_s_steady")),
             _count(p.get("replay_events_per_s_including_startup")),
             _fixed(p.get("seconds_create_to_caught_up")), _count(p.get("batches")),
             _ratio(p.get("ratio_vs_consumer_perf")), _ratio(p.get("ratio_vs_copy"))]
            for shape, points in series.items() for p in points]
    lines += [*_table(header, rows), ""]
    for shape, points in series.items():
        known = [p for p in points if (_num(p.get("replay_events_per_s_steady")) or 0) > 0]
        if len(known) < 2:
            lines.append(f"- `{shape}`: fewer than two sizes with a steady rate; no comparison.")
            continue
        small, large = known[0], known[-1]
        ratio = (_num(large["replay_events_per_s_steady"]) or 0.0) \
            / (_num(small["replay_events_per_s_steady"]) or 1.0)
        lines.append(f"- `{shape}`: {_millions(_num(large['events']) or 0.0)} / "
                     f"{_millions(_num(small['events']) or 0.0)} steady rate: {ratio:.2f}{TIMES}")
    lines.append("")
    if _has_linearity_plot(replay):
        lines += [f"![Replay steady rate by topic size]({PLOTS_DIR}/{LINEARITY_PNG})", ""]
    return lines


def _ready_section(ready: Json | None) -> list[str]:
    lines = ["## Apply to Ready", ""]
    if ready is None:
        return [*lines, NOT_MEASURED, ""]
    runs = [r for r in ready.get("runs") or [] if isinstance(r, dict)]
    names = ready.get("part_names")
    part_names: Json = names if isinstance(names, dict) else {}
    operator = ready.get("operator")
    op: Json = operator if isinstance(operator, dict) else {}
    cutover = ready.get("cutover")
    cut: Json = cutover if isinstance(cutover, dict) else {}
    lines += [f"A view (orders per customer, no cutover settings) applied over a fresh "
              f"{_count(ready.get('partitions'))}-partition topic of "
              f"{_count(ready.get('events'))} order events written "
              f"{_fixed(ready.get('history_age_seconds'), 0, ' s')} earlier, to the real "
              "operator as its own process (lag poll "
              f"{_fixed(op.get('lag_poll_seconds'), 1, ' s')}, trigger "
              f"{_fixed(op.get('trigger_seconds'), 1, ' s')}; cutover defaults: "
              f"stableForSeconds {_count(cut.get('stable_for_seconds'))}, maxLagSeconds "
              f"{_count(cut.get('max_lag_seconds'))}). Each part ends at what the system "
              "records: the SparkApplication's creationTimestamp, the driver pod's start, the "
              "driver log's first line, the ledger's commit times, the view's "
              "`lastCutover.gateHeldAt` and `switchedAt`; Kubernetes' timestamps are whole "
              "seconds, so a part next to one may be off by up to a second. See "
              "`benchmarks/apply_to_ready.py`.", ""]
    if not runs:
        return [*lines, "No runs in this run's results.", ""]
    median = ready.get("median")
    med: Json = median if isinstance(median, dict) else {}
    header = ["Part", *[f"Run {i + 1} (s)" for i in range(len(runs))], "Median (s)"]
    rows = []
    for key in [*part_names, "total"]:
        label = "apply → Ready (total)" if key == "total" else str(part_names.get(key, key))
        rows.append([label, *[_fixed((r.get("parts") or {}).get(key), 2) for r in runs],
                     _fixed(med.get(key), 2)])
    lines += [*_table(header, rows), ""]
    stage, merge = med.get("first_batch_stage_seconds"), med.get("first_batch_transaction_seconds")
    if _num(stage) is not None or _num(merge) is not None:
        lines += ["Of the part that ends at the first commit, the first batch's own phases "
                  f"(medians, from its `dvjob timing` line): staging {_fixed(stage, 2, ' s')}, "
                  f"merge transaction {_fixed(merge, 2, ' s')}; the rest of that part is Spark "
                  "planning the batch, the driver's bookkeeping and its checkpoint.", ""]
    if _ready_parts(ready):
        lines += [f"![Apply to Ready, median of each part]({PLOTS_DIR}/{READY_PNG})", ""]
    return lines


WATCH_LINES = 24
"""Lines of `dv watch`'s transcript shown: the first batch and the first commits."""
_PARTITION_LINE = re.compile(r"^  \S+/\d+ ")


def _progress_section(progress: Json | None, watch: str | None) -> list[str]:
    lines = ["## One replay's progress", ""]
    runs = [r for r in (progress or {}).get("runs") or [] if isinstance(r, dict)]
    if progress is None or not runs:
        return [*lines, NOT_MEASURED, ""]
    run = runs[-1]
    lines += [f"The same view over {_count(progress.get('events'))} events, applied once "
              "with the operator sampling the lag every "
              f"{_fixed(progress.get('lag_history_seconds'), 0, ' s')}: the lag (solid), what "
              "the running batch has not read yet (dotted, from the job's progress reports), "
              "staleness (dashed) and the ETA (dash-dot), as `dv plot` draws them from "
              f"`status.lagHistory`. {_count(run.get('batches'))} batches; apply → Ready "
              f"{_fixed((run.get('parts') or {}).get('total'), 1, ' s')}. See "
              "`benchmarks/apply_to_ready.py --plot`.", "",
              f"![One replay's progress]({PLOTS_DIR}/{PROGRESS_PNG})", ""]
    if watch:
        shown = [line for line in watch.strip().splitlines()
                 if not _PARTITION_LINE.match(line)][:WATCH_LINES]
        lines += ["`dv watch` (plain output, one poll a second, its per-partition lines left "
                  "out) from the apply on:", "",
                  "```", *shown, "```", ""]
    return lines


def _steady_goal(result: Json) -> Json:
    found = result.get("goal")
    return found if isinstance(found, dict) else {}


def _steady_rss(result: Json) -> object:
    """What the memory goal is judged on: one view's resident memory, the stand-in's class
    archive included (benchmarks.steady_cost.STAND_IN_ARCHIVE: without it, the image's JVM
    holds the same classes in its class metadata)."""
    return result.get("rss_mb_per_view_max")


def _steady_met(result: Json) -> bool | None:
    """Cores and memory per view within the goal, with the gate held the whole window."""
    goal = _steady_goal(result)
    cores_ok = _below(result.get("cores_per_view_mean"), _num(goal.get("cores")) or 0.0,
                      inclusive=True)
    rss_ok = _below(_steady_rss(result), _num(goal.get("rss_mb")) or 0.0, inclusive=True)
    if cores_ok is None or rss_ok is None:
        return None
    return cores_ok and rss_ok and result.get("gate_held") is True


def _steady_goal_row(result: Json, met: bool | None) -> list[str]:
    goal = _steady_goal(result)
    views = _num(result.get("views")) or 1
    return [f"{'Each of ' + _count(views) + ' views' if views > 1 else 'A view'} serving "
            f"{_fixed(result.get('rate_per_view'), 0, ' ev/s')}, gate held: "
            f"≤ {_fixed(goal.get('cores'), 2)} core, ≤ {_fixed(goal.get('rss_mb'), 0, ' MB')}",
            f"{_fixed(result.get('cores_per_view_mean'), 3)} core, "
            f"{_fixed(_steady_rss(result), 0, ' MB')}",
            f"{_jobs_where(result)}, window from {_after_ready(result)}", "—", _verdict(met)]


def _steady_bound_note(result: Json) -> str:
    """Where one view's cores and memory go, for a steady-cost goal that is not met."""
    views = _num(result.get("views")) or 1
    head = (f"{_count(views)} views" if views > 1 else "One view") + \
        f" serving on the {_jobs_where(result)}: " + \
        f"{_fixed(result.get('cores_per_view_mean'), 3)} core"
    first = _first_view(result)
    groups = first.get("cores_by_thread")
    if isinstance(groups, dict) and groups:
        head += " (" + ", ".join(f"{k} {_fixed(v, 3)}" for k, v in groups.items()
                                 if (_num(v) or 0.0) > 0) + ")"
    store = result.get("s3_store")
    if isinstance(store, dict) and _num(store.get("share_per_view_cores")) is not None:
        head += f" with a checkpoint store share of {_fixed(store.get('share_per_view_cores'), 3)}"
    head += f"; {_fixed(_steady_rss(result), 0, ' MB')} resident"
    memory = first.get("memory_at_peak")
    if isinstance(memory, dict):
        head += (f" (at its peak: heap {_fixed(memory.get('heap_committed_mb'), 0, ' MB')} "
                 f"committed, class metadata {_fixed(memory.get('metaspace_mb'), 0, ' MB')}, "
                 f"the rest of the JVM {_fixed(memory.get('jvm_rest_mb'), 0, ' MB')}"
                 f"{'' if result.get('node') else ', its class archive included,'} with "
                 f"{_count(memory.get('jvm_threads'))} threads, Python "
                 f"{_fixed(memory.get('python_rss_mb'), 0, ' MB')})")
    if result.get("gate_held") is False:
        head += "; the gate was not held the whole window"
    return head + ". Section \"A serving view's steady cost\"."


def _steady_row(result: Json) -> list[str]:
    goal = _steady_goal(result)
    cores = result.get("cores_per_view_mean")
    rss = _steady_rss(result)
    gate = result.get("gate_held")
    met = _steady_met(result)
    applied = result.get("applied")
    views = _count(result.get("views")) + (f" ({applied})" if isinstance(applied, str)
                                           and (_num(result.get("views")) or 1) > 1 else "")
    return [views, _jobs_where(result), _after_ready(result),
            f"{_fixed(result.get('rate_per_view'), 0, ' ev/s')}",
            _fixed(result.get("trigger_seconds"), 1, " s"),
            _fixed(cores, 3), _fixed(rss, 0, " MB"), _fixed(result.get("pss_mb_per_view_mean"), 0,
                                                            " MB"),
            _fixed(_num(broker.get("cores")) if isinstance(
                broker := result.get("kafka_broker"), dict) else None, 3),
            "yes" if gate is True else ("no" if gate is False else NA),
            f"≤ {_fixed(goal.get('cores'), 2)} core, ≤ {_fixed(goal.get('rss_mb'), 0, ' MB')}",
            _verdict(met)]


def steady_files(results_dir: Path) -> list[Path]:
    """The steady-cost results in the page's order: on the stand-in before the real node,
    fewer views before more."""
    def order(path: Path) -> tuple[bool, int, bool]:
        name = path.stem.removeprefix("steady_cost").removesuffix("_node")
        long = name.endswith(LONG_RUN)
        count = name.removesuffix(LONG_RUN).strip("_").removesuffix("views")
        return path.stem.endswith("_node"), int(count) if count.isdigit() else 1, long
    return sorted(results_dir.glob(STEADY_FILES), key=order)


def _steady_section(steady: Sequence[Json]) -> list[str]:
    lines = ["## A serving view's steady cost", ""]
    if not steady:
        return [*lines, NOT_MEASURED, ""]
    lines += ["Each view serves a topic written at a steady rate, with the product's defaults "
              "(its micro-batch interval is half its staleness gate, `cutover.maxLagSeconds`). "
              "Measured by process from `/proc` over the window: every process of each view's "
              "job (the driver JVM, its Python driver and workers) and its share of the "
              "checkpoint store; Kafka's broker serving the same events is shown for "
              "comparison. Resident memory is the worst sample of one view's processes, the "
              "stand-in's class archive included: the image's JVM, which has none, holds the "
              "same classes in its class metadata instead (the two JVMs' resident memory "
              "was within 1 % on the same view); PSS counts pages shared between views once. "
              "On the real node (`--node`) the jobs are pods of the project's Spark image, driver and "
              "executors, metered by their pods' cgroups. The window opens a warm-up after "
              "the last view is Ready: 30 s, or 10 minutes for the long run (`--warmup 600`), "
              "by when the JIT compiler has done most of its work and Spark has begun purging "
              "its offset and commit logs (it keeps the last 100 batches: 8 minutes at a 5 s "
              "interval). `benchmarks/steady_cost.py`.", ""]
    rows = [_steady_row(r) for r in steady]
    lines += _table(["Views", "Jobs", "Window from", "Rate per view", "Interval",
                     "Cores per view",
                     "Resident per view (max)", "PSS per view", "Kafka broker cores",
                     "Gate held", "Goal", "Met"], rows)
    profiles = [row for r in steady if (row := _memory_row(r)) is not None]
    if profiles:
        lines += ["", "Where one view's resident memory goes at its peak: the JVM's heap and "
                  "class metadata as committed (its hsperfdata counters), the rest of the JVM "
                  "(compiled code, thread stacks, symbols, the allocator's own), and the "
                  "Python driver. On the stand-in the rest includes its class archive.", ""]
        lines += _table(["Views", "Jobs", "Window from", "JVM resident",
                         "Heap committed (used)",
                         "Class metadata", "Rest of the JVM", "JVM threads", "Python"],
                        profiles)
    cores = [row for r in steady if (row := _cores_row(r)) is not None]
    if cores:
        lines += ["", "Where one view's cores go over the window (of several, the first "
                  "applied): each thread's CPU from "
                  "`/proc/<pid>/task`, its JVM's grouped by name (the tasks; Spark's "
                  "micro-batch thread, which plans each batch and writes its offsets and "
                  "commit to the checkpoint; the collector; the JIT compiler; the rest: "
                  "scheduler, listeners, RPC, block cleanup, the Kafka and S3 clients), its "
                  "Python driver, what threads and processes that ended in the window used "
                  "(by difference from the job's total), and its share of the checkpoint "
                  "store.", ""]
        lines += _table(["Views", "Jobs", "Window from", *(label for _, label in CORE_COLUMNS),
                         "Other processes", "Checkpoint store", "The view's cores"], cores)
    return [*lines, ""]


CORE_COLUMNS = (("tasks", "Tasks"), ("micro-batch thread", "Micro-batch thread"),
                ("collector", "Collector"), ("compiler", "JIT compiler"),
                ("other JVM threads", "Other JVM threads"), ("Python", "Python"),
                ("exited threads and processes", "Ended in the window"))
"""steady_cost.py's thread groups (cores_by_thread) as the page's columns, in its order."""


def _cores_row(result: Json) -> list[str] | None:
    """The first view's cores by thread group, when the run recorded them."""
    first = _first_view(result)
    groups = first.get("cores_by_thread")
    if not isinstance(groups, dict) or not groups:
        return None
    known = {key for key, _ in CORE_COLUMNS}
    others = sum(n for k, v in groups.items() if k not in known and (n := _num(v)) is not None)
    store = result.get("s3_store")
    share = _num(store.get("share_per_view_cores")) if isinstance(store, dict) else None
    own = _num(first.get("cores"))
    return [_count(result.get("views")), _jobs_where(result), _after_ready(result),
            *(_fixed(_num(groups.get(key)), 3) for key, _ in CORE_COLUMNS),
            _fixed(others, 3), _fixed(share, 3),
            _fixed(None if own is None else own + (share or 0.0), 3)]


def _first_view(result: Json) -> Json:
    """The first view's figures in a steady-cost run (`per_view`, in the order applied);
    empty when the run recorded none."""
    views = result.get("per_view")
    first = next(iter(views.values()), None) if isinstance(views, dict) else None
    return first if isinstance(first, dict) else {}


def _jobs_where(result: Json) -> str:
    return "real node" if result.get("node") else "stand-in"


def _after_ready(result: Json) -> str:
    """When the window opened: its warm-up after the last view was Ready."""
    seconds = _num(result.get("warmup_seconds"))
    if seconds is None:
        return NA
    return f"Ready + {seconds / 60:.0f} min" if seconds >= 120 else f"Ready + {seconds:.0f} s"


def _memory_row(result: Json) -> list[str] | None:
    """The first view's memory profile at its peak, when the run recorded one."""
    memory = _first_view(result).get("memory_at_peak")
    if not isinstance(memory, dict):
        return None
    return [_count(result.get("views")), _jobs_where(result), _after_ready(result),
            _fixed(memory.get("jvm_rss_mb"), 0, " MB"),
            f"{_fixed(memory.get('heap_committed_mb'), 0, ' MB')} "
            f"({_fixed(memory.get('heap_used_mb'), 0, ' MB')})",
            _fixed(memory.get("metaspace_mb"), 0, " MB"),
            _fixed(memory.get("jvm_rest_mb"), 0, " MB"), _count(memory.get("jvm_threads")),
            _fixed(memory.get("python_rss_mb"), 0, " MB")]


def _slowest_of(scale: Json) -> str:
    samples = scale.get("change_to_candidate_samples")
    return f" (slowest of {len(samples)} views)" if isinstance(samples, list) and samples else ""


def executor_files(results_dir: Path) -> list[Path]:
    """The replay-executor runs, fewer executors first."""
    def count(path: Path) -> int:
        tail = path.stem.removeprefix("replay_executors_")
        return int(tail) if tail.isdigit() else 0
    return sorted(results_dir.glob(EXECUTORS_FILES), key=count)


def _replay_seconds(result: Json) -> dict[str, float | None]:
    """The last run's seconds between the marks that hold for a replay-stage job and the
    steady job after it alike (the ledger's commits, the view's status); the SparkApplication
    and driver marks are the steady job's, so they are not used here."""
    runs = [r for r in result.get("runs") or [] if isinstance(r, dict)]
    marks = runs[-1].get("marks") if runs else None
    found: dict[str, dt.datetime] = {}
    for key in ("applied", "first_commit", "caught_up_commit", "ready"):
        value = marks.get(key) if isinstance(marks, dict) else None
        try:
            with_zone = dt.datetime.fromisoformat(value) if isinstance(value, str) else None
        except ValueError:  # not a time: the mark is missing, as for an unfinished run
            with_zone = None
        if with_zone is not None and with_zone.tzinfo is not None:
            found[key] = with_zone

    def between(start: str, end: str) -> float | None:
        if start not in found or end not in found:
            return None
        return round((found[end] - found[start]).total_seconds(), 1)
    return {"to_first_commit": between("applied", "first_commit"),
            "replay": between("first_commit", "caught_up_commit"),
            "to_caught_up": between("applied", "caught_up_commit"),
            "to_ready_after": between("caught_up_commit", "ready"),
            "to_ready": between("applied", "ready")}


def _executors_goal(executors: Sequence[Json]) -> tuple[list[str], str | None]:
    """Goal 4's row: with more replay executors, the backlog is caught up sooner (each count
    faster than the one before); and, when it is not, what the runs shared."""
    measured = [(_num(r.get("replay_executors")), _replay_seconds(r)["to_caught_up"])
                for r in executors]
    seconds = [s for _, s in measured]
    met = None if len(measured) < 2 or None in seconds else all(
        later < earlier for earlier, later in itertools.pairwise(
            s for s in seconds if s is not None))
    text = "; ".join(f"{_count(n)}: {_fixed(s, 1, ' s')}" for n, s in measured)
    last = executors[-1]
    row = ["A replay's time falls with its executors, then it serves at the steady size",
           f"apply → caught up, by executors: {text}",
           f"{_jobs_where(last)}, {_count(last.get('events'))} events", "—", _verdict(met)]
    if met is not False:
        return row, None
    note = (f"Replay executors on the {_jobs_where(last)}: apply → caught up took {text} "
            "(by executors), "
            f"on a machine of {_count(last.get('cpus'))} CPUs that the job's driver and "
            "executors share with Kafka and PostgreSQL (load average "
            f"{_fixed(last.get('load_average_1m'), 2)} at the end of the last run): another "
            "executor adds a JVM, not a core. Section \"A replay sized apart from serving\".")
    return row, note


def _executors_section(executors: Sequence[Json]) -> list[str]:
    if not executors:
        return []
    first = executors[0]
    lines = ["## A replay sized apart from serving", "",
             f"A view over a fresh {_count(first.get('partitions'))}-partition topic of "
             f"{_count(first.get('events'))} events, applied with its jobs as pods of the "
             "project's Spark image on the real node (the real Spark Operator), its replay "
             "stage forced and its executors set (`DV_REPLAY_MIN_BACKLOG=1`, "
             "`DV_REPLAY_MAX_EXECUTORS`): the job replays with them, then restarts from its "
             "checkpoint at the steady size (no executors: its tasks run in its driver) "
             "before readers switch (`core/job/stages.py`). The steady size's cost on the "
             "real node is the row \"real node\" of \"A serving view's steady cost\". From "
             "the ledger's commits and the view's status; `make bench-node`.", ""]
    rows = []
    for result in executors:
        seconds = _replay_seconds(result)
        runs = [r for r in result.get("runs") or [] if isinstance(r, dict)]
        rows.append([_count(result.get("replay_executors")),
                     _count(runs[-1].get("batches")) if runs else NA,
                     _fixed(seconds["to_first_commit"]), _fixed(seconds["replay"]),
                     _fixed(seconds["to_caught_up"]), _fixed(seconds["to_ready_after"]),
                     _fixed(seconds["to_ready"]), _count(result.get("cpus")),
                     _fixed(result.get("load_average_1m"), 2)])
    header = ["Replay executors", "Batches", "Apply → first commit (s)",
              "First → caught-up commit (s)", "Apply → caught up (s)",
              "Caught up → Ready: the steady restart (s)", "Apply → Ready (s)", "CPUs",
              "Load average (1 min, at the end)"]
    return [*lines, *_table(header, rows), ""]


def _scale_section(scale: Json | None) -> list[str]:
    views = _num(scale.get("views")) if scale is not None else None
    lines = [f"## {_count(views) if views is not None else '1,000'} views on one operator", ""]
    if scale is None:
        return [*lines, NOT_MEASURED, ""]
    if scale.get("job_side_error"):
        lines += [f"> **Warning: the simulated job side failed during this run: "
                  f"`{scale['job_side_error']}`. The figures below may not describe an idle "
                  "operator with every view caught up.**", ""]
    lines += [f"{_count(views)} DerivedViews on one operator, measured over an idle window of "
              f"{_fixed(scale.get('idle_measured_seconds'), 1, ' s')} with every view caught "
              "up. The job side is simulated (a Spark driver per view cannot run on a small "
              "machine): the script plays each SparkApplication and its ledger commit, while "
              "the operator is the real one with production settings; see "
              "`benchmarks/operator_scale.py`.", ""]
    patches = _num(scale.get("status_patches_per_second"))
    rows = [
        ["Views created in", _fixed(scale.get("create_seconds"), 1, " s"), "—", "—"],
        ["Create → all views serving", _fixed(scale.get("all_ready_seconds"), 1, " s"), "—", "—"],
        ["Views settled (off the lag poll) when the window opened",
         _count(scale.get("settled_views"))
         + f" ({_fixed(scale.get('settle_seconds'), 1, ' s')} after all served)", "—", "—"],
        ["Operator CPU", _fixed(scale.get("cpu_percent_of_one_core"), 1, " % of one core"),
         "< 5 % of a core", _verdict(_below(scale.get("cpu_percent_of_one_core"), 5))],
        ["Operator RSS (peak)", _fixed(scale.get("rss_mb_peak"), 1, " MB"), "< 250 MB",
         _verdict(_below(scale.get("rss_mb_peak"), 250))],
        ["Kubernetes API requests beyond the baseline",
         _fixed(scale.get("api_requests_per_second"), 1, " /s")
         + f" (baseline {_fixed(scale.get('baseline_api_requests_per_second'), 2, ' /s')})",
         "—", "—"],
        ["Kafka end-offsets requests per lag poll",
         _fixed(scale.get("kafka_offset_requests_per_poll"), 1),
         "1 per Kafka cluster (this run: one cluster)",
         _verdict(_below(scale.get("kafka_offset_requests_per_poll"), 1.0, inclusive=True))],
        ["PostgreSQL sessions of the operator (peak)", _count(scale.get("pg_operator_sessions_peak")),
         "≤ the pool (DV_SINK_POOL_SIZE, default 4)",
         _verdict(_below(scale.get("pg_operator_sessions_peak"), 4, inclusive=True))],
        ["PostgreSQL sessions opened", _fixed(scale.get("pg_sessions_opened_per_second"), 2, " /s"),
         "—", "—"],
        ["Status patches", _fixed(patches, 2, " /s"),
         "only on change: 0 while every view is idle",
         _verdict(None if patches is None else patches <= IDLE_PATCHES_PER_SECOND)],
        ["Reconcile passes", _fixed(scale.get("passes_per_second"), 1, " /s"), "—", "—"],
        ["Mean pass", _fixed(scale.get("mean_pass_seconds"), 3, " s"), "—", "—"],
        ["Spec change → candidate's SparkApplication",
         _fixed(scale.get("change_to_candidate_seconds"), 2, " s") + _slowest_of(scale),
         "< 2 s",
         _verdict(_below(scale.get("change_to_candidate_seconds"), 2))],
    ]
    return [*lines, *_table(["Figure", "Measured", "Goal", "Met"], rows), ""]


def _profile_section(replay: Json | None) -> list[str]:
    lines = ["## Where the time goes", ""]
    judged = [_goal_point(replay, name) for name in _shape_names(replay)] \
        if replay is not None else []
    shapes = [({**point, "shape": f"{point.get('shape', NA)} (linearity run)"}
               if which == "linearity" else point)
              for point, which in (found for found in judged if found is not None)
              if isinstance(point.get("profile"), dict)]
    if not shapes:
        return [*lines, "No profile in this run's results.", ""]
    lines += ["Mean seconds per steady batch of the runs the goals are judged on (the headline "
              "run, or the largest linearity run when the headline had a single batch), and of "
              "the Avro shapes' headline runs: the executors' staging job "
              "(Kafka read, JSON parse or Avro decoding and checks, the transform, COPY into "
              "the staging table, "
              "all in parallel), the merge transaction (each key's last row, the upsert into "
              "the index, the ledger row), and the rest of the interval between two ledger "
              "commits (Spark's offsets, planning and checkpoint). From the job's "
              "`dvjob timing` lines and the ledger's commit times. The ceilings are the "
              "batch's records over each phase's seconds: the rate that phase alone allows.",
              ""]
    header = ["Shape", "Batches", "Records per batch", "Seconds per batch", "Staging (s)",
              "Merge transaction (s)", "Other (s)", "Staging ceiling (ev/s)",
              "Merge ceiling (ev/s)", "Other ceiling (ev/s)"]
    rows = []
    for s in shapes:
        p: Json = s["profile"]
        found = {c.get("phase"): c.get("ceiling_events_per_s")
                 for c in s.get("ceilings") or [] if isinstance(c, dict)}
        records = p.get("records_per_batch", s.get("max_offsets_per_trigger"))
        rows.append([str(s.get("shape", NA)), _count(p.get("batches")), _count(records),
                     _fixed(p.get("seconds_per_batch"), 2), _fixed(p.get("staging_seconds"), 2),
                     _fixed(p.get("merge_transaction_seconds"), 2),
                     _fixed(p.get("other_seconds"), 2), _count(found.get("staging")),
                     _count(found.get("merge")), _count(found.get("other"))])
    lines += [*_table(header, rows), ""]
    notes = replay.get("profile_notes") if replay is not None else None
    if isinstance(notes, list):
        lines += [f"- {note}" for note in notes if isinstance(note, str)] + [""]
    return lines


FIRST_LOADS = (("bulk", "bulk merge (key dropped, rows inserted, key rebuilt)"),
               ("row_by_row", "row by row (INSERT ... ON CONFLICT into the keyed index)"))


def _first_load_section(replay: Json | None) -> list[str]:
    """The mirror replayed as one batch into an empty index, with the sink's bulk merge and
    without it, against the COPY of the same run."""
    loads = replay.get("first_load") if replay is not None else None
    if not isinstance(loads, dict):
        return []
    lines = ["## A first replay into an empty index", "",
             f"The mirror view's {_count(loads.get('events'))} events replayed as one batch "
             "into an empty index (no first-batch bound, `spark.derivedviews.firstBatchOffsets"
             "=0`), once with the sink's bulk merge (`dvjob/sinks/postgres/bulk.py`: the batch holds at "
             "least as many rows as an index no reader sees, so its primary key is dropped, "
             "each key's last row inserted and the key rebuilt, all in the batch's "
             "transaction) and once without it (`spark.derivedviews.bulkLoad=false`). The "
             "merge transaction's rows/s is set against COPY into a keyed table of the same "
             f"shape in the same run ({_count(loads.get('copy_ingest_rows_per_s'))} rows/s).",
             ""]
    header = ["Merge", "Staging (s)", "Merge transaction (s)", "Merge rows/s", "vs COPY",
              "Create to caught up (s)"]
    rows = []
    for key, label in FIRST_LOADS:
        run = loads.get(key)
        if isinstance(run, dict):
            rows.append([label, _fixed(run.get("staging_seconds"), 2),
                         _fixed(run.get("merge_transaction_seconds"), 2),
                         _count(run.get("merge_rows_per_s")),
                         _ratio(run.get("merge_ratio_vs_copy")),
                         _fixed(run.get("seconds_create_to_caught_up"), 1)])
    return [*lines, *_table(header, rows), ""]


# --- plots ------------------------------------------------------------------------------------

def _short(value: float) -> str:
    return f"{value / 1000:,.0f}k" if value >= 10_000 else f"{value:,.0f}"


def write_plots(replay: Json | None, out_dir: Path, ready: Json | None = None) -> list[Path]:
    """replay_rates.png, linearity.png and apply_to_ready.png, each only when the results
    hold its data."""
    import matplotlib

    matplotlib.use("Agg")  # before pyplot is imported: no display on servers and in CI

    import matplotlib.pyplot as plt
    from matplotlib.ticker import StrMethodFormatter

    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    parts = _ready_parts(ready) if ready is not None else []
    if parts:
        figure, axis = plt.subplots(figsize=(8, 3), dpi=120, layout="constrained")
        try:
            _ready_plot(axis, ready or {}, parts)
            figure.legend(loc="outside lower center", ncols=3, fontsize="x-small")
            figure.savefig(out_dir / READY_PNG, format="png")
            written.append(out_dir / READY_PNG)
        finally:
            plt.close(figure)
    if replay is None:
        return written
    shapes = _shapes(replay)
    if shapes:
        figure, axis = plt.subplots(figsize=(8, 4.5), dpi=120, layout="constrained")
        try:
            _rates_plot(axis, replay, shapes)
            axis.yaxis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))
            figure.legend(loc="outside lower center", ncols=3, fontsize="small")
            figure.savefig(out_dir / RATES_PNG, format="png")
            written.append(out_dir / RATES_PNG)
        finally:
            plt.close(figure)
    if _has_linearity_plot(replay):
        figure, axis = plt.subplots(figsize=(8, 4.5), dpi=120, layout="constrained")
        try:
            _linearity_plot(axis, _linearity(replay))
            axis.yaxis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))
            figure.legend(loc="outside lower center", ncols=2, fontsize="small")
            figure.savefig(out_dir / LINEARITY_PNG, format="png")
            written.append(out_dir / LINEARITY_PNG)
        finally:
            plt.close(figure)
    return written


def _rates_plot(axis: Axes, replay: Json, shapes: list[Json]) -> None:
    bars = [("ConsumerPerformance", "consumer_perf_events_per_s"),
            ("raw consume (Python)", "raw_consume_events_per_s"),
            ("COPY ingest (rows/s)", "copy_ingest_rows_per_s"),
            ("replay, steady", "replay_events_per_s_steady"),
            ("replay, incl. start-up", "replay_events_per_s_including_startup")]
    width = 0.8 / len(bars)
    for index, (label, key) in enumerate(bars):
        values = [_num(s.get(key)) for s in shapes]
        container = axis.bar([i + (index - (len(bars) - 1) / 2) * width
                              for i in range(len(shapes))],
                             [v or 0.0 for v in values], width, label=label,
                             color=f"C{index}")
        axis.bar_label(container, labels=[NA if v is None else _short(v) for v in values],
                       fontsize="x-small", padding=2)
    axis.set_xticks(range(len(shapes)), [str(s.get("shape", NA)) for s in shapes])
    axis.set_xlabel("view shape")
    axis.set_ylabel("events per second")
    axis.set_ylim(bottom=0)
    axis.margins(y=0.12)
    events = _num(replay.get("events_per_shape"))
    axis.set_title("Replay rate against its baselines"
                   + (f", {_millions(events)} events per shape" if events else ""))


def _ready_parts(ready: Json) -> list[tuple[str, float]]:
    """The median parts of apply to Ready in order, when every one of them was measured."""
    names, median = ready.get("part_names"), ready.get("median")
    if not isinstance(names, dict) or not isinstance(median, dict):
        return []
    parts = [(str(label), _num(median.get(key))) for key, label in names.items()]
    known = [(label, value) for label, value in parts if value is not None]
    return known if len(known) == len(parts) and known else []


def _ready_plot(axis: Axes, ready: Json, parts: list[tuple[str, float]]) -> None:
    left = 0.0
    for index, (label, seconds) in enumerate(parts):
        axis.barh([0], [max(seconds, 0.0)], left=left, color=f"C{index % 10}", label=label)
        left += max(seconds, 0.0)
    limit = _num(ready.get("goal_seconds"))
    if limit is not None:
        axis.axvline(limit, color="black", linestyle="--", linewidth=1)
        axis.annotate(f"goal {limit:g} s", (limit, 0.45), fontsize="x-small", ha="left",
                      xytext=(3, 0), textcoords="offset points")
    axis.set_yticks([])
    axis.set_xlabel("seconds from apply (median of each part)")
    axis.set_xlim(left=0)
    axis.set_title(f"Apply to Ready, {_count(ready.get('events'))} events")


def _linearity_plot(axis: Axes, series: dict[str, list[Json]]) -> None:
    seconds_axis = axis.twinx()
    sizes: set[float] = set()
    for index, (shape, points) in enumerate(series.items()):
        colour = f"C{index % 10}"
        rates = [(_num(p["events"]) or 0.0, _num(p.get("replay_events_per_s_steady")))
                 for p in points]
        known = [(x, y) for x, y in rates if y is not None]
        sizes.update(x for x, _ in known)
        axis.plot([x for x, _ in known], [y for _, y in known], color=colour, marker="o",
                  label=f"{shape}: steady rate")
        waits = [(_num(p["events"]) or 0.0, _num(p.get("seconds_create_to_caught_up")))
                 for p in points]
        known_waits = [(x, y) for x, y in waits if y is not None]
        seconds_axis.plot([x for x, _ in known_waits], [y for _, y in known_waits],
                          color=colour, marker="s", linestyle="--",
                          label=f"{shape}: create → caught up")
    axis.set_xscale("log", base=2)
    ticks = sorted(sizes)
    axis.set_xticks(ticks, [_millions(x) for x in ticks])
    axis.minorticks_off()
    axis.set_xlabel("events in the topic (millions, log₂ scale)")
    axis.set_ylabel("replay steady rate (events/s)")
    seconds_axis.set_ylabel("create → caught up (s, dashed)")
    axis.set_ylim(bottom=0)
    seconds_axis.set_ylim(bottom=0)
    axis.set_title("Replay steady rate and time to catch up, by topic size")


# --- script -----------------------------------------------------------------------------------

def _load(path: Path) -> Json | None:
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    if not isinstance(data, dict):
        raise SystemExit(f"{path}: expected a JSON object")
    return data


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("results_dir", type=Path)
    parser.add_argument("docs_dir", type=Path)
    args = parser.parse_args(argv)
    replay = _load(args.results_dir / REPLAY_FILE)
    ready = _load(args.results_dir / READY_FILE)
    ready_beside = _load(args.results_dir / READY_BESIDE_FILE)
    scale = _load(args.results_dir / SCALE_FILE)
    progress = _load(args.results_dir / PROGRESS_FILE)
    steady = [r for r in map(_load, steady_files(args.results_dir)) if r is not None]
    executors = [r for r in map(_load, executor_files(args.results_dir)) if r is not None]
    watch_file = args.results_dir / PROGRESS_WATCH_FILE
    watch = watch_file.read_text() if watch_file.exists() else None
    plots_dir = args.docs_dir / PLOTS_DIR
    written = write_plots(replay, plots_dir, ready) \
        if replay is not None or ready is not None else []
    for stale in (plots_dir / RATES_PNG, plots_dir / LINEARITY_PNG, plots_dir / READY_PNG):
        if stale not in written:  # an older run's plot must not sit beside this run's page
            stale.unlink(missing_ok=True)
    page = args.docs_dir / "performance.md"
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(render_markdown(replay, scale, ready, progress, watch, steady,
                                    ready_beside, executors))
    for path in [page, *written]:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
