"""The OpenSearch mappings: the revision's index (from the layout) and the ledger index.

Pure data, unit-tested without a server; dvjob.sinks.opensearch.sink creates and checks them.
"""

from __future__ import annotations

from typing import Any

from dvjob.errors import ConfigError
from dvjob.sinks.schema import SinkColumn, TableLayout

KEYWORD_IGNORE_ABOVE = 8191
"""Longer strings stay in the source but are not indexed: Lucene refuses a term over 32766
bytes, which would fail the whole batch (8191 characters fit even at 4 bytes each)."""

_FIELD_TYPES: dict[str, str] = {
    "bigint": "long", "integer": "integer", "smallint": "short", "double precision": "double",
    "real": "float", "boolean": "boolean", "date": "date", "timestamp": "date",
    "timestamptz": "date", "bytea": "binary",
}


def field_mapping(column: SinkColumn, *, key: bool) -> dict[str, Any]:
    """A column's field.  Strings are `keyword` (exact match, sort, aggregate: what a view
    is queried by); nested values are kept in the source but not indexed, whatever their
    shape; decimals are `double` (scaled_float is a module a minimal server lacks; the
    source keeps the exact digits)."""
    if column.transport == "json_text":
        return {"type": "object", "enabled": False}
    if column.pg_type == "text":
        return {"type": "keyword"} if key else {"type": "keyword",
                                                 "ignore_above": KEYWORD_IGNORE_ABOVE}
    if column.pg_type.startswith("numeric"):
        return {"type": "double"}
    try:
        return {"type": _FIELD_TYPES[column.pg_type]}
    except KeyError:
        raise ConfigError(f"column {column.name!r}: type {column.pg_type} has no OpenSearch "
                          "mapping here: CAST it (e.g. to STRING or BIGINT)") from None


def check_field_names(layout: TableLayout) -> None:
    """Column names OpenSearch would read as something else than one top-level field."""
    for name in layout.column_names:
        if "." in name:
            raise ConfigError(f"transform output: column {name!r}: OpenSearch reads '.' in a "
                              "field name as an object path; give the column an alias without it")
        if name.startswith("_") or not name.strip():
            raise ConfigError(f"transform output: column {name!r}: OpenSearch reserves field "
                              "names starting with '_' (and needs a non-blank name); rename it")


def index_mapping(layout: TableLayout, *, view: str, revision: str,
                  uid: str | None = None) -> dict[str, Any]:
    """The revision's mapping, with its identity in `_meta.derived_views`.

    `dynamic: false`, not `strict`: each revision has its own index, so a mapping never
    evolves in place, and every document is built from the same layout as the mapping;
    `strict` would only turn a field someone else adds (an enrichment, a later job version)
    into a failed batch, and `true` would let a stray field fix its type for good.  With
    `false` such a field stays in the source, unindexed.
    """
    keys = set(layout.primary_key)
    owner = {"view": view, "revision": revision}
    if uid:  # the owning view's UID: another view of the same name (recreated) is refused
        owner["uid"] = uid
    return {
        "dynamic": "false",
        "_meta": {"derived_views": owner},
        "properties": {c.name: field_mapping(c, key=c.name in keys) for c in layout.columns},
    }


def index_body(layout: TableLayout, *, view: str, revision: str,
               uid: str | None = None) -> dict[str, Any]:
    """Settings and mapping for creating the revision's index.  One replica where a second
    node exists, none on a single node (whose cluster would otherwise stay yellow)."""
    return {"settings": {"index": {"auto_expand_replicas": "0-1"}},
            "mappings": index_mapping(layout, view=view, revision=revision, uid=uid)}


LEDGER_PROPERTIES: dict[str, Any] = {
    "revision": {"type": "keyword"}, "batch_id": {"type": "long"},
    "end_offsets": {"type": "object", "enabled": False},
    "rows_upserted": {"type": "long"}, "rows_deleted": {"type": "long"},
    "bad_records": {"type": "long"}, "committed_at": {"type": "date"},
    "index_uuid": {"type": "keyword"},
    # Where the replay began (dvjob.offsets.read_history_start), in every batch document; like
    # end_offsets kept in the source only: indexed, each topic and partition would be a field.
    "history_start": {"type": "object", "enabled": False},
}


def ledger_body() -> dict[str, Any]:
    """The ledger index, with the batch documents' fields (docs/sinks.md).  `dynamic: false`:
    the operator adds a summary document per revision (`<revision>:pruned`, with fields of
    its own) when it prunes batches; those stay in the source, unindexed."""
    return {"settings": {"index": {"auto_expand_replicas": "0-1"}},
            "mappings": {"dynamic": "false", "properties": LEDGER_PROPERTIES}}


def ledger_batches(revision: str) -> dict[str, Any]:
    """The query for a revision's batch documents (not the operator's summary document)."""
    return {"bool": {"filter": [{"term": {"revision": revision}},
                                {"exists": {"field": "batch_id"}}]}}


def ledger_id(revision: str, batch_id: int) -> str:
    return f"{revision}:{batch_id}"


def in_flight_id(revision: str) -> str:
    """The revision's in-flight document: how far the batch being written reaches (no
    `batch_id` field, so no batch query matches it; `revision`, so dropping the revision
    drops it). The operator's cutover reads it (docs/freshness.md)."""
    return f"{revision}:in-flight"


def progress_id(revision: str) -> str:
    """The revision's progress document: how far its running batch has read
    (dvjob.batch_progress); like the in-flight document, no `batch_id`, and its `revision`."""
    return f"{revision}:progress"
