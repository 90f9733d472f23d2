"""The test hooks of the operator and the job: inert unless armed, hold once, release."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from derived_views import test_hooks as operator_hooks
from dvjob import test_hooks as job_hooks

Hold = Callable[[str, str], None]


def _operator_hold(monkeypatch: pytest.MonkeyPatch) -> Hold:
    def hold(path: str, who: str) -> None:
        monkeypatch.setenv(operator_hooks.HOLD_BEFORE_SWITCH, path)
        operator_hooks.hold(operator_hooks.HOLD_BEFORE_SWITCH, who)
    return hold


@pytest.fixture(params=["operator", "job"])
def hold(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Hold:
    return _operator_hold(monkeypatch) if request.param == "operator" else job_hooks.hold


def test_an_unarmed_hook_does_not_hold(hold: Hold, tmp_path: Path) -> None:
    hold(str(tmp_path / "hook"), "rev-a")  # returns at once: nothing armed
    assert list(tmp_path.iterdir()) == []


def test_a_hook_armed_for_another_process_does_not_hold(hold: Hold, tmp_path: Path) -> None:
    armed = tmp_path / "hook"
    armed.write_text("rev-b")
    hold(str(armed), "rev-a")
    assert armed.read_text() == "rev-b"  # still armed, for the other one


def test_an_armed_hook_holds_once_until_released(hold: Hold, tmp_path: Path) -> None:
    armed = tmp_path / "hook"
    armed.write_text("rev-a")
    holder = threading.Thread(target=hold, args=(str(armed), "rev-a"))
    holder.start()
    held = tmp_path / "hook.held"
    holder.join(timeout=0.5)
    assert holder.is_alive() and held.is_file() and not armed.exists()
    assert held.read_text().strip() == str(os.getpid())
    (tmp_path / "hook.release").write_text("")
    holder.join(timeout=10)
    assert not holder.is_alive()
    hold(str(armed), "rev-a")  # taken: a second arrival (a restarted process) passes


def test_the_operator_hook_is_off_without_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(operator_hooks.HOLD_BEFORE_SWITCH, raising=False)
    operator_hooks.hold(operator_hooks.HOLD_BEFORE_SWITCH)
