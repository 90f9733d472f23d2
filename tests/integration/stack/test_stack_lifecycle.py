"""`dvstack up` on a running stack reuses every process instead of restarting it."""

from __future__ import annotations

import subprocess
import sys

from dvstack import processes
from dvstack.cli import components
from dvstack.settings import load


def test_up_again_reuses_running_components() -> None:
    settings = load()
    names = tuple(n for n in components(settings) if n != "postgres")
    assert "s3proxy" in names
    before = {n: processes.running(settings, n) for n in names}
    assert all(before.values()), f"stack not fully up: {before}"
    again = subprocess.run([sys.executable, "-m", "dvstack", "up"], capture_output=True,
                           text=True, check=False)
    assert again.returncode == 0, f"dvstack up again failed:\n{again.stdout}\n{again.stderr}"
    after = {n: processes.running(settings, n) for n in names}
    assert after == before
