"""A first replay commits early: its first micro-batch is bounded, then the query restarts
with the view's own bound.

A replay from offset 0 with the default bound (a million offsets per batch) commits nothing
for as long as its first batch runs, often minutes on a small cluster: no lag in time, no
rate, no ETA, and an index that stays empty. So a first replay runs one batch of at most
FIRST_BATCH_OFFSETS under a query whose next trigger is far away, stops that query once the
batch is committed (it is idle then, nothing is interrupted), and starts the real query on the
same checkpoint. The restart costs the start of a query (about a second with a warm driver).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from pyspark.sql.streaming.query import StreamingQuery

from dvjob.config import JobConfig
from dvjob.errors import ConfigError

FIRST_BATCH_OFFSETS = 50_000
"""At most this many offsets (over all partitions) in a first replay's first batch: seconds
of work for the slowest transform the tests know, on two cores."""
FIRST_BATCH_CONF = "spark.derivedviews.firstBatchOffsets"
"""Spark configuration that sets another first-batch bound (0: no first batch of its own)."""
PARKED_TRIGGER = "1 hour"
"""The first query's trigger interval: its first batch runs at once, the next never does."""
POLL_SECONDS = 0.2
IDLE = "Waiting for next trigger"
"""StreamingQuery.status's message once a trigger has run (Spark 3.x and 4.x)."""


def first_batch_setting(value: str | None) -> int:
    """The bound FIRST_BATCH_CONF sets (unset: FIRST_BATCH_OFFSETS); anything but a whole
    number of offsets, 0 or more, is refused before any query starts."""
    if value is None or value.strip() == "":
        return FIRST_BATCH_OFFSETS
    try:
        bound = int(value)
    except ValueError:
        bound = -1
    if bound < 0:
        raise ConfigError(f"{FIRST_BATCH_CONF} is {value!r}: give a whole number of offsets "
                          "(0 turns the first batch of its own off)")
    return bound


def first_batch_bound(config: JobConfig, committed_batches: int,
                      first: int = FIRST_BATCH_OFFSETS) -> int | None:
    """The bound for a first batch of its own, or None: only for a replay with nothing
    committed yet, a trigger that keeps running, and a bound of the view's above `first`."""
    if first <= 0 or committed_batches > 0 or config.trigger.available_now:
        return None
    bound = config.source.max_offsets_per_trigger
    if bound is not None and bound <= first:
        return None
    return first


def first_trigger_done(query: StreamingQuery) -> bool:
    """The first trigger has run (a batch committed, or the log had nothing to read)."""
    status = query.status
    return not status.get("isTriggerActive", True) and (
        query.lastProgress is not None or str(status.get("message", "")).startswith(IDLE))


def run_first_batch(start: Callable[[int, str], StreamingQuery],
                    say: Callable[[str], None], bound: int) -> str | None:
    """Start the bounded query, wait for its first trigger to finish, stop it; the query's
    failure, if it failed (the caller raises its writer's own, more precise one first)."""
    started = time.monotonic()
    query = start(bound, PARKED_TRIGGER)
    try:
        while query.isActive and not first_trigger_done(query):
            time.sleep(POLL_SECONDS)  # a driver-side poll of Spark's own status
    finally:
        query.stop()
    error = query.exception()
    if error is not None:
        return f"the first batch's query failed: {error}"
    progress: dict[str, object] = query.lastProgress or {}
    rows = progress.get("numInputRows")
    say(f"first batch of at most {bound} offsets done in {time.monotonic() - started:.1f}s "
        f"({rows if rows is not None else 0} records); starting the query with the view's bound")
    return None
