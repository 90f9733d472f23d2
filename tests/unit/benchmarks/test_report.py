"""benchmarks/report.py: performance.md from the results JSON, and its plots."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
X = "\u00d7"  # the multiplication sign after a ratio (spelt out for ruff's RUF001)


def load_report() -> ModuleType:
    """benchmarks/ is a folder of scripts, not a package: load the module from its file."""
    path = Path(__file__).resolve().parents[3] / "benchmarks" / "report.py"
    spec = importlib.util.spec_from_file_location("benchmarks_report", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


report = load_report()


def shape(name: str, ratio_vs_min: float, **overrides: object) -> dict[str, object]:
    base: dict[str, object] = {
        "shape": name, "description": f"{name} shape", "sql": "SELECT 1",
        "events": 1_000_000, "output_rows": 500, "batches": 4,
        "max_offsets_per_trigger": 1_000_000, "raw_consume_events_per_s": 250_000,
        "copy_ingest_rows_per_s": 180_000, "replay_events_per_s_steady": 60_000,
        "replay_events_per_s_including_startup": 40_000, "seconds_create_to_caught_up": 25.0,
        "ratio_vs_raw": 0.24, "ratio_vs_copy": 0.33, "ratio_vs_min": ratio_vs_min}
    base.update(overrides)
    return base


REPLAY: dict[str, object] = {
    "measured_at": "2026-11-25T17:00:00Z",
    "machine": {"cpus": 2, "memory_gib": 23.4, "spark": "4.0.0", "postgres": "16.4",
                "kafka": "3.9.0"},
    "events_per_shape": 1_000_000,
    "shapes": [
        shape("aggregate", 0.33, profile={
            "batches": 3, "seconds_per_batch": 6.25, "staging_seconds": 4.5,
            "merge_transaction_seconds": 1.25, "other_seconds": 0.5}),
        # an older run's shape: no COPY baseline and no ratio against it
        shape("mirror", 0.61, copy_ingest_rows_per_s=None, ratio_vs_copy=None,
              replay_events_per_s_steady=110_000),
    ],
    "linearity": [
        {"shape": "aggregate", "events": 4_000_000, "replay_events_per_s_steady": 52_500,
         "replay_events_per_s_including_startup": 45_000, "seconds_create_to_caught_up": 90.5,
         "ratio_vs_min": 0.31, "batches": 8},
        {"shape": "aggregate", "events": 500_000, "replay_events_per_s_steady": 50_000,
         "replay_events_per_s_including_startup": 30_000, "seconds_create_to_caught_up": 16.0,
         "ratio_vs_min": 0.29, "batches": 2},
    ],
    "profile_notes": ["state store commits take 40 % of a batch"],
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


def test_replay_table_formats_the_input_numbers_and_judges_the_goal() -> None:
    text = report.render_markdown(REPLAY, SCALE)
    aggregate = row(text, "aggregate")
    for cell in ("1,000,000", "250,000", "180,000", "60,000", "40,000", "25.0", f"0.24{X}",
                 f"0.33{X}"):
        assert f"| {cell} |" in aggregate
    assert "| **not met** |" in aggregate  # 0.33 < 0.5
    mirror = row(text, "mirror")
    assert "| 110,000 |" in mirror
    assert f"| 0.61{X} | met |" in mirror
    assert mirror.count("| n/a |") == 2  # the COPY rate and the ratio against it
    assert "](performance/replay_rates.png)" in text
    assert "2 CPUs, 23.4 GiB memory; Spark 4.0.0, PostgreSQL 16.4, Kafka 3.9.0" in text
    assert "2026-11-25T17:00:00Z" in text


def test_linearity_rows_are_sorted_by_size_and_compared_largest_to_smallest() -> None:
    text = report.render_markdown(REPLAY, SCALE)
    section = text.split("## Linearity")[1].split("## 1,000 views")[0]
    assert section.index("| aggregate | 500,000 |") < section.index("| aggregate | 4,000,000 |")
    assert f"| aggregate | 4,000,000 | 52,500 | 45,000 | 90.5 | 8 | 0.31{X} |" in section
    assert f"4M / 0.5M steady rate: 1.05{X}" in section
    assert "](performance/linearity.png)" in section
    assert "state store commits take 40 % of a batch" in text


def test_the_profile_table_shows_each_phase_of_a_batch() -> None:
    text = report.render_markdown(REPLAY, None)
    section = text.split("## Where the time goes")[1]
    assert "| aggregate | 3 | 1,000,000 | 6.25 | 4.50 | 1.25 | 0.50 |" in section
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
    assert text.count("Not measured in this run: run `make bench`.") == 3
    assert "No profile in this run's results." in text
    assert ".png" not in text


def test_an_old_run_without_linearity_or_profile_renders_without_them() -> None:
    text = report.render_markdown({"shapes": [{"shape": "aggregate"}], "linearity": []}, None)
    assert "No linearity points in this run's results." in text
    assert "linearity.png" not in text
    assert "No profile in this run's results." in text
    assert "| aggregate | n/a |" in text


def test_write_plots_writes_both_pngs(tmp_path: Path) -> None:
    written = report.write_plots(REPLAY, tmp_path / "performance")
    assert [p.name for p in written] == ["replay_rates.png", "linearity.png"]
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
    assert "| aggregate | 1,000,000 | 250,000 |" in page
    assert "Not measured in this run" in page.split("## 1,000 views")[1]
    assert (docs / "performance" / "replay_rates.png").read_bytes().startswith(PNG_SIGNATURE)
    assert not (docs / "performance" / "linearity.png").exists()
    assert "performance.md" in capsys.readouterr().out
