"""benchmarks/report.py: performance.md from the results JSON, and its plots."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import cast

import pytest

from support.paths import REPO

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
X = "\u00d7"  # the multiplication sign after a ratio (spelt out for ruff's RUF001)


def load_report() -> ModuleType:
    """benchmarks/ is a folder of scripts, not a package: load the module from its file."""
    path = REPO / "benchmarks" / "report.py"
    spec = importlib.util.spec_from_file_location("benchmarks_report", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


report = load_report()


def shape(name: str, **overrides: object) -> dict[str, object]:
    base: dict[str, object] = {
        "shape": name, "description": f"{name} shape", "sql": "SELECT 1",
        "events": 1_000_000, "output_rows": 500, "batches": 4,
        "max_offsets_per_trigger": 1_000_000, "consumer_perf_events_per_s": 1_600_000,
        "consumer_perf_fetch_events_per_s": 1_750_000, "consumer_perf_mb_per_s": 170.5,
        "consumer_perf_rebalance_ms": 120, "consumer_perf_runs": [1_450_000, 1_600_000],
        "raw_consume_events_per_s": 250_000,
        "copy_ingest_rows_per_s": 180_000, "replay_events_per_s_steady": 60_000,
        "replay_events_per_s_including_startup": 40_000, "seconds_create_to_caught_up": 25.0,
        "ratio_vs_consumer_perf": 0.0375, "ratio_vs_raw": 0.24, "ratio_vs_copy": 0.33}
    base.update(overrides)
    return base


AGGREGATE_GOAL = {"baseline": "ConsumerPerformance", "at_least": 0.25, "ratio": 0.0375,
                  "needed_events_per_s": 400_000, "met": False}
MIRROR_GOAL = {"baseline": "COPY ingest", "at_least": 0.6, "ratio": 0.61,
               "needed_events_per_s": 108_000, "met": True}

REPLAY: dict[str, object] = {
    "measured_at": "2026-11-25T17:00:00Z",
    "machine": {"cpus": 2, "memory_gib": 23.4, "spark": "4.0.0", "postgres": "16.4",
                "kafka": "3.9.0"},
    "events_per_shape": 1_000_000,
    "shapes": [
        shape("aggregate", goal=AGGREGATE_GOAL, profile={
            "batches": 3, "records_per_batch": 250_000, "seconds_per_batch": 6.25,
            "staging_seconds": 4.5, "merge_transaction_seconds": 1.25, "other_seconds": 0.5},
            ceilings=[
                {"phase": "staging", "what": "the executors' staging job", "seconds": 4.5,
                 "ceiling_events_per_s": 55_556, "below_goal": True},
                {"phase": "merge", "what": "the merge transaction", "seconds": 1.25,
                 "ceiling_events_per_s": 200_000, "below_goal": True},
                {"phase": "other", "what": "the rest", "seconds": 0.5,
                 "ceiling_events_per_s": 500_000, "below_goal": False}]),
        # an older run's shape: no COPY baseline and no ratio against it
        shape("mirror", copy_ingest_rows_per_s=None, ratio_vs_copy=None, goal=MIRROR_GOAL,
              replay_events_per_s_steady=110_000),
    ],
    "linearity": [
        {"shape": "aggregate", "events": 4_000_000, "replay_events_per_s_steady": 52_500,
         "replay_events_per_s_including_startup": 45_000, "seconds_create_to_caught_up": 90.5,
         "ratio_vs_consumer_perf": 0.031, "ratio_vs_copy": 0.29, "batches": 8},
        {"shape": "aggregate", "events": 500_000, "replay_events_per_s_steady": 50_000,
         "replay_events_per_s_including_startup": 30_000, "seconds_create_to_caught_up": 16.0,
         "ratio_vs_consumer_perf": 0.029, "ratio_vs_copy": 0.28, "batches": 2,
         "consumer_perf_events_per_s": 900_000, "raw_consume_events_per_s": 170_000,
         "copy_ingest_rows_per_s": 150_000},
    ],
    "profile_notes": ["state store commits take 40 % of a batch"],
}

READY: dict[str, object] = {
    "measured_at": "2026-11-25T18:00:00Z", "events": 50_000, "partitions": 3,
    "history_age_seconds": 3600, "goal_seconds": 25.0,
    "operator": {"lag_poll_seconds": 5.0, "trigger_seconds": 1.0},
    "cutover": {"stable_for_seconds": 10, "max_lag_seconds": 10},
    "part_names": {"app_created": "apply → SparkApplication created",
                   "first_commit": "→ first ledger commit",
                   "ready": "→ Ready (alias switched)"},
    "runs": [{"parts": {"app_created": 2.0, "first_commit": 20.0, "ready": 12.0,
                        "total": 34.0}},
             {"parts": {"app_created": 3.0, "first_commit": 22.5, "ready": 11.0,
                        "total": 36.5}}],
    "median": {"app_created": 2.5, "first_commit": 21.25, "ready": 11.5, "total": 35.25,
               "first_batch_stage_seconds": 7.3, "first_batch_transaction_seconds": 0.02},
}

SCALE: dict[str, object] = {
    "views": 1000, "idle_measured_seconds": 300.4, "cpu_percent_of_one_core": 45.3,
    "rss_mb_peak": 230.0, "kafka_offset_requests_per_poll": 1.0,
    "pg_operator_sessions_peak": 4, "status_patches_per_second": 15.5,
    "change_to_candidate_seconds": 5.92,
}


def row(text: str, first_cell: str) -> str:
    """The table row whose first cell is `first_cell`."""
    return next(line for line in text.splitlines() if line.startswith(f"| {first_cell} |"))


def test_replay_table_shows_each_ratio_and_the_shape_s_goal() -> None:
    text = report.render_markdown(REPLAY, SCALE)
    section = text.split("## Replay rate")[1].split("## Linearity")[0]
    aggregate = row(section, "aggregate")
    for cell in ("1,000,000", "60,000", f"0.04{X}", f"0.33{X}", f"0.24{X}",
                 f"≥ 0.25{X} ConsumerPerformance", "**not met**", "40,000", "25.0"):
        assert f"| {cell} |" in aggregate
    mirror = row(section, "mirror")
    assert "| 110,000 |" in mirror
    assert f"| ≥ 0.60{X} COPY ingest | met |" in mirror
    assert mirror.count("| n/a |") == 1  # the ratio against the missing COPY baseline
    assert "](performance/replay_rates.png)" in text
    assert "2 CPUs, 23.4 GiB memory; Spark 4.0.0, PostgreSQL 16.4, Kafka 3.9.0" in text
    assert "2026-11-25T17:00:00Z" in text


def test_the_batch_job_ceiling_is_shown_beside_the_replay_and_judged() -> None:
    batch = {"spark_batch_events_per_s": 50_000, "spark_batch_seconds": [25.1, 20.0],
             "spark_batch_ranges_events_per_s": 80_000, "ratio_vs_spark_batch": 1.2,
             "ratio_vs_spark_batch_ranges": 0.75, "spark_batch_cold_events_per_s": 40_000,
             "ratio_vs_spark_batch_cold": 1.5, "spark_batch_job_parse_events_per_s": 48_000,
             "batch_goal": {"baseline": "Spark's batch job", "at_least": 1.0, "ratio": 1.2,
                            "needed_events_per_s": 50_000, "met": True}}
    replay = {**REPLAY, "batch_goal": {"baseline": "Spark's batch job", "at_least": 1.0,
                                       "ranges": 6},
              "shapes": [{**REPLAY["shapes"][0], **batch}, *REPLAY["shapes"][1:]]}
    text = report.render_markdown(replay, SCALE)
    section = text.split("## The ceiling")[1].split("\n## ")[0]
    aggregate = row(section, "aggregate")
    assert f"`aggregate` 1.50{X}" in section
    for cell in ("50,000", "25.1, 20.0", "40,000", "80,000", "48,000", "60,000", f"1.20{X}",
                 f"0.75{X}",
                 f"≥ 1.00{X} Spark's batch job", "met"):
        assert f"| {cell} |" in aggregate
    assert "| mirror |" not in section  # not measured against the batch job: not shown
    assert "split in 6" in section
    goals = text.split("## Goals")[1].split("\n## ")[0]
    assert f"| `aggregate` replay steady ≥ 1.00{X} Spark's batch job | 1.20{X} (60,000 ev/s) |" \
        in goals


def test_the_mirror_is_shown_beside_debezium_s_jdbc_sink_and_judged() -> None:
    sink = {"spark_batch_events_per_s": 50_000, "spark_batch_seconds": [25.1, 20.0],
            "jdbc_sink_events_per_s": 75_000, "jdbc_sink_events_per_s_including_startup": 62_500,
            "jdbc_sink_seconds": 16.0, "jdbc_sink_output_rows": 1_000_000,
            "ratio_vs_jdbc_sink": 0.8,
            "sink_goal": {"baseline": "Debezium's JDBC sink", "at_least": 1.0, "ratio": 0.8,
                          "needed_events_per_s": 75_000, "met": False}}
    mirror = next(s for s in REPLAY["shapes"] if s["shape"] == "mirror")
    replay = {**REPLAY, "sink_goal": {"baseline": "Debezium's JDBC sink", "at_least": 1.0,
                                      "tasks": 3, "batch_size": 10_000},
              "shapes": [{**s, **sink} if s is mirror else s for s in REPLAY["shapes"]]}
    text = report.render_markdown(replay, SCALE)
    section = text.split("## The ceiling")[1].split("\n## ")[0]
    assert "3 tasks and batches of 10,000 rows" in section
    table = section.split("JDBC sink steady")[1]
    mirror_row = row(table, "mirror")
    for cell in ("75,000", "62,500", "16.0", "1,000,000", "110,000", f"0.80{X}",
                 f"≥ 1.00{X} Debezium's JDBC sink", "**not met**"):
        assert f"| {cell} |" in mirror_row
    goals = text.split("## Goals")[1].split("\n## ")[0]
    assert (f"| `mirror` replay steady ≥ 1.00{X} Debezium's JDBC sink | 0.80{X} (110,000 ev/s) "
            "| 1,000,000 events, Debezium's JDBC sink on the same events | 75,000 ev/s |") \
        in goals


def test_baselines_are_shown_once_per_topic_size_smallest_first() -> None:
    text = report.render_markdown(REPLAY, None)
    section = text.split("## Baselines")[1].split("## Replay rate")[0]
    assert section.index("| 500,000 |") < section.index("| 1,000,000 |")
    assert "| 500,000 | 900,000 | n/a | n/a | n/a | n/a | 170,000 | 150,000 |" in section
    assert ("| 1,000,000 | 1,600,000 | 1,750,000 | 170.5 | 120 | 1,450,000, 1,600,000 | "
            "250,000 | 180,000 |") in section
    assert "| 4,000,000 |" in section  # a size with no baselines recorded still has its row


def test_goals_are_judged_and_an_unmet_goal_shows_what_bounds_it() -> None:
    text = report.render_markdown(REPLAY, None, READY)
    section = text.split("## Goals")[1].split("## Baselines")[0]
    aggregate = row(section, f"`aggregate` replay steady ≥ 0.25{X} ConsumerPerformance")
    assert f"| 0.04{X} (60,000 ev/s) |" in aggregate
    assert "| 400,000 ev/s | **not met** |" in aggregate
    assert row(section, f"`mirror` replay steady ≥ 0.60{X} COPY ingest").endswith("| met |")
    assert row(section, "Apply to Ready, 50,000-event topic < 25 s").endswith(
        "| 35.2 s (median) | runs: 2 | — | **not met** |")
    note = next(line for line in section.splitlines() if line.startswith("- `aggregate`"))
    assert "needs 400,000 ev/s" in note
    assert "batch of 250,000 records (6.25 s)" in note
    assert "merge 1.25 s (≤ 200,000 ev/s alone)" in note
    assert "the executors' staging job, whose ceiling 55,556 ev/s is 0.14" in note
    assert "the rest, whose" not in note  # above the goal on its own
    assert "- `mirror`" not in section  # met: nothing to explain
    ready = next(line for line in section.splitlines() if line.startswith("- Apply to Ready"))
    assert ("the largest parts are first ledger commit 21.25 s; Ready (alias switched) "
            "11.50 s; apply → SparkApplication created 2.50 s") in ready
    assert "leaves 15 s of the 25 s goal for everything else, which took 25.25 s" in ready


def test_a_goal_on_a_single_batch_headline_falls_back_to_the_largest_linearity_run() -> None:
    replay = {**REPLAY, "shapes": [shape("aggregate", replay_events_per_s_steady=None,
                                         goal={**AGGREGATE_GOAL, "ratio": None, "met": None})],
              "linearity": [{"shape": "aggregate", "events": 1_000_000, "batches": 4,
                             "max_offsets_per_trigger": 250_000,
                             "replay_events_per_s_steady": 450_000,
                             "goal": {**AGGREGATE_GOAL, "ratio": 0.28, "met": True},
                             "profile": {"batches": 3, "records_per_batch": 250_000,
                                         "seconds_per_batch": 0.5}}]}
    text = report.render_markdown(replay, None)
    section = text.split("## Goals")[1].split("## Base")[0]
    goal = row(section, f"`aggregate` replay steady ≥ 0.25{X} ConsumerPerformance")
    assert "batches of at most 250,000 (linearity run)" in goal
    assert goal.endswith("| met |")
    assert "| aggregate (linearity run) | 3 | 250,000 | 0.50 |" in text.split("## Where")[1]


def test_apply_to_ready_shows_each_part_per_run_and_its_median() -> None:
    text = report.render_markdown(None, None, READY)
    section = text.split("## Apply to Ready")[1].split("## One replay's progress")[0]
    assert "| Part | Run 1 (s) | Run 2 (s) | Median (s) |" in section
    assert "| apply → SparkApplication created | 2.00 | 3.00 | 2.50 |" in section
    assert "| apply → Ready (total) | 34.00 | 36.50 | 35.25 |" in section
    assert "lag poll 5.0 s, trigger 1.0 s" in section
    assert "stableForSeconds 10" in section
    assert "staging 7.30 s, merge transaction 0.02 s" in section
    assert "](performance/apply_to_ready.png)" in section


def test_one_replay_s_progress_shows_the_plot_and_the_first_lines_of_dv_watch() -> None:
    progress = {"events": 2_000_000, "lag_history_seconds": 2,
                "runs": [{"batches": 3, "parts": {"total": 61.24}}]}
    watch = "\n".join(f"line {i}\n  orders/0 1/2 (50.0%) - eta -" for i in range(40))
    text = report.render_markdown(None, None, None, progress, watch)
    section = text.split("## One replay's progress")[1].split("## 1,000 views")[0]
    assert "over 2,000,000 events" in section and "every 2 s" in section
    assert "3 batches; apply → Ready 61.2 s" in section
    assert "](performance/replay_progress.png)" in section
    assert "line 23\n```" in section and "line 24" not in section
    assert "orders/0" not in section


def test_linearity_rows_are_sorted_by_size_and_compared_largest_to_smallest() -> None:
    text = report.render_markdown(REPLAY, SCALE)
    section = text.split("## Linearity")[1].split("## Apply to Ready")[0]
    assert section.index("| aggregate | 500,000 |") < section.index("| aggregate | 4,000,000 |")
    assert (f"| aggregate | 4,000,000 | 52,500 | 45,000 | 90.5 | 8 | 0.03{X} | 0.29{X} |"
            in section)
    assert f"4M / 0.5M steady rate: 1.05{X}" in section
    assert "](performance/linearity.png)" in section
    assert "state store commits take 40 % of a batch" in text


def test_the_profile_table_shows_each_phase_of_a_batch_and_its_ceiling() -> None:
    text = report.render_markdown(REPLAY, None)
    section = text.split("## Where the time goes")[1]
    assert ("| aggregate | 3 | 250,000 | 6.25 | 4.50 | 1.25 | 0.50 | 55,556 | 200,000 | "
            "500,000 |") in section
    assert "| mirror |" not in section  # no profile in its results


def test_scale_table_judges_each_goal_and_shows_n_a_for_missing_figures() -> None:
    text = report.render_markdown(None, SCALE)
    assert "**not met**" in row(text, "Operator CPU")
    assert row(text, "Operator RSS (peak)").endswith("| met |")
    assert row(text, "Kafka end-offsets requests per lag poll").endswith("| met |")
    assert row(text, "PostgreSQL sessions of the operator (peak)").endswith("| met |")
    assert "**not met**" in row(text, "Status patches")  # an idle view's status changes not
    assert row(report.render_markdown(None, {**SCALE, "status_patches_per_second": 0.0}),
               "Status patches").endswith("| met |")
    assert "**not met**" in row(text, "Spec change → candidate's SparkApplication")
    assert "| n/a |" in row(text, "Mean pass")  # not in the input
    assert "simulated" in text
    assert "Warning" not in text


def test_a_job_side_error_is_shown_prominently() -> None:
    text = report.render_markdown(None, {**SCALE, "job_side_error": "RuntimeError('boom')"})
    assert "> **Warning: the simulated job side failed" in text
    assert "RuntimeError('boom')" in text


def test_missing_result_files_say_not_measured() -> None:
    text = report.render_markdown(None, None)
    assert text.count("Not measured in this run: run `make bench`.") == 9
    assert "No profile in this run's results." in text
    assert ".png" not in text


def test_an_old_run_without_linearity_or_profile_renders_without_them() -> None:
    text = report.render_markdown({"shapes": [{"shape": "aggregate"}], "linearity": []}, None)
    assert "No linearity points in this run's results." in text
    assert "linearity.png" not in text
    assert "No profile in this run's results." in text
    assert "| aggregate | n/a |" in text


def test_write_plots_writes_every_png(tmp_path: Path) -> None:
    written = report.write_plots(REPLAY, tmp_path / "performance", READY)
    assert [p.name for p in written] == ["apply_to_ready.png", "replay_rates.png",
                                         "linearity.png"]
    for path in written:
        assert path.read_bytes().startswith(PNG_SIGNATURE)


def test_main_writes_the_page_and_removes_a_stale_plot(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    results, docs = tmp_path / "results", tmp_path / "docs"
    results.mkdir()
    (results / "bench_replay.json").write_text(json.dumps({**REPLAY, "linearity": []}))
    (docs / "performance").mkdir(parents=True)
    (docs / "performance" / "linearity.png").write_bytes(PNG_SIGNATURE)  # an older run's
    assert report.main([str(results), str(docs)]) == 0
    page = (docs / "performance.md").read_text()
    assert "| aggregate | 1,000,000 | 60,000 |" in page
    assert "Not measured in this run" in page.split("## Apply to Ready")[1]
    assert "Not measured in this run" in page.split("## 1,000 views")[1]
    assert (docs / "performance" / "replay_rates.png").read_bytes().startswith(PNG_SIGNATURE)
    assert not (docs / "performance" / "linearity.png").exists()
    assert "performance.md" in capsys.readouterr().out


def test_every_steady_cost_result_is_found_fewer_views_first_the_node_last(
        tmp_path: Path) -> None:
    names = ["steady_cost_node.json", "steady_cost_10views.json", "steady_cost_long.json",
             "steady_cost.json",
             "steady_cost_5views.json", "steady_cost_10views_node.json", "bench_replay.json"]
    for name in names:
        (tmp_path / name).write_text("{}")
    several = report._steady_row({"views": 10, "applied": "one after another"})
    assert several[0] == "10 (one after another)"
    assert report._steady_row({"views": 1, "applied": "one after another"})[0] == "1"
    assert [p.name for p in report.steady_files(tmp_path)] == [
        "steady_cost.json", "steady_cost_long.json", "steady_cost_5views.json",
        "steady_cost_10views.json", "steady_cost_node.json", "steady_cost_10views_node.json"]


def test_a_first_load_shows_both_merges_against_the_run_s_copy() -> None:
    loads = {"events": 1_000_000, "copy_ingest_rows_per_s": 250_000,
             "bulk": {"staging_seconds": 9.5, "merge_transaction_seconds": 5.0,
                      "merge_rows_per_s": 200_000, "merge_ratio_vs_copy": 0.8,
                      "seconds_create_to_caught_up": 31.25},
             "row_by_row": {"staging_seconds": 9.4, "merge_transaction_seconds": 8.0,
                            "merge_rows_per_s": 125_000, "merge_ratio_vs_copy": 0.5,
                            "seconds_create_to_caught_up": 34.0}}
    text = report.render_markdown({**REPLAY, "first_load": loads}, None)
    section = text.split("## A first replay into an empty index")[1]
    assert "The mirror view's 1,000,000 events" in section
    assert "(250,000 rows/s)" in section
    assert (f"| 9.50 | 5.00 | 200,000 | 0.80{X} | 31.2 |"
            in row(section, "bulk merge (key dropped, rows inserted, key rebuilt)"))
    assert f"| 8.00 | 125,000 | 0.50{X} | 34.0 |" in row(section, "row by row (INSERT ... ON "
                                                         "CONFLICT into the keyed index)")
    assert "## A first replay into an empty index" not in report.render_markdown(REPLAY, None)


AVRO_SCHEMA = {"type": "record", "name": "OrderEvent", "fields": [
    {"name": "order_id", "type": "string"}]}
AVRO_REPLAY: dict[str, object] = {
    **REPLAY,
    "shapes": [*cast(list[object], REPLAY["shapes"]),
               shape("aggregate-avro", format="avro", twin="aggregate", goal=None,
                     consumer_perf_events_per_s=1_700_000, consumer_perf_mb_per_s=80.25,
                     replay_events_per_s_steady=75_000, ratio_vs_json=1.25,
                     ratio_vs_consumer_perf=0.044, ratio_vs_copy=0.42,
                     replay_events_per_s_including_startup=50_000),
               shape("mirror-avro", format="avro", twin="mirror", goal=None,
                     replay_events_per_s_steady=None, ratio_vs_json=None)],
    "avro": {"reader_schema": AVRO_SCHEMA, "events": 1_000_000},
}


def test_avro_rows_sit_beside_their_json_twins_against_the_same_baselines() -> None:
    text = report.render_markdown(AVRO_REPLAY, None)
    section = text.split("## Avro against JSON")[1].split("## Linearity")[0]
    assert "the same 1,000,000 order events as their JSON twins" in section
    assert "Confluent wire format" in section and "`source.format: avro`" in section
    assert "measured at one size, 1,000,000 events" in section  # not along the curve
    assert '`{"type":"record","name":"OrderEvent","fields":' in section
    assert (f"| aggregate-avro | 1,000,000 | 60,000 | 75,000 | 1.25{X} | 0.04{X} · 0.04{X} | "
            f"0.33{X} · 0.42{X} | 170.5 · 80.2 | 40,000 · 50,000 |") in section
    assert row(section, "mirror-avro").startswith(
        "| mirror-avro | 1,000,000 | 110,000 | n/a | n/a |")
    replay_table = text.split("## Replay rate")[1].split("## Avro against JSON")[0]
    assert "| aggregate-avro | 1,000,000 | 75,000 |" in replay_table
    assert row(replay_table, "aggregate-avro").endswith("| n/a | n/a | 50,000 | 25.0 |")
    goals = text.split("## Goals")[1].split("## Baselines")[0]
    assert "-avro" not in goals  # the goals are the JSON shapes'
    baselines = text.split("## Baselines")[1].split("## Replay rate")[0]
    assert "once on the Avro topic of the same events" in baselines
    assert row(baselines, "1,000,000, Avro topic").startswith(
        "| 1,000,000, Avro topic | 1,700,000 |")
    assert "| aggregate-avro | 3 | 250,000 | 6.25 |" not in text  # no profile of its own


def test_a_run_without_avro_has_no_avro_section() -> None:
    text = report.render_markdown(REPLAY, None)
    assert "## Avro against JSON" not in text
    assert "Avro topic" not in text


STEADY = {"views": 1, "rate_per_view": 150.0, "trigger_seconds": 5.0, "warmup_seconds": 30.0,
          "goal": {"cores": 0.1, "rss_mb": 400.0}, "cores_per_view_mean": 0.0812,
          "rss_mb_per_view_max": 380.4, "pss_mb_per_view_mean": 350.2,
          "kafka_broker": {"cores": 0.07}, "gate_held": True}


def test_a_serving_views_cost_is_judged_on_cores_memory_and_the_gate() -> None:
    text = report.render_markdown(None, None, steady=[
        STEADY, {**STEADY, "views": 10, "rss_mb_per_view_max": 512.0},
        {**STEADY, "node": True, "rss_mb_per_view_max": 401.0},
        {**STEADY, "rss_mb_per_view_max": 450.0, "image_rss_mb_per_view_max": 310.0}])
    rows = [line for line in text.splitlines() if line.startswith("| 1 |")
            or line.startswith("| 10 |")]
    assert rows[0] == ("| 1 | stand-in | Ready + 30 s | 150 ev/s | 5.0 s | 0.081 | 380 MB | "
                       "350 MB | 0.070 | yes | ≤ 0.10 core, ≤ 400 MB | met |")
    assert rows[1].endswith("| **not met** |")  # 512 MB resident: over the goal
    assert rows[2].startswith(
        "| 1 | real node | Ready + 30 s | 150 ev/s | 5.0 s | 0.081 | 401 MB |")
    assert rows[2].endswith("| **not met** |")
    # judged with the stand-in's class archive: the image holds those classes too
    assert "| 450 MB |" in rows[3] and rows[3].endswith("| **not met** |")
    held_not = report.render_markdown(None, None, steady=[{**STEADY, "gate_held": False}])
    assert "| no | ≤ 0.10 core, ≤ 400 MB | **not met** |" in held_not


def test_where_a_views_memory_goes_is_shown_for_runs_that_recorded_it() -> None:
    memory = {"jvm_rss_mb": 497.0, "heap_committed_mb": 160.2, "heap_used_mb": 120.0,
              "metaspace_mb": 156.4, "jvm_rest_mb": 180.4, "jvm_threads": 217,
              "python_rss_mb": 80.4}
    node = {**STEADY, "node": True, "per_view": {"steady-0": {"memory_at_peak": memory}}}
    text = report.render_markdown(None, None, steady=[STEADY, node])
    assert ("| 1 | real node | Ready + 30 s | 497 MB | 160 MB (120 MB) | 156 MB | 180 MB | 217 "
            "| 80 MB |"
            in text.splitlines())
    assert "Where one view's resident memory goes" in text
    assert "Where one view's" not in report.render_markdown(None, None, steady=[STEADY])


def test_where_a_views_cores_go_is_shown_by_thread_group_with_its_store_share() -> None:
    groups = {"tasks": 0.031, "micro-batch thread": 0.029, "collector": 0.017,
              "compiler": 0.006, "other JVM threads": 0.012, "Python": 0.006,
              "exited threads and processes": 0.002, "pause": 0.0, "tini": 0.001}
    run = {**STEADY, "s3_store": {"share_per_view_cores": 0.006},
           "per_view": {"steady-0": {"cores": 0.075, "cores_by_thread": groups}}}
    text = report.render_markdown(None, None, steady=[run])
    assert ("| 1 | stand-in | Ready + 30 s | 0.031 | 0.029 | 0.017 | 0.006 | 0.012 | 0.006 | "
            "0.002 | 0.001 | 0.006 | 0.081 |") in text.splitlines()
    assert "Where one view's cores go" in text
    assert "Where one view's cores" not in report.render_markdown(None, None, steady=[STEADY])


def test_a_serving_views_cost_is_a_goal_row_and_an_unmet_one_says_where_it_goes() -> None:
    memory = {"jvm_rss_mb": 441.0, "heap_committed_mb": 120.0, "heap_used_mb": 100.0,
              "metaspace_mb": 51.0, "jvm_rest_mb": 270.0, "jvm_threads": 302,
              "python_rss_mb": 90.0}
    over = {**STEADY, "cores_per_view_mean": 0.135, "s3_store": {"share_per_view_cores": 0.02},
            "per_view": {"steady-0": {"memory_at_peak": memory, "cores_by_thread": {
                "tasks": 0.033, "collector": 0.012}}}}
    text = report.render_markdown(None, None, steady=[STEADY, over])
    goals = text.split("## Goals")[1].split("## ")[0]
    assert ("| A view serving 150 ev/s, gate held: ≤ 0.10 core, ≤ 400 MB | 0.081 core, 380 MB "
            "| stand-in, window from Ready + 30 s | — | met |") in goals.splitlines()
    long = report.render_markdown(None, None, steady=[{**over, "warmup_seconds": 600.0}])
    assert "| 0.135 core, 380 MB | stand-in, window from Ready + 10 min | — | **not met** |" \
        in long
    note = next(line for line in goals.splitlines() if line.startswith("- One view"))
    assert note.startswith("- One view serving on the stand-in: 0.135 core (tasks 0.033, "
                           "collector 0.012) with a checkpoint store share of 0.020; 380 MB")
    assert "class metadata 51 MB" in note and "302 threads" in note
    ten = report.render_markdown(None, None, steady=[{**STEADY, "views": 10,
                                                      "gate_held": False}])
    assert "| Each of 10 views serving 150 ev/s, gate held:" in ten
    assert "the gate was not held the whole window" in ten


def test_apply_to_ready_beside_a_serving_view_is_its_own_goal_row() -> None:
    beside = {**READY, "goal_seconds": 40.0,
              "beside_serving": {"rate": 150, "samples": 400, "not_ready_samples": 3}}
    text = report.render_markdown(None, None, READY, ready_beside=beside)
    section = text.split("## Goals")[1].split("## Baselines")[0]
    assert row(section, "Apply to Ready, 50,000-event topic < 25 s").endswith(
        "| 35.2 s (median) | runs: 2 | — | **not met** |")
    assert row(section, "Apply to Ready, 50,000-event topic beside a view serving 150 ev/s "
                        "< 40 s").endswith(
        "| 35.2 s (median) | runs: 2; the serving view Ready in 397 of 400 samples | — | met |")


def executors_run(executors: int, caught_up: str, load: float = 1.5) -> dict[str, object]:
    """An apply_to_ready.py --node --replay-executors result, its marks as the script writes
    them (ISO text with the zone)."""
    return {"events": 2_000_000, "partitions": 3, "node": True, "replay_executors": executors,
            "cpus": 2, "load_average_1m": load,
            "runs": [{"batches": 3, "marks": {
                "applied": "2026-12-07T03:00:00+00:00",
                "app_created": "2026-12-07T03:01:30+00:00",  # the steady job's: not used
                "first_commit": "2026-12-07T03:00:20.500000+00:00",
                "caught_up_commit": caught_up,
                "ready": "2026-12-07T03:02:00+00:00"}}]}


def test_a_replay_s_executors_are_judged_on_apply_to_caught_up_each_count_faster() -> None:
    falls = [executors_run(1, "2026-12-07T03:01:20+00:00"),
             executors_run(2, "2026-12-07T03:00:50+00:00")]
    text = report.render_markdown(None, None, executors=falls)
    goals = text.split("## Goals")[1].split("## ")[0]
    assert row(goals, "A replay's time falls with its executors, then it serves at the steady "
                      "size").endswith("| apply → caught up, by executors: 1: 80.0 s; 2: 50.0 s "
                                       "| real node, 2,000,000 events | — | met |")
    section = text.split("## A replay sized apart from serving")[1].split("## ")[0]
    # batches, apply -> first commit, first -> caught up, apply -> caught up, -> Ready, total
    assert row(section, "2") == ("| 2 | 3 | 20.5 | 29.5 | 50.0 | 70.0 | 120.0 | 2 | 1.50 |")
    same = [executors_run(1, "2026-12-07T03:01:00+00:00"),
            executors_run(2, "2026-12-07T03:01:05+00:00", load=3.9)]
    unmet = report.render_markdown(None, None, executors=same)
    assert "| real node, 2,000,000 events | — | **not met** |" in unmet
    note = next(line for line in unmet.splitlines() if line.startswith("- Replay executors"))
    assert "1: 60.0 s; 2: 65.0 s" in note and "2 CPUs" in note and "3.90" in note
    one = report.render_markdown(None, None, executors=same[:1])
    assert "| real node, 2,000,000 events | — | n/a |" in one
    unfinished = {**same[1], "node": False, "runs": [{"marks": {"applied": "not a time"}}]}
    stand_in = report.render_markdown(None, None, executors=[same[0], unfinished])
    assert "| apply → caught up, by executors: 1: 60.0 s; 2: n/a | stand-in, 2,000,000 " \
        "events | — | n/a |" in stand_in
    assert "## A replay sized apart from serving" not in report.render_markdown(None, None)


def test_replay_executor_results_are_found_fewer_executors_first(tmp_path: Path) -> None:
    for name in ["replay_executors_10.json", "replay_executors_2.json",
                 "replay_executors_1.json", "apply_to_ready.json"]:
        (tmp_path / name).write_text("{}")
    assert [p.name for p in report.executor_files(tmp_path)] == [
        "replay_executors_1.json", "replay_executors_2.json", "replay_executors_10.json"]
