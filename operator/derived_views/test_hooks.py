"""Test hooks: hold the operator at one precise point so a fault test can kill it there.

Off by default: a hook does nothing unless its environment variable names a
file, and then only while a test has *armed* that file.  The first process to
reach the point takes the file (an atomic rename to `<file>.held`, holding its
pid), then waits until `<file>.release` exists or ten minutes pass.  A test
arms the file, waits for `.held`, and kills the process, or releases it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

HOLD_BEFORE_SWITCH = "DV_TEST_HOOK_HOLD_BEFORE_SWITCH"
"""Between the recorded intent and the alias switch (the cutover's crash window)."""

MAX_HOLD_SECONDS = 600.0


def hold(variable: str, who: str = "") -> None:
    """Wait at this point if the file named by `variable` is armed (for `who`, or for anyone
    when it is armed empty)."""
    name = os.environ.get(variable)
    if not name:
        return
    armed = Path(name)
    try:
        wanted = armed.read_text().strip()
    except FileNotFoundError:
        return
    if wanted and wanted != who:
        return
    held = Path(f"{name}.held")
    try:
        armed.rename(held)  # one process takes it
    except FileNotFoundError:
        return
    held.write_text(f"{os.getpid()}\n")
    release = Path(f"{name}.release")
    deadline = time.monotonic() + MAX_HOLD_SECONDS
    while not release.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
