"""Failpoints: a place in the job where a fault test can hold it, to kill its driver there.

Off unless the Spark configuration key `spark.derivedviews.failpoint.beforeCommit`
names a file, and then inert until a test *arms* that file with this job's revision
(or empty, for any job). The first job to reach the point takes the file (an atomic
rename to `<file>.held`, holding its pid) and waits until `<file>.release` exists or
ten minutes pass. main.py reads the key once and hands the sink the failpoint as its
`before_commit`; the operator has the same kind (derived_views.process.failpoints), in its own
image.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

BEFORE_COMMIT_CONF = "spark.derivedviews.failpoint.beforeCommit"
"""Between a batch's COPY (and upsert, ledger row) and its transaction's commit."""

MAX_HOLD_SECONDS = 600.0


@dataclass(frozen=True)
class Failpoint:
    """One place to hold at; `path` None is off (what every production job has)."""

    path: str | None = None

    def hold(self, who: str = "") -> None:
        """Wait here if the file is armed for `who`, or for anyone when armed empty."""
        if not self.path:
            return
        armed = Path(self.path)
        try:
            wanted = armed.read_text().strip()
        except FileNotFoundError:
            return
        if wanted and wanted != who:
            return
        held = Path(f"{self.path}.held")
        try:
            armed.rename(held)  # one process takes it
        except FileNotFoundError:
            return
        held.write_text(f"{os.getpid()}\n")
        release = Path(f"{self.path}.release")
        deadline = time.monotonic() + MAX_HOLD_SECONDS
        while not release.exists() and time.monotonic() < deadline:
            time.sleep(0.1)  # a test's hold: polls the release file, nothing else
