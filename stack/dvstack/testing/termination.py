"""A benchmark stopped by a signal cleans up as one that ends.

Why: a benchmark starts an operator, views with their drivers, and producers, and deletes
them in `finally` blocks. Python runs those on an exception or Ctrl-C, but SIGTERM (`kill`, a
CI timeout) and SIGHUP (a closed terminal) end the process at once by default: a killed
steady-cost run left its operator, its view and its driver running, and that driver's cores
were counted in the next run. Raised as SystemExit, the signal unwinds through every
`finally` instead. A second one during the clean-up is ignored, so the clean-up is not cut
short half-way; SIGKILL still ends the process at once.
"""

from __future__ import annotations

import signal
from types import FrameType

SIGNALS = (signal.SIGTERM, signal.SIGHUP)
EXIT_STATUS_BASE = 128
"""Exit status 128 + the signal's number: what a shell reports for a process it ended."""


def _unwind(signum: int, _frame: FrameType | None) -> None:
    for each in SIGNALS:
        signal.signal(each, signal.SIG_IGN)
    raise SystemExit(EXIT_STATUS_BASE + signum)


def clean_up_on_signals() -> None:
    """Make SIGTERM and SIGHUP run the process's `finally` blocks (main thread only)."""
    for each in SIGNALS:
        signal.signal(each, _unwind)
