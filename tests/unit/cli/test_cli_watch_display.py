"""`dv watch` output: redrawn bars on a terminal, plain lines elsewhere (logs, CI)."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console

from derived_views.api.status import DerivedViewStatus
from derived_views.cli import app


def status(lag_0: int, read: int | None = None, eta: int | None = None,
           estimated: bool | None = None) -> DerivedViewStatus:
    lag: dict[str, Any] = {"messages": lag_0, "partitions": {"t/0": lag_0, "t/1": 0},
                           "endOffsets": {"t/0": 1000, "t/1": 500}, "batchRead": read,
                           "etaSeconds": eta, "etaEstimated": estimated}
    return DerivedViewStatus.model_validate({
        "phase": "Backfilling", "revision": "bb",
        "candidate": {"revision": "bb", "index": "v__bb", "phase": "Backfilling",
                      "since": "2026-03-01T12:00:00Z", "lag": lag}})


def capture(monkeypatch: pytest.MonkeyPatch, terminal: bool) -> io.StringIO:
    buffer = io.StringIO()
    monkeypatch.setattr(app, "out", Console(file=buffer, force_terminal=terminal, width=120))
    return buffer


def test_plain_lines_only_when_progress_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    buffer = capture(monkeypatch, terminal=False)
    display = app._PlainProgress()
    display.show(status(400))
    display.show(status(400))  # unchanged: nothing printed
    assert buffer.getvalue().splitlines() == [
        "phase Backfilling revision bb: 1100/1500 (73.3%) - eta -",
        "  t/0 600/1000 (60.0%) - eta -",
        "  t/1 500/500 (100.0%) - eta 0s",
    ]


def test_terminal_bars_per_partition(monkeypatch: pytest.MonkeyPatch) -> None:
    buffer = capture(monkeypatch, terminal=True)
    display = app._LiveProgress()
    display.show(status(400))
    display.show(status(100))
    display.close()
    text = buffer.getvalue()
    assert "bb t/0" in text
    assert "900/1000" in text
    assert "500/500" in text


def test_a_running_batch_s_reads_move_the_plain_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before its first commit a replay shows what its running batch has read, with the
    operator's ETA; each new count prints again."""
    buffer = capture(monkeypatch, terminal=False)
    display = app._PlainProgress()
    display.show(status(1000, read=100, eta=45))
    display.show(status(1000, read=400, eta=15))
    assert buffer.getvalue().splitlines() == [
        "phase Backfilling revision bb: 500/1500 (33.3%) - eta 45s",
        "  running batch has read 100 of the 1,000 records not yet committed (10.0%), eta 45s",
        "  t/0 0/1000 (0.0%) - eta -",
        "  t/1 500/500 (100.0%) - eta 0s",
        "phase Backfilling revision bb: 500/1500 (33.3%) 0.0 msg/s eta 15s",
        "  running batch has read 400 of the 1,000 records not yet committed (40.0%), eta 15s",
        "  t/0 0/1000 (0.0%) 0.0 msg/s eta -",
        "  t/1 500/500 (100.0%) 0.0 msg/s eta 0s",
    ]


def test_terminal_shows_a_bar_of_what_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    buffer = capture(monkeypatch, terminal=True)
    display = app._LiveProgress()
    display.show(status(1000, read=400, eta=15))
    display.close()
    text = buffer.getvalue()
    assert "bb read, not yet committed" in text
    assert "900/1500" in text


def test_before_the_first_commit_the_estimate_is_shown_and_said(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A candidate's first seconds: nothing committed, nothing read, the operator's ETA is its
    build's estimate."""
    buffer = capture(monkeypatch, terminal=False)
    display = app._PlainProgress()
    display.show(status(1000, eta=125, estimated=True))
    assert buffer.getvalue().splitlines()[0] == (
        "phase Backfilling revision bb: 500/1500 (33.3%) - eta ~2m05s (estimate)")


def test_the_terminal_bars_show_the_estimate_where_no_poll_measured(
        monkeypatch: pytest.MonkeyPatch) -> None:
    buffer = capture(monkeypatch, terminal=True)
    display = app._LiveProgress()
    display.show(status(1000, eta=125, estimated=True))
    display.close()
    assert "eta ~2m05s (estimate)" in buffer.getvalue()
