"""Wait on a condition with a deadline: the only synchronisation the stack uses."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class TimedOut(Exception):
    """A condition did not hold before its deadline."""


def wait_for(
    condition: Callable[[], T | None],
    *,
    timeout: float,
    what: str,
    interval: float = 0.2,
    on_timeout: Callable[[], str] | None = None,
) -> T:
    """Poll `condition` until it returns a truthy value or `timeout` passes.

    Exceptions raised by the condition count as "not yet" so a service that is
    still starting (connection refused) is simply polled again; the last one is
    reported if the deadline passes.
    """
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        try:
            value = condition()
            if value:
                return value
        except Exception as exc:
            last_error = exc
        if time.monotonic() >= deadline:
            detail = f"; last error: {last_error!r}" if last_error else ""
            extra = f"\n{on_timeout()}" if on_timeout else ""
            raise TimedOut(f"timed out after {timeout:.0f}s waiting for {what}{detail}{extra}")
        time.sleep(interval)


def http_ok(url: str) -> bool:
    """A plain HTTP health endpoint answers 200; a refused connection raises, so `wait_for`
    names it when its deadline passes."""
    with urllib.request.urlopen(url, timeout=2) as resp:
        return bool(resp.status == 200)
