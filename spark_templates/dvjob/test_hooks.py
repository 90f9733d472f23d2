"""Test hooks: hold the job at one precise point so a fault test can kill its driver there.

Off by default: the hook does nothing unless the Spark configuration key
`spark.derivedviews.testHook.holdBeforeCommit` names a file, and then only
while a test has *armed* that file with this job's revision (or empty, for any
job).  The first job to reach the point takes the file (an atomic rename to
`<file>.held`, holding its pid) and waits until `<file>.release` exists or
ten minutes pass.  The operator's twin is derived_views.test_hooks.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

HOLD_BEFORE_COMMIT_CONF = "spark.derivedviews.testHook.holdBeforeCommit"
"""Between a batch's COPY (and upsert, ledger row) and its transaction's commit."""

MAX_HOLD_SECONDS = 600.0


def hold(path: str | None, who: str) -> None:
    """Wait here if the file at `path` is armed for `who` or for anyone."""
    if not path:
        return
    armed = Path(path)
    try:
        wanted = armed.read_text().strip()
    except FileNotFoundError:
        return
    if wanted and wanted != who:
        return
    held = Path(f"{path}.held")
    try:
        armed.rename(held)  # one process takes it
    except FileNotFoundError:
        return
    held.write_text(f"{os.getpid()}\n")
    release = Path(f"{path}.release")
    deadline = time.monotonic() + MAX_HOLD_SECONDS
    while not release.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
