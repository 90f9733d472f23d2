"""Index rows as OpenSearch documents: ids, JSON sources and bulk chunks.

Pure functions, no client, so the rules of docs/sinks.md ("OpenSearch") are
unit-tested without a server.  The JSON is written here, not by the client's
serializer: it would turn a Decimal into a float, and a column's transport
(dvjob.sinks.schema) already tells how its values arrive: timestamps as ISO text
with an offset, nested values as JSON text (spliced in unparsed).
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dvjob.errors import ConfigError, JobError
from dvjob.sinks.contract import BadRecordHandler
from dvjob.sinks.opensearch.mapping import check_field_names
from dvjob.sinks.schema import SinkColumn, TableLayout

MAX_ID_BYTES = 512
"""OpenSearch refuses a longer document id."""
VERSION_TYPE = "external_gte"

ValueJson = Callable[[Any], str]
"""A column value (never None) to its JSON text."""
BulkLine = tuple[str, str | None]
"""One bulk action: its action line and, for an index action, its source line."""


def _string(value: Any) -> str:
    return json.dumps(str(value))


def _integer(value: Any) -> str:
    return str(int(value))


def _boolean(value: Any) -> str:
    return "true" if value else "false"


def _finite(value: float | decimal.Decimal) -> None:
    if not (value.is_finite() if isinstance(value, decimal.Decimal) else math.isfinite(value)):
        raise ValueError(f"{value} is not a number OpenSearch can store (NaN and infinities "
                         "have no JSON form): map it in the transform, e.g. to NULL")


def _floating(value: Any) -> str:
    number = float(value)
    _finite(number)
    return repr(number)


def _decimal(value: Any) -> str:
    """A JSON number with the exact digits: the source keeps them, only the index rounds."""
    number = value if isinstance(value, decimal.Decimal) else decimal.Decimal(str(value))
    _finite(number)
    return format(number, "f")


def _timestamp_text(value: Any) -> str:
    """`yyyy-MM-dd HH:mm:ss.SSSSSS+hh:mm` (dvjob.sinks.schema, in the session's zone) to ISO
    8601 in UTC: the same revision builds the same sources whatever the zone."""
    instant = dt.datetime.fromisoformat(str(value)).astimezone(dt.timezone.utc)
    return json.dumps(instant.isoformat(timespec="microseconds"))


def _temporal(value: Any) -> str:
    if isinstance(value, dt.date):  # datetime too: a TIMESTAMP_NTZ is naive, read as UTC
        return json.dumps(value.isoformat())
    return json.dumps(str(value))


def _binary(value: Any) -> str:
    return json.dumps(base64.b64encode(bytes(value)).decode("ascii"))


def _raw_json(value: Any) -> str:
    return str(value)


_PLAIN: dict[str, ValueJson] = {
    "text": _string, "bigint": _integer, "integer": _integer, "smallint": _integer,
    "double precision": _floating, "real": _floating, "boolean": _boolean,
    "date": _temporal, "timestamp": _temporal, "bytea": _binary,
}


def value_json(column: SinkColumn) -> ValueJson:
    """How one column's values are written as JSON, chosen once per column."""
    if column.transport == "json_text":
        return _raw_json
    if column.transport == "timestamp_text":
        return _timestamp_text
    if column.pg_type.startswith("numeric"):
        return _decimal
    try:
        return _PLAIN[column.pg_type]
    except KeyError:
        raise ConfigError(f"column {column.name!r}: type {column.pg_type} has no OpenSearch "
                          "mapping here: CAST it (e.g. to STRING or BIGINT)") from None


class Documents:
    """One layout's rows as document ids and sources."""

    def __init__(self, layout: TableLayout) -> None:
        check_field_names(layout)
        self.layout = layout
        self._fields = [(json.dumps(c.name) + ":", value_json(c)) for c in layout.columns]
        self._keys = [(p, self._fields[p][1]) for p in layout.key_positions]

    def source(self, row: Sequence[Any]) -> str:
        """The row's columns as one JSON object (NULL as null); `row` may carry the flag."""
        try:
            return "{" + ",".join(name + ("null" if value is None else to_json(value))
                                  for (name, to_json), value in zip(self._fields, row,
                                                                    strict=False)) + "}"
        except (ValueError, TypeError) as exc:
            raise ValueError(f"{self._culprit(row)}: {exc}") from None

    def _culprit(self, row: Sequence[Any]) -> str:
        for (name, to_json), value in zip(self._fields, row, strict=False):
            try:
                if value is not None:
                    to_json(value)
            except (ValueError, TypeError):
                return f"column {name[:-1]}"
        return "a column"

    def document_id(self, row: Sequence[Any]) -> str:
        """The key's value itself for a one-column key (a string as is, others as their JSON
        text), else the compact JSON array of the key's values (non-ASCII kept as is)."""
        if len(self._keys) == 1:
            position, to_json = self._keys[0]
            value = row[position]
            return str(value) if to_json is _string else _unquoted(to_json(value))
        return "[" + ",".join(_unescaped(to_json(row[p])) for p, to_json in self._keys) + "]"


def _unquoted(text: str) -> str:
    """A JSON string's content (dates, timestamps, base64); a number or literal as is."""
    return str(json.loads(text)) if text.startswith('"') else text


def _unescaped(text: str) -> str:
    """JSON text of a string without \\u escapes of non-ASCII, like json.dumps(ensure_ascii=
    False): an id should read as the key it is."""
    return json.dumps(json.loads(text), ensure_ascii=False) if "\\u" in text else text


def index_line(doc_id: str, version: int) -> str:
    return json.dumps({"index": {"_id": doc_id, "version": version,
                                 "version_type": VERSION_TYPE}}, separators=(",", ":"))


def delete_line(doc_id: str, version: int) -> str:
    return json.dumps({"delete": {"_id": doc_id, "version": version,
                                  "version_type": VERSION_TYPE}}, separators=(",", ":"))


def bulk_chunks(rows: Iterable[Sequence[Any]], docs: Documents, *, batch_id: int,
                bad: BadRecordHandler, max_actions: int, max_bytes: int
                ) -> Iterator[list[BulkLine]]:
    """The batch's bulk actions (version batch_id + 1), in chunks to send one after another.

    Within a chunk each id appears once, with its last row: a chunk's items may be retried
    (429) after others of the same chunk, so two actions on one id there could apply out of
    order.  Chunks go in order, so across chunks the later row wins too.  Rows are read as
    the chunks are sent: a batch is never held whole.
    """
    layout = docs.layout
    width = len(layout.columns) + 1
    version = batch_id + 1
    chunk: dict[str, BulkLine] = {}
    size = 0
    for row in rows:
        if len(row) != width:
            raise JobError(f"batch {batch_id}: row has {len(row)} values, expected {width}")
        null = next((p for p in layout.key_positions if row[p] is None), None)
        if null is not None:
            bad.null_key(batch_id, layout.column_names[null], row)
            continue
        try:
            doc_id = docs.document_id(row)
            action = (delete_line(doc_id, version), None) if row[-1] else (
                index_line(doc_id, version), docs.source(row))
        except ValueError as exc:
            raise JobError(f"batch {batch_id}: {exc}") from None
        _check_id(doc_id, batch_id)
        chunk[doc_id] = action
        size += len(action[0]) + len(action[1] or "") + 2
        if len(chunk) >= max_actions or size >= max_bytes:
            yield list(chunk.values())
            chunk, size = {}, 0
    if chunk:
        yield list(chunk.values())


def _check_id(doc_id: str, batch_id: int) -> None:
    if not doc_id:
        raise JobError(f"batch {batch_id}: a row's primary key is the empty string, which "
                       "OpenSearch refuses as a document id; filter it out or map it in the "
                       "transform")
    if len(doc_id.encode()) > MAX_ID_BYTES:
        raise JobError(f"batch {batch_id}: the document id of key {doc_id[:80]!r}... is "
                       f"{len(doc_id.encode())} bytes, OpenSearch allows {MAX_ID_BYTES}: key "
                       "the view by something shorter (e.g. a hash of the long value)")


BLOCKED = "cluster_block_exception"
"""A bulk item refused because the index has a block: the operator's write block during a
cutover (docs/freshness.md), or the disk watermark's read-only block. Both are lifted."""


@dataclass
class BulkAnswer:
    """One bulk response sorted by what the writer does next with each action."""

    upserted: int = 0
    deleted: int = 0
    busy: list[BulkLine] = field(default_factory=list)
    """Refused with 429 (a full write queue): re-sent after a back-off."""
    blocked: list[BulkLine] = field(default_factory=list)
    """Refused by an index block: re-sent once the block is lifted."""
    block_reason: str = ""
    refused: list[dict[str, Any]] = field(default_factory=list)
    """Refused for good (a mapping error, a document too large): the batch fails."""


def sort_items(sent: Sequence[BulkLine], items: Sequence[Mapping[str, Any]]) -> BulkAnswer:
    """Pair each sent action with its item (a bulk response keeps the request's order).

    A version conflict means the document holds this batch or a newer one, a delete's
    `not_found` that it is gone: both done."""
    if len(sent) != len(items):
        raise JobError(f"OpenSearch answered {len(items)} items to a bulk of {len(sent)} actions")
    answer = BulkAnswer()
    for action, wrapped in zip(sent, items, strict=True):
        op, item = next(iter(wrapped.items()))
        outcome, status = item.get("result"), item.get("status")
        error = item.get("error")
        kind = error.get("type") if isinstance(error, dict) else None
        if op == "index" and outcome in ("created", "updated"):
            answer.upserted += 1
        elif op == "delete" and outcome == "deleted":
            answer.deleted += 1
        elif status == 409 or (op == "delete" and outcome == "not_found"):
            pass
        elif status == 429:
            answer.busy.append(action)
        elif kind == BLOCKED:
            answer.blocked.append(action)
            answer.block_reason = answer.block_reason or str(error.get("reason"))
        else:
            answer.refused.append(item)
    return answer


def refusal_cause(item: Mapping[str, Any]) -> str:
    error = item.get("error")
    return (f"{error.get('type')}: {error.get('reason')}" if isinstance(error, dict)
            else str(error))


def bulk_body(actions: Sequence[BulkLine]) -> str:
    """NDJSON of the actions, with the trailing newline the bulk API requires."""
    return "".join(f"{line}\n{source}\n" if source is not None else f"{line}\n"
                   for line, source in actions)
