"""Measure the diff check on OpenSearch: both indexes read side by side in `_id` order
(`search_after`, a page of each at a time) and each document's compared fields set side by
side here; core.cutover.diff judges.

A document's `_id` is its primary key (the job writes it so), so `_id` order matches rows as
PostgreSQL's join does. The fields compared are the top-level fields both indexes' mappings
have (or the named ones among them), the key's own fields excepted; a missing field reads
as null. Memory is a page of each index whatever their size; time is bounded by the check's
timeout: a comparison it stops reports what it compared (judged on that: too much already
fails, too little to decide is an error). There is no hashed mode: OpenSearch keeps no
per-range hash to compare, so every document is read once.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from opensearchpy import OpenSearch
from opensearchpy.exceptions import ConnectionTimeout

from derived_views.core.check_runs import EXAMPLES, CheckRequest
from derived_views.core.cutover.diff import (
    ColumnChanges,
    ColumnsRefused,
    DiffFound,
    Mode,
    diff_columns,
)

PAGE = 1000
"""Documents fetched from each index per request."""


class _OutOfTime(Exception):
    pass


def index_fields(client: OpenSearch, index: str, timeout: float) -> tuple[str, ...]:
    """The index's top-level fields as its mapping has them."""
    mapping: dict[str, Any] = client.indices.get_mapping(index=index,
                                                         params={"request_timeout": timeout})
    first: dict[str, Any] = next(iter(mapping.values()), {})
    return tuple(first.get("mappings", {}).get("properties", {}))


def _left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise _OutOfTime
    return left


def _documents(client: OpenSearch, index: str, fields: tuple[str, ...], deadline: float
               ) -> Iterator[tuple[str, dict[str, Any]]]:
    """(id, source) of every document of the index in `_id` order, a page at a time."""
    after: list[Any] | None = None
    while True:
        body: dict[str, Any] = {"size": PAGE, "sort": [{"_id": "asc"}],
                                "_source": list(fields) or False,
                                "query": {"match_all": {}}}
        if after is not None:
            body["search_after"] = after
        hits = client.search(index=index, body=body,
                             params={"request_timeout": _left(deadline)})["hits"]["hits"]
        for hit in hits:
            yield str(hit["_id"]), hit.get("_source") or {}
        if len(hits) < PAGE:
            return
        after = hits[-1]["sort"]


class _Tally:
    def __init__(self, columns: tuple[str, ...]) -> None:
        self.columns = columns
        self.only_c: list[str] = []
        self.only_a: list[str] = []
        self.changed: list[str] = []
        self.by_column: dict[str, list[str]] = {c: [] for c in columns}
        self.counts = {"only_c": 0, "only_a": 0, "changed": 0}
        self.column_counts = dict.fromkeys(columns, 0)
        self.read = 0

    def note(self, kind: str, into: list[str], key: str) -> None:
        self.counts[kind] += 1
        if len(into) < EXAMPLES:
            into.append(key)

    def pair(self, key: str, c: dict[str, Any], a: dict[str, Any]) -> None:
        differing = [col for col in self.columns if c.get(col) != a.get(col)]
        for col in differing:
            self.column_counts[col] += 1
            if len(self.by_column[col]) < EXAMPLES:
                self.by_column[col].append(key)
        if differing:
            self.note("changed", self.changed, key)


def _compare(tally: _Tally, cand: Iterator[tuple[str, dict[str, Any]]],
             active: Iterator[tuple[str, dict[str, Any]]]) -> None:
    """A merge of two `_id`-ordered streams (Python's str order is `_id`'s byte order)."""
    c, a = next(cand, None), next(active, None)
    while c is not None or a is not None:
        if a is None or (c is not None and c[0] < a[0]):
            assert c is not None
            tally.note("only_c", tally.only_c, c[0])
            tally.read += 1
            c = next(cand, None)
        elif c is None or a[0] < c[0]:
            tally.note("only_a", tally.only_a, a[0])
            tally.read += 1
            a = next(active, None)
        else:
            tally.pair(c[0], c[1], a[1])
            tally.read += 2
            c, a = next(cand, None), next(active, None)


def diff_search_indexes(client: OpenSearch, request: CheckRequest, deadline: float) -> DiffFound | str:
    """The diff of the request's candidate and active index, or why it cannot be run."""
    check = request.checks.diff
    assert check is not None and request.active_index is not None
    timeout = max(1.0, deadline - time.monotonic())
    try:
        columns = diff_columns(index_fields(client, request.index, timeout),
                               index_fields(client, request.active_index, timeout),
                               request.primary_key, check)
    except ColumnsRefused as exc:
        return str(exc)
    params = {"request_timeout": timeout}
    rows_c = int(client.count(index=request.index, params=params)["count"])
    rows_a = int(client.count(index=request.active_index, params=params)["count"])
    tally = _Tally(columns.compared)
    complete = True
    try:
        _compare(tally, _documents(client, request.index, columns.compared, deadline),
                 _documents(client, request.active_index, columns.compared, deadline))
    except (_OutOfTime, ConnectionTimeout):
        complete = False
    return DiffFound(
        mode=Mode.STREAMED, candidate_rows=rows_c, active_rows=rows_a,
        only_candidate=tally.counts["only_c"], only_active=tally.counts["only_a"],
        changed=tally.counts["changed"],
        columns=tuple(ColumnChanges(col, tally.column_counts[col], tuple(tally.by_column[col]))
                      for col in columns.compared),
        only_candidate_examples=tuple(tally.only_c), only_active_examples=tuple(tally.only_a),
        changed_examples=tuple(tally.changed), not_compared=columns.not_compared,
        complete=complete, compared=tally.read)
