"""What the job asks of a sink, and which module writes for a configured sink kind.

The job's plan (parse, transform, the bad-record screen, the checkpoint) is the
same for every sink; only how a batch lands exactly once differs.  A sink is a
module implementing `Sink`, registered in `open_sink`: a new sink is a new
module plus one line here, not edits across the job.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from dvjob.config import JobConfig
from dvjob.errors import ConfigError
from dvjob.offsets import EndOffsets
from dvjob.sink_schema import TableLayout

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from dvjob.credentials import Credentials


class BadRecordHandler(Protocol):
    """The view's bad-record policy as the sink sees it (dvjob.bad_records.BadRecordScreen)."""

    def null_key(self, batch_id: int, column: str, row: Sequence[Any]) -> None:
        """A row with a NULL key column: raise to fail the batch, or keep it to count."""

    def settle(self, batch_id: int, end_offsets: EndOffsets) -> int:
        """Before commit: dead-letter what the batch left out; return how many records."""


class FrameRows:
    """A batch's rows as a sink gets them: iterated, they stream to the driver
    (toLocalIterator, one partition at a time); a sink that can load from the
    executors in parallel takes `frame` instead when `parallel` says the batch
    is large enough to repay the set-up (dvjob.batch_writer decides)."""

    def __init__(self, frame: DataFrame, *, parallel: bool) -> None:
        self.frame = frame
        self.parallel = parallel

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        yield from self.frame.toLocalIterator(prefetchPartitions=True)


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
    entry (batch id, exclusive end offsets, counts) become visible together,
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

    def write_batch(self, batch_id: int, rows: Iterable[Sequence[Any]],
                    end_offsets: EndOffsets, bad: BadRecordHandler | None = None
                    ) -> BatchOutcome:
        """Apply one batch atomically with its ledger entry, or skip it if the ledger has
        it.  `rows` are the layout's columns followed by the delete flag; consumed only
        when the batch is not skipped."""


SINK_KINDS = ("postgres", "opensearch")


def open_sink(config: JobConfig, layout: TableLayout, credentials: Credentials, *,
              before_commit: Callable[[int], None] | None = None) -> Sink:
    """The sink the configuration names; the import is lazy so a job loads one client."""
    kind = config.sink.kind
    if kind == "postgres":
        from dvjob.sink_postgres import PostgresSink, connect_with, describe_target
        app_name = f"dvjob-{config.revision}"
        return PostgresSink(connect=connect_with(app_name, credentials.postgres),
                            schema=config.sink.db_schema, table=config.sink.table,
                            ledger_table=config.sink.ledger_table, revision=config.revision,
                            layout=layout, before_commit=before_commit, app_name=app_name,
                            stage_secret_dir=credentials.stage_dir,
                            owner=config.owner.model_dump() if config.owner else None,
                            target=describe_target(credentials.postgres))
    if kind == "opensearch":
        from dvjob.sink_opensearch import OpenSearchSink
        from dvjob.sink_opensearch_client import client_from
        client, url = client_from(credentials.opensearch)
        return OpenSearchSink(client=client, url=url, index=config.sink.table,
                              ledger_index=config.sink.ledger_table, view=config.view,
                              revision=config.revision, layout=layout,
                              before_commit=before_commit,
                              uid=config.owner.uid if config.owner else None)
    raise ConfigError(f"sink.kind {kind!r}: this job writes {', '.join(SINK_KINDS)}")
