"""dvstack.testing.termination: a benchmark ended by a signal still runs its clean-up."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dvstack.testing.waiting import wait_for

SCRIPT = """
import sys, time
from pathlib import Path
from dvstack.testing.termination import clean_up_on_signals
clean_up_on_signals()
marker = Path(sys.argv[1])
try:
    marker.with_suffix(".started").write_text("")
    while True:
        time.sleep(0.05)
finally:
    marker.write_text("cleaned up")
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_runs_the_finally_blocks_and_exits_as_a_shell_reports_it(
        tmp_path: Path, signum: signal.Signals) -> None:
    marker = tmp_path / "marker"
    process = subprocess.Popen([sys.executable, "-c", SCRIPT, str(marker)])
    try:
        wait_for(marker.with_suffix(".started").exists, timeout=30, what="the script's try")
        process.send_signal(signum)
        assert process.wait(timeout=30) == 128 + signum
    finally:
        process.kill()
    assert marker.read_text() == "cleaned up"
