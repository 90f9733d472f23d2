"""The OpenSearch sink: each micro-batch as versioned bulk writes, then its ledger document.

OpenSearch has no transaction across documents, so exactly-once rests on
idempotence instead (docs/sinks.md, "OpenSearch"): every action of batch `b`
carries `version=b+1, version_type=external_gte`, so re-sending a batch
rewrites the same versions and an older batch can never overwrite a newer one.
The ledger document (`<revision>:<batch_id>` in the ledger index) is created
only after the whole bulk succeeded and the index was refreshed: a batch whose
ledger document exists is skipped, one without is (re-)applied in full.  Spark
re-runs at most the last batch after a failure, with the same rows.

Like the PostgreSQL sink, each ledger document records the identity of the
index its batch went to (`index.uuid`), and no batch is written into an index
that is missing or has another uuid while the ledger holds batches: a deleted
and re-created index would otherwise look complete while lacking them.

Before a batch's first row is sent, its end offsets go into the revision's in-flight
document; the operator's cutover puts a write block on the serving index and reads that
document, so it never switches readers to a candidate lacking rows they could already see.
Rows refused by the block are re-sent once it is lifted (docs/freshness.md).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from opensearchpy import OpenSearch
from opensearchpy.exceptions import ConflictError, NotFoundError, RequestError

from dvjob.batch_progress import Progress
from dvjob.errors import JobError
from dvjob.integrity import IndexLostError
from dvjob.offsets import EndOffsets
from dvjob.sinks.contract import (
    FAIL_ON_NULL_KEY,
    BadRecordHandler,
    BatchOutcome,
    IndexOwnedElsewhereError,
    LedgerMismatchError,
)
from dvjob.sinks.opensearch.client import Failing, redacted_url
from dvjob.sinks.opensearch.docs import (
    BulkLine,
    Documents,
    bulk_body,
    bulk_chunks,
    refusal_cause,
    sort_items,
)
from dvjob.sinks.opensearch.mapping import (
    LEDGER_PROPERTIES,
    in_flight_id,
    index_body,
    index_mapping,
    ledger_batches,
    ledger_body,
    ledger_id,
    progress_id,
)
from dvjob.sinks.schema import TableLayout

CHUNK_ACTIONS = 5000
CHUNK_BYTES = 8 * 1024 * 1024
# 429 (a full write queue) is back-pressure: back off and re-send those items.
BULK_RETRIES_ON_429 = 5
BUSY_BACKOFF_SECONDS = 2.0
BLOCK_WAIT_SECONDS = 600.0
"""How long a batch waits for an index block to go: far beyond a cutover's hold (at most 30 s,
and an operator that died holding it has the block lifted by its successor's next pass)."""
BLOCK_POLL_SECONDS = 0.2
WRITE_BLOCKS = ("write", "read_only", "read_only_allow_delete")


class ForeignIndexError(JobError):
    """The index exists but is not this revision's (another view, revision or owner)."""


class IndexMappingMismatchError(JobError):
    """The revision's index exists with other fields than this revision writes."""


class BulkRefusedError(JobError):
    """OpenSearch refused documents of the batch (other than by a version conflict)."""


@dataclass(frozen=True)
class LiveIndex:
    uuid: str
    owner: dict[str, Any] | None
    """`_meta.derived_views`, if any."""
    properties: dict[str, Any]


class OpenSearchSink:
    """Writes batches of one revision into its index, exactly once per batch id
    (dvjob.sinks.registry.Sink)."""

    def __init__(self, *, client: OpenSearch, url: str, index: str, ledger_index: str,
                 view: str, revision: str, layout: TableLayout,
                 before_commit: Callable[[int], None] | None = None, uid: str | None = None,
                 chunk_actions: int = CHUNK_ACTIONS, chunk_bytes: int = CHUNK_BYTES) -> None:
        self._client = client
        self._url = redacted_url(url)
        self._before_commit = before_commit  # a failpoint (dvjob.failpoints); None in use
        self.index = index
        self.ledger_index = ledger_index
        self.view = view
        self.uid = uid  # the owning view's UID (None: a configuration from before owners)
        self.revision = revision
        self.layout = layout
        self.docs = Documents(layout)  # refuses unusable column names before any request
        self.chunk_actions = chunk_actions
        self.chunk_bytes = chunk_bytes

    def describe(self) -> str:
        return f"index {self.index} (ledger {self.ledger_index}) at {self._url}"

    def prepare(self) -> None:
        """Create the ledger and the index if missing; refuse an index that is not this
        revision's, or that lost batches the ledger claims (IndexLostError)."""
        with self._failing("preparing the ledger index " + self.ledger_index):
            self._create_if_missing(self.ledger_index, ledger_body())
            # Ledgers that predate a field gain it (a no-op when all are there).
            self._client.indices.put_mapping(index=self.ledger_index,
                                             body={"properties": LEDGER_PROPERTIES})
        with self._failing("preparing the index " + self.index):
            live = self._live_index()
            if live is not None:
                self._check_identity(live)
            self._check_not_lost(live)
            if live is None:
                self._create_if_missing(self.index, index_body(
                    self.layout, view=self.view, revision=self.revision, uid=self.uid))
                live = self._live_index()
                assert live is not None  # just created, or created by a twin
                self._check_identity(live)
        expected = index_mapping(self.layout, view=self.view, revision=self.revision)
        if live.properties != expected["properties"]:
            raise IndexMappingMismatchError(
                f"index {self.index} exists with fields {_fields(live.properties)}, but this "
                f"revision writes {_fields(expected['properties'])}; delete it or use another "
                "index name")

    def committed_batches(self) -> int:
        with self._failing("counting the ledger's batches"):
            found = self._client.count(index=self.ledger_index,
                                       body={"query": ledger_batches(self.revision)})
        return int(found["count"])

    def write_batch(self, batch_id: int, rows: Iterable[Sequence[Any]],
                    end_offsets: EndOffsets, bad: BadRecordHandler = FAIL_ON_NULL_KEY, *,
                    history_start: EndOffsets | None = None) -> BatchOutcome:
        """Apply one batch, or skip it if the ledger already has it.

        `rows` are the layout's columns followed by the delete flag; consumed only when
        the batch is not skipped.  A failure leaves no ledger document: the re-run sends
        the batch again, rewriting the same versions.  The ledger document records
        `history_start` (None: null).
        """
        doc_id = ledger_id(self.revision, batch_id)
        with self._failing(f"checking batch {batch_id} against the ledger"):
            live = self._live_index()
            self._check_not_lost(live, writing=True)
            assert live is not None
            if self._recorded(batch_id, end_offsets) is not None:
                return BatchOutcome(batch_id, True, 0, 0, end_offsets)
        self._mark_in_flight(batch_id, end_offsets)
        upserted, deleted = self._bulk(batch_id, bulk_chunks(
            rows, self.docs, batch_id=batch_id, bad=bad, max_actions=self.chunk_actions,
            max_bytes=self.chunk_bytes))
        left_out = bad.settle(batch_id, end_offsets) if bad is not None else 0
        with self._failing(f"committing batch {batch_id}"):
            # Searchable before the ledger says so: lag 0 means readers see the batch.
            self._client.indices.refresh(index=self.index)
            after = self._live_index()
            if after is None or after.uuid != live.uuid:  # a bulk auto-creates a missing index
                raise IndexLostError(
                    f"index {self.index} was deleted while batch {batch_id} was written; "
                    "refusing to record the batch: restart the job")
            if self._before_commit is not None:
                self._before_commit(batch_id)
            entry = {"revision": self.revision, "batch_id": batch_id, "end_offsets": end_offsets,
                     "rows_upserted": upserted, "rows_deleted": deleted, "bad_records": left_out,
                     "committed_at": dt.datetime.now(dt.timezone.utc).isoformat(),
                     "index_uuid": live.uuid, "history_start": history_start}
            try:
                self._client.create(index=self.ledger_index, id=doc_id, body=entry,
                                    params={"refresh": "wait_for"})
            except ConflictError:
                # A twin (or a retried request) recorded it meanwhile: fine if the same range.
                self._recorded(batch_id, end_offsets)
        return BatchOutcome(batch_id, False, upserted, deleted, end_offsets, left_out)

    def _bulk(self, batch_id: int, chunks: Iterator[list[BulkLine]]) -> tuple[int, int]:
        """Send the chunks in order; count what changed (`sort_items`).  Actions refused by a
        full write queue are re-sent after a back-off, those refused by an index block once
        the block is lifted (the cutover's write block lasts seconds); anything else fails
        the batch, naming the first refusal."""
        upserted = deleted = 0
        for chunk in chunks:
            pending, busy_tries = chunk, 0
            blocked_since: float | None = None
            while pending:
                with self._failing(f"writing batch {batch_id}"):
                    items = self._client.bulk(body=bulk_body(pending), index=self.index)["items"]
                answer = sort_items(pending, items)
                upserted, deleted = upserted + answer.upserted, deleted + answer.deleted
                if answer.refused:
                    first = answer.refused[0]
                    raise BulkRefusedError(
                        f"batch {batch_id}: OpenSearch refused {len(answer.refused)} document(s) "
                        f"of index {self.index}; the first, id {first.get('_id')!r} (status "
                        f"{first.get('status')}): {refusal_cause(first)}")
                if answer.blocked:
                    blocked_since = blocked_since or time.monotonic()
                    self._await_unblocked(batch_id, blocked_since, answer.block_reason)
                if answer.busy:
                    busy_tries += 1
                    if busy_tries > BULK_RETRIES_ON_429:
                        raise BulkRefusedError(
                            f"batch {batch_id}: OpenSearch's write queue stayed full (429) for "
                            f"{len(answer.busy)} document(s) of index {self.index} after "
                            f"{BULK_RETRIES_ON_429} retries")
                    time.sleep(min(BUSY_BACKOFF_SECONDS * 2 ** (busy_tries - 1), 30.0))
                pending = answer.blocked + answer.busy
        return upserted, deleted

    def _await_unblocked(self, batch_id: int, since: float, reason: str) -> None:
        """Wait until the index takes writes again; a block that outlasts BLOCK_WAIT_SECONDS
        fails the batch (nothing of it is recorded: the re-run sends it again)."""
        while self._write_blocked():
            if time.monotonic() - since > BLOCK_WAIT_SECONDS:
                raise BulkRefusedError(
                    f"batch {batch_id}: index {self.index} refused writes for more than "
                    f"{BLOCK_WAIT_SECONDS:g}s ({reason}); a cutover holds it for seconds: lift "
                    "the block (PUT /<index>/_settings with index.blocks.write: null) if no "
                    "operator is switching this view")
            time.sleep(BLOCK_POLL_SECONDS)

    def _write_blocked(self) -> bool:
        with self._failing(f"reading the blocks of index {self.index}"):
            found = self._client.indices.get_settings(index=self.index,
                                                      name="index.blocks.*")
        blocks = found.get(self.index, {}).get("settings", {}).get("index", {}).get("blocks", {})
        return any(str(blocks.get(b)).lower() == "true" for b in WRITE_BLOCKS)

    def report_progress(self, progress: Progress) -> None:
        """The running batch's progress (dvjob.batch_progress): read by the operator with a
        real-time get, so no refresh is asked for."""
        self._client.index(index=self.ledger_index, id=progress_id(self.revision), body={
            "revision": self.revision, "progress_batch": progress.batch_id,
            "records_read": progress.records_read, "end_offsets": progress.end_offsets,
            "started_at": progress.started_at.isoformat(),
            "reported_at": progress.reported_at.isoformat()})

    def _mark_in_flight(self, batch_id: int, end_offsets: EndOffsets) -> None:
        """Before any row of the batch is sent, say how far it reaches: the index refreshes on
        its own, so a reader can see part of a batch before its ledger document exists, and a
        cutover must not switch to a candidate that lacks what readers saw (docs/freshness.md)."""
        with self._failing(f"marking batch {batch_id} in flight"):
            self._client.index(index=self.ledger_index, id=in_flight_id(self.revision), body={
                "revision": self.revision, "in_flight_batch": batch_id,
                "end_offsets": end_offsets,
                "written_at": dt.datetime.now(dt.timezone.utc).isoformat()})

    def _recorded(self, batch_id: int, end_offsets: EndOffsets) -> EndOffsets | None:
        """The batch's recorded end offsets (None: not in the ledger); another range is
        refused, as the PostgreSQL sink does."""
        try:
            found = self._client.get(index=self.ledger_index,
                                     id=ledger_id(self.revision, batch_id),
                                     params={"_source_includes": "end_offsets"})
        except NotFoundError:
            return None
        recorded: EndOffsets = found["_source"]["end_offsets"]
        if recorded != end_offsets:
            raise LedgerMismatchError(
                f"batch {batch_id} of revision {self.revision} is in the ledger with end offsets "
                f"{recorded}, but the checkpoint now says {end_offsets}: the checkpoint does not "
                "belong to this index (was it reset?); delete the index and this revision's "
                "ledger documents, or restore the checkpoint")
        return recorded

    def _live_index(self) -> LiveIndex | None:
        try:
            found = self._client.indices.get(index=self.index)
        except NotFoundError:
            return None
        if self.index not in found:
            raise ForeignIndexError(
                f"{self.index} is an alias (of {', '.join(sorted(found))}), not an index; the "
                "revision's index needs the name: remove the alias")
        state = found[self.index]
        mappings = state.get("mappings", {})
        owner = mappings.get("_meta", {}).get("derived_views")
        return LiveIndex(uuid=state["settings"]["index"]["uuid"],
                         owner=owner if isinstance(owner, dict) else None,
                         properties=mappings.get("properties", {}))

    def _check_identity(self, live: LiveIndex) -> None:
        wanted = {"view": self.view, "revision": self.revision}
        recorded_uid = live.owner.get("uid") if live.owner is not None else None
        if live.owner is not None and recorded_uid is not None and recorded_uid != self.uid:
            # Same name, another view (deleted and re-created) or a job that cannot say whose
            # it is: an index from before UIDs were recorded has none and is judged by name.
            mine = ("this job's configuration names no owner" if self.uid is None
                    else f"this job runs for view {self.view} (uid {self.uid})")
            raise IndexOwnedElsewhereError(
                f"index {self.index} belongs to view {live.owner.get('view')} (uid "
                f"{recorded_uid}), but {mine}: refusing to write into it, nothing was written; "
                "give this view another index name, or delete that index")
        if {k: v for k, v in (live.owner or {}).items() if k != "uid"} != wanted:
            whose = ("was not created by derived views (no _meta.derived_views)"
                     if live.owner is None else
                     f"belongs to view {live.owner.get('view')} revision "
                     f"{live.owner.get('revision')}")
            raise ForeignIndexError(
                f"index {self.index} exists but {whose}, not view {self.view} revision "
                f"{self.revision}: refusing to write into it; delete it or use another index "
                "name")

    def _ledger_head(self) -> tuple[int, str | None] | None:
        found = self._client.search(index=self.ledger_index, body={
            "size": 1, "query": ledger_batches(self.revision),
            "sort": [{"batch_id": "desc"}], "_source": ["batch_id", "index_uuid"]})
        hits = found["hits"]["hits"]
        if not hits:
            return None
        source = hits[0]["_source"]
        return int(source["batch_id"]), source.get("index_uuid")

    def _check_not_lost(self, live: LiveIndex | None, *, writing: bool = False) -> None:
        head = self._ledger_head()
        fix = ("refusing to write into it: the index would silently lack those batches' rows. "
               "The operator rebuilds the revision from offset 0 (a new build); by hand, delete "
               "the revision's ledger documents and its checkpoint and restart the job")
        if head is None:
            if live is None and writing:  # a bulk would auto-create it with guessed types
                raise IndexLostError(f"index {self.index} is missing: it was deleted while the "
                                     "job ran; restart the job to create it")
            return
        claim = f"the ledger holds committed batches 0..{head[0]} of revision {self.revision}"
        if live is None:
            raise IndexLostError(f"index {self.index} is missing but {claim}: was it deleted? "
                                 f"{fix}")
        if head[1] is not None and head[1] != live.uuid:
            raise IndexLostError(
                f"index {self.index} is not the index its batches were written to (uuid "
                f"{live.uuid}, the ledger recorded {head[1]}) and {claim}: it was deleted and "
                f"re-created; {fix}")

    def _create_if_missing(self, index: str, body: dict[str, Any]) -> None:
        if self._client.indices.exists(index=index):
            return
        try:
            self._client.indices.create(index=index, body=body)
        except RequestError as exc:
            if exc.error != "resource_already_exists_exception":  # a twin job was first
                raise

    def _failing(self, what: str) -> Failing:
        return Failing(f"OpenSearch at {self._url}: {what}")


def _fields(properties: dict[str, Any]) -> str:
    return ", ".join(f"{name} ({spec.get('type', 'object')})"
                     for name, spec in sorted(properties.items())) or "none"
