"""The failpoints of the operator and the job: off without a file, inert unless armed, hold
once, release."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from derived_views.process import failpoints as operator_failpoints
from dvjob import failpoints as job_failpoints

Hold = Callable[[str, str], None]


@pytest.fixture(params=["operator", "job"])
def hold(request: pytest.FixtureRequest) -> Hold:
    kind = operator_failpoints.Failpoint if request.param == "operator" else \
        job_failpoints.Failpoint
    return lambda path, who: kind(path).hold(who)


def test_an_unarmed_failpoint_does_not_hold(hold: Hold, tmp_path: Path) -> None:
    hold(str(tmp_path / "hook"), "rev-a")  # returns at once: nothing armed
    assert list(tmp_path.iterdir()) == []


def test_a_failpoint_armed_for_another_process_does_not_hold(hold: Hold, tmp_path: Path
                                                             ) -> None:
    armed = tmp_path / "hook"
    armed.write_text("rev-b")
    hold(str(armed), "rev-a")
    assert armed.read_text() == "rev-b"  # still armed, for the other one


def test_an_armed_failpoint_holds_once_until_released(hold: Hold, tmp_path: Path) -> None:
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


def test_the_operator_reads_its_failpoints_once_and_they_are_off_by_default(
        tmp_path: Path) -> None:
    assert operator_failpoints.Failpoints.from_env({}).before_switch.path is None
    armed = tmp_path / "hook"
    points = operator_failpoints.Failpoints.from_env(
        {operator_failpoints.BEFORE_SWITCH_ENV: str(armed)})
    assert points.before_switch.path == str(armed)
    operator_failpoints.Failpoints().before_switch.hold()  # off: returns at once
