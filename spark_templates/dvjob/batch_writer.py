"""The foreachBatch function: one micro-batch of the view's output into its sink.

The batch's rows are streamed to the driver with toLocalIterator, one Spark
partition at a time (two with prefetching), and handed to the sink as they arrive.  That
bounds driver memory by the largest partition, not the batch, but every row
still passes through the driver: set `maxOffsetsPerTrigger` for large topics.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from dvjob.offsets import read_end_offsets
from dvjob.sink import BadRecordHandler, BatchOutcome, Sink
from dvjob.sink_schema import TableLayout, sink_projection

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

PROGRESS_PREFIX = "dvjob progress "


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


def _local_rows(frame: DataFrame) -> Iterator[tuple[Any, ...]]:
    """The frame's rows, computed only when first asked for (never for a skipped batch)."""
    yield from frame.toLocalIterator(prefetchPartitions=True)


class BatchWriter:
    """Callable for `DataStreamWriter.foreachBatch`; remembers the last failure for main."""

    def __init__(self, *, sink: Sink, layout: TableLayout, checkpoint_location: str,
                 report: Callable[[str], None] | None = None,
                 bad: BadRecordHandler | None = None) -> None:
        self.sink = sink
        self.bad = bad
        self.layout = layout
        self.checkpoint_location = checkpoint_location
        self.report = report or (lambda line: print(line, flush=True))
        self.failure: Exception | None = None

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        try:
            outcome = self.write(batch, batch_id)
        except Exception as exc:
            self.failure = exc
            raise
        self.report(progress_line(outcome))

    def write(self, batch: DataFrame, batch_id: int) -> BatchOutcome:
        end_offsets = read_end_offsets(batch.sparkSession, self.checkpoint_location, batch_id)
        rows = sink_projection(batch, self.layout)
        outcome = self.sink.write_batch(batch_id, _local_rows(rows), end_offsets, self.bad)
        if outcome.skipped:
            # The first attempt's effects are committed, but stateful operators
            # (aggregations) must still see the batch so their state advances
            # exactly as it did then; the noop sink runs the plan and drops rows.
            rows.write.format("noop").mode("overwrite").save()
        return outcome
