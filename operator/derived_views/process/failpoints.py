"""Failpoints: a place in the operator where a fault test can hold it, to kill it there.

Off unless the operator starts with a failpoint's variable naming a file, and then
inert until a test *arms* that file. The first process to reach the point takes the
file (an atomic rename to `<file>.held`, holding its pid) and waits until
`<file>.release` exists or ten minutes pass. A test arms the file, waits for `.held`,
and kills the process, or releases it. The variables are read once, at start-up
(`from_env`), and the failpoints handed to the shell (reconcile.Deps); the job has
the same kind of failpoint (dvjob.failpoints), in its own image.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

BEFORE_SWITCH_ENV = "DV_FAILPOINT_BEFORE_SWITCH"
"""Between the recorded intent and the alias switch (the cutover's crash window)."""

MAX_HOLD_SECONDS = 600.0


@dataclass(frozen=True)
class Failpoint:
    """One place to hold at; `path` None is off (what every production operator has)."""

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


@dataclass(frozen=True)
class Failpoints:
    """The operator's failpoints, all off by default."""

    before_switch: Failpoint = Failpoint()

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Failpoints:
        return cls(before_switch=Failpoint(env.get(BEFORE_SWITCH_ENV) or None))
