"""How far the running batch has read, reported while it runs.

A replay's first batch can run for minutes and commits nothing until it ends, so the ledger
says nothing about it: no moving lag, no rate, no ETA. Spark counts each task's input records
and sends the counts of running tasks to the driver with every executor heartbeat
(`spark.executor.heartbeatInterval`, which the job template sets to a few seconds); the
driver's status store sums them per stage. While a batch is written, a driver thread reads
the active stages every PROGRESS_SECONDS, keeps each stage's newest count (a stage that has
finished keeps its last) and hands the sum to the sink, which stores it where the operator
reads the ledger. The count is a lower bound (up to a heartbeat old), capped at the batch's
size in offsets when that is known: a batch whose records are read twice (the bad-record
count reads them again) never reports more than it holds.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from dvjob.errors import ConfigError
from dvjob.offsets import EndOffsets

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PROGRESS_SECONDS = 3.0
"""How often the running batch's count goes to the sink: about one heartbeat."""
PROGRESS_CONF = "spark.derivedviews.progressSeconds"
"""Spark configuration that sets another interval (0: no reports)."""


def progress_setting(value: str | None) -> float:
    """The interval PROGRESS_CONF sets (unset: PROGRESS_SECONDS); anything but a number of
    seconds, 0 or more, is refused before any query starts."""
    if value is None or value.strip() == "":
        return PROGRESS_SECONDS
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):
        raise ConfigError(f"{PROGRESS_CONF} is {value!r}: give a number of seconds "
                          "(0 turns the running batch's progress reports off)")
    return seconds


@dataclass(frozen=True)
class Progress:
    """What the sink stores for the operator: the running batch, and how far it has read."""

    batch_id: int
    records_read: int
    end_offsets: EndOffsets
    started_at: dt.datetime
    reported_at: dt.datetime


class ProgressSink(Protocol):
    def report_progress(self, progress: Progress) -> None:
        """Store the running batch's progress (overwriting the last report)."""


@dataclass
class RunningBatch:
    """The batch being written: its range, and the input count of each stage seen running."""

    batch_id: int
    end_offsets: EndOffsets
    started_at: dt.datetime
    records: int | None = None
    """Records in its range (None: its start is not known, a first batch)."""
    stages: dict[int, int] = field(default_factory=dict)

    def saw(self, stage_inputs: Iterable[tuple[int, int]]) -> None:
        for stage, read in stage_inputs:
            self.stages[stage] = max(self.stages.get(stage, 0), read)

    def records_read(self) -> int:
        read = sum(self.stages.values())
        return read if self.records is None else min(read, self.records)

    def progress(self, now: dt.datetime) -> Progress:
        return Progress(self.batch_id, self.records_read(), self.end_offsets, self.started_at,
                        now)


def active_stage_inputs(spark: SparkSession) -> list[tuple[int, int]]:
    """(stage id, input records so far) of every stage running now, from the driver's status
    store (the numbers Spark's UI and REST API show, kept with the UI turned off too)."""
    stages: Any = spark.sparkContext._jsc.sc().statusStore().activeStages()
    return [(int(s.stageId()), int(s.inputRecords()))
            for s in (stages.apply(i) for i in range(stages.length()))]


class ProgressReporter:
    """The driver thread: `begin` and `end` bracket each batch (dvjob.batch_writer), and
    every PROGRESS_SECONDS in between the sink gets the batch's progress. Reporting never
    fails the job: a failed report is said once and tried again at the next tick."""

    def __init__(self, sink: ProgressSink, read_stages: Callable[[], list[tuple[int, int]]],
                 say: Callable[[str], None], *, every: float = PROGRESS_SECONDS,
                 clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.timezone.utc)) -> None:
        self.sink, self.read_stages, self.say, self.every, self.clock = (
            sink, read_stages, say, every, clock)
        self._running: RunningBatch | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._failing = False
        self._thread = threading.Thread(target=self._loop, name="dvjob-progress", daemon=True)

    def start(self) -> ProgressReporter:
        """Start reporting (an interval of 0: never)."""
        if self.every > 0:
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(self.every + 5)

    def begin(self, batch_id: int, end_offsets: EndOffsets, records: int | None) -> None:
        with self._lock:
            self._running = RunningBatch(batch_id, end_offsets, self.clock(), records)

    def end(self) -> None:
        with self._lock:
            self._running = None

    def tick(self) -> None:
        """One report, if a batch runs (the loop's body; tests call it directly)."""
        with self._lock:
            running = self._running
        if running is None:
            return
        try:
            running.saw(self.read_stages())
            with self._lock:
                if self._running is not running:
                    return  # the batch ended while its stages were read
            self.sink.report_progress(running.progress(self.clock()))
            self._failing = False
        except Exception as exc:  # progress is for people: the batch goes on
            if not self._failing:
                self.say(f"batch {running.batch_id}: progress not reported: {exc!r:.300}")
            self._failing = True

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            self.tick()
