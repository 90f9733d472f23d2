"""The foreachBatch function: one micro-batch of the view's output into its sink.

A small batch's rows (the steady state: what arrived since the last trigger)
come to the driver in one collect and go to the sink; a batch whose size is
not known streams with toLocalIterator, one Spark partition at a time, which
bounds driver memory by the largest partition.  A batch of at least PARALLEL_MIN_RECORDS
source records (a replay) is offered to the sink as a whole DataFrame too, so
a sink that can (PostgreSQL) loads it from the executors in parallel instead
of through the driver's single Python process.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING

from dvjob.batch_progress import ProgressReporter
from dvjob.offsets import (
    EARLIEST,
    EndOffsets,
    read_end_offsets,
    read_history_start,
    start_offsets,
)
from dvjob.sinks.contract import FAIL_ON_NULL_KEY, BadRecordHandler, BatchOutcome, FrameRows, Sink
from dvjob.sinks.schema import TableLayout, sink_projection

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

PROGRESS_PREFIX = "dvjob progress "
TIMING_PREFIX = "dvjob timing "
"""Where a batch's time went in the sink (seconds per phase), when the sink says."""
PARALLEL_MIN_RECORDS = 20_000
"""Below this many source records a batch goes through the driver: staging in parallel costs
two DDL statements and a connection per task, more than a few thousand rows take to stream."""


def batch_records(previous: EndOffsets | None, end: EndOffsets) -> int | None:
    """Source records in a batch's range; None when its start is not known (the first batch,
    or a partition the previous batch did not have: both read from the earliest offset)."""
    starts = start_offsets(previous, end)
    if any(start == EARLIEST for parts in starts.values() for start in parts.values()):
        return None
    return sum(max(offset - starts[topic][partition], 0)
               for topic, parts in end.items() for partition, offset in parts.items())


def progress_line(outcome: BatchOutcome) -> str:
    """One JSON line per batch on stdout: easy to grep, easy to parse."""
    return PROGRESS_PREFIX + json.dumps({
        "batch": outcome.batch_id,
        "status": "skipped" if outcome.skipped else "committed",
        "rows_upserted": outcome.rows_upserted,
        "rows_deleted": outcome.rows_deleted,
        "bad_records": outcome.bad_records,
        "end_offsets": outcome.end_offsets,
    }, sort_keys=True)


class BatchWriter:
    """Callable for `DataStreamWriter.foreachBatch`; remembers the last failure for main."""

    def __init__(self, *, sink: Sink, layout: TableLayout, checkpoint_location: str,
                 report: Callable[[str], None] | None = None,
                 bad: BadRecordHandler = FAIL_ON_NULL_KEY,
                 progress: ProgressReporter | None = None, one_task: bool = False) -> None:
        self.sink = sink
        self.one_task = one_task  # stage a large batch in one task (dvjob.placement)
        self.progress = progress
        self.bad = bad
        self.layout = layout
        self.checkpoint_location = checkpoint_location
        self.report = report or (lambda line: print(line, flush=True))
        self.failure: Exception | None = None
        self._ends: dict[int, EndOffsets] = {}  # the last batch's, read from the offset log
        # Where the replay began: read once, as Spark never changes it for a checkpoint.
        self._history_start: EndOffsets | None = None
        self._history_read = False

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        try:
            outcome = self.write(batch, batch_id)
        except Exception as exc:
            self.failure = exc
            raise
        self.report(progress_line(outcome))
        if outcome.seconds:
            print(TIMING_PREFIX + json.dumps({"batch": batch_id, **outcome.seconds}), flush=True)

    def history_start(self, spark: SparkSession) -> EndOffsets | None:
        """The checkpoint's initial offsets, read at the first batch of this process (Spark
        writes them when the query first starts, before that batch) and kept: every ledger
        entry carries them, so the newest one says where the index's history begins."""
        if not self._history_read:
            found = read_history_start(spark, self.checkpoint_location)
            print(f"dvjob: history start {json.dumps(found, sort_keys=True)}" if found is not None
                  else f"dvjob: history start not recorded: the checkpoint "
                  f"{self.checkpoint_location} has no initial offsets", flush=True)
            self._history_start, self._history_read = found, True
        return self._history_start

    def write(self, batch: DataFrame, batch_id: int) -> BatchOutcome:
        end_offsets = read_end_offsets(batch.sparkSession, self.checkpoint_location, batch_id)
        rows = sink_projection(batch, self.layout)
        previous = self._ends.get(batch_id - 1)
        if previous is None and batch_id > 0:
            previous = read_end_offsets(batch.sparkSession, self.checkpoint_location,
                                        batch_id - 1)
        self._ends = {batch_id: end_offsets}
        history_start = self.history_start(batch.sparkSession)
        records = batch_records(previous, end_offsets)
        parallel = records is None or records >= PARALLEL_MIN_RECORDS
        if self.progress is not None:
            self.progress.begin(batch_id, end_offsets, records)
        try:
            outcome = self.sink.write_batch(batch_id, FrameRows(rows, parallel=parallel,
                                                                  one_task=self.one_task),
                                            end_offsets, self.bad, history_start=history_start)
        finally:
            if self.progress is not None:
                self.progress.end()
        if outcome.skipped:
            # The first attempt's effects are committed, but stateful operators
            # (aggregations) must still see the batch so their state advances
            # exactly as it did then; the noop sink runs the plan and drops rows.
            rows.write.format("noop").mode("overwrite").save()
        return outcome
