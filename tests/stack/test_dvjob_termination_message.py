"""The replay job leaves its one-line cause where Kubernetes carries it: the termination message."""

from __future__ import annotations

from pathlib import Path

import pytest

from dvjob.errors import write_termination_message
from dvjob.main import main


def test_the_message_goes_to_the_given_path_clipped_to_4_kib(tmp_path: Path) -> None:
    path = tmp_path / "termination-log"
    write_termination_message("batch 18: a row has NULL", {"DV_TERMINATION_MESSAGE_PATH": str(path)})
    assert path.read_text() == "batch 18: a row has NULL"
    write_termination_message("é" * 3000, {"DV_TERMINATION_MESSAGE_PATH": str(path)})
    assert path.read_text() == "é" * 2048  # 4096 bytes, no character cut in half


def test_an_unwritable_or_absent_path_is_ignored(tmp_path: Path) -> None:
    write_termination_message("x", {"DV_TERMINATION_MESSAGE_PATH": str(tmp_path / "no" / "dir")})
    # Without the variable only an existing /dev/termination-log (a kubelet's mount) is used.
    if not Path("/dev/termination-log").exists():
        write_termination_message("x", {})
        assert not Path("/dev/termination-log").exists()


def test_a_config_error_is_the_last_line_and_the_termination_message(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "termination-log"
    monkeypatch.setenv("DV_TERMINATION_MESSAGE_PATH", str(path))
    assert main(["--config-json", "{not json"]) == 2
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("dvjob: error: ")
    assert path.read_text() == last.removeprefix("dvjob: error: ")
