"""What the job asks of a sink: the contract every sink module implements (a leaf: the
sinks import it, and the registry in dvjob.sinks.registry imports the sinks).

Also the one policy a sink applies when it is given none: a NULL primary key fails the
batch, with the same message the view's `fail` policy gives.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from dvjob.batch_progress import Progress
from dvjob.errors import ConfigError, JobError, NullKeyError
from dvjob.offsets import EndOffsets

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

class LedgerMismatchError(JobError):
    """The ledger already holds this batch id with a different range: the batch is not the
    one that committed, and writing it would count records twice or not at all."""


class IndexOwnedElsewhereError(ConfigError):
    """The index is recorded as another view's (another UID): the job writes nothing into it."""


NULL_KEY_CAUSE = "NULL in primary-key column"
"""How a NULL key is named: in the error that fails a batch and in a dead letter's cause."""


def null_key_error(batch_id: int, column: str, row_text: str | None = None) -> NullKeyError:
    """The one message of a row whose key column is NULL, under the `fail` policy."""
    shown = f" ({row_text})" if row_text else ""
    return NullKeyError(
        f"batch {batch_id}: the transform emitted a row with {NULL_KEY_CAUSE} {column!r}"
        f"{shown}; filter such rows out in the transform (e.g. WHERE ... IS NOT NULL), or "
        "set source.badRecords.policy to skip or deadLetter to go past them (they are "
        "counted in the status)")


class BadRecordHandler(Protocol):
    """The view's bad-record policy as the sink sees it (dvjob.source.bad_records.BadRecordScreen)."""

    def null_key(self, batch_id: int, column: str, row: Sequence[Any]) -> None:
        """A row with a NULL key column: raise to fail the batch, or keep it to count."""

    def settle(self, batch_id: int, end_offsets: EndOffsets) -> int:
        """Before commit: dead-letter what the batch left out; return how many records."""


class FailOnNullKey:
    """The handler of a sink called without the view's policy (a test, a tool): a NULL key
    fails the batch; nothing is ever left out, so nothing is settled."""

    def null_key(self, batch_id: int, column: str, row: Sequence[Any]) -> None:
        raise null_key_error(batch_id, column)

    def settle(self, batch_id: int, end_offsets: EndOffsets) -> int:
        return 0


FAIL_ON_NULL_KEY = FailOnNullKey()


class FrameRows:
    """A batch's rows as a sink gets them: iterated, they come to the driver; a sink that
    can load from the executors in parallel takes `frame` instead when `parallel` says the
    batch is large enough to repay the set-up (dvjob.batch_writer decides).

    A large batch streams one partition at a time (toLocalIterator), which bounds the
    driver's memory; a small one (the steady state) comes in one collect: toLocalIterator
    runs a Spark job per partition (four for an aggregation's state), and on a loaded
    machine their scheduling was a quarter of a steady batch's time."""

    def __init__(self, frame: DataFrame, *, parallel: bool, one_task: bool = False) -> None:
        self.frame = frame
        self.parallel = parallel
        self.one_task = one_task
        """Stage in one task, not one per partition (dvjob.placement.one_staging_task)."""

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        if self.parallel:
            yield from self.frame.toLocalIterator(prefetchPartitions=True)
        else:
            yield from self.frame.collect()


@dataclass(frozen=True)
class BatchOutcome:
    batch_id: int
    skipped: bool
    rows_upserted: int
    rows_deleted: int
    end_offsets: EndOffsets
    bad_records: int = 0
    seconds: Mapping[str, float] = field(default_factory=dict)
    """Where the batch's time went in the sink, per phase (for the job's log); may be empty."""


class Sink(Protocol):
    """One revision's index in one sink, written exactly once per batch id.

    Exactly-once rests on the sink's ledger: a batch's rows and its ledger
    entry (batch id, exclusive end offsets, counts, history start) become visible together,
    and a batch id already in the ledger is skipped.  The operator reads lag
    from the same ledger.
    """

    def describe(self) -> str:
        """Where the index and its ledger are, for the job's log (never a secret)."""

    def prepare(self) -> None:
        """Create what is missing (ledger, index); refuse an index that is not this
        revision's (a JobError saying what to do)."""

    def committed_batches(self) -> int:
        """How many batches the ledger holds for this revision (after prepare)."""

    def report_progress(self, progress: Progress) -> None:
        """Store how far the running batch has read where the operator reads the ledger
        (dvjob.batch_progress): outside any batch, overwriting the last report."""

    def write_batch(self, batch_id: int, rows: Iterable[Sequence[Any]],
                    end_offsets: EndOffsets, bad: BadRecordHandler = FAIL_ON_NULL_KEY, *,
                    history_start: EndOffsets | None = None) -> BatchOutcome:
        """Apply one batch atomically with its ledger entry, or skip it if the ledger has
        it.  `rows` are the layout's columns followed by the delete flag; consumed only
        when the batch is not skipped.

        `history_start` (the offsets the revision's replay began at, dvjob.offsets.
        read_history_start; None: not known) goes into the batch's ledger entry, so the
        newest entry always says from where the index holds the log, whatever was pruned."""
