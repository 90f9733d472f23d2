"""Time values as the status stores them. Never reads a clock: `now` is always passed in."""

from __future__ import annotations

import datetime as dt
from typing import Any


def utc(t: dt.datetime) -> dt.datetime:
    """Whole seconds in UTC: Kubernetes' timestamp precision, so status round-trips unchanged."""
    if t.tzinfo is None or t.utcoffset() is None:
        raise ValueError(f"{t!r} has no time zone; pass an aware datetime")
    return t.astimezone(dt.UTC).replace(microsecond=0)


def seconds_between(earlier: dt.datetime, later: dt.datetime) -> int:
    """Whole seconds from `earlier` to `later` (negative if reversed)."""
    return int((later - earlier).total_seconds() // 1)


def parse_timestamp(value: Any) -> dt.datetime | None:
    """A Kubernetes timestamp ("2026-11-23T08:00:00Z") as an aware datetime; None when empty."""
    if not value:
        return None
    if isinstance(value, dt.datetime):
        return value
    return dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
