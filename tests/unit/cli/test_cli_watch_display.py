"""`dv watch` output: redrawn bars on a terminal, plain lines elsewhere (logs, CI)."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console

from derived_views.api.status import DerivedViewStatus
from derived_views.cli import app


def status(lag_0: int) -> DerivedViewStatus:
    lag: dict[str, Any] = {"messages": lag_0, "partitions": {"t/0": lag_0, "t/1": 0},
                           "endOffsets": {"t/0": 1000, "t/1": 500}}
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
