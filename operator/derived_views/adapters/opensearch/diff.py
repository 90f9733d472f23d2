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

Under live traffic the two jobs stand at different log positions, so a key the faster one
has updated differs by the lag alone. The ledger has no per-document batch (as PostgreSQL's
rows have their transaction), so the keys that differed (up to SETTLE_MAX) are read again
(`mget`, real time) once both revisions' ledgers have passed the position the further one
had reached when the pass ended: a key that then agrees differed only in flight
(`DiffFound.settled`). A key the traffic touched again in between may still differ: that
errs towards blocking, never towards passing.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from opensearchpy import OpenSearch
from opensearchpy.exceptions import ConnectionTimeout

from derived_views.adapters.opensearch.ledger import read_heads
from derived_views.core.check_runs import EXAMPLES, CheckRequest
from derived_views.core.cutover.diff import (
    ColumnChanges,
    ColumnsRefused,
    DiffFound,
    Mode,
    diff_columns,
    reached,
    settle_position,
)

PAGE = 1000
"""Documents fetched from each index per request."""
SETTLE_MAX = 10_000
"""Keys that differed read again at most; past it the first read's counts stand."""
SETTLE_POLL_SECONDS = 0.5
_Fields = dict[str, Any]


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
        self.differing: list[str] = []
        """Every key that differed, in `_id` order (no longer kept past SETTLE_MAX)."""
        self.overflow = False
        self.settled = 0

    def note(self, kind: str, into: list[str], key: str) -> None:
        self.counts[kind] += 1
        if len(into) < EXAMPLES:
            into.append(key)
        if len(self.differing) < SETTLE_MAX:
            self.differing.append(key)
        else:
            self.overflow = True

    def pair(self, key: str, c: _Fields, a: _Fields) -> None:
        differing = [col for col in self.columns if c.get(col) != a.get(col)]
        for col in differing:
            self.column_counts[col] += 1
            if len(self.by_column[col]) < EXAMPLES:
                self.by_column[col].append(key)
        if differing:
            self.note("changed", self.changed, key)

    def one(self, key: str, c: _Fields | None, a: _Fields | None) -> None:
        """A key as both indexes hold it (None: not there)."""
        if c is not None and a is not None:
            self.pair(key, c, a)
        elif c is not None:
            self.note("only_c", self.only_c, key)
        elif a is not None:
            self.note("only_a", self.only_a, key)


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


def diff_search_indexes(client: OpenSearch, request: CheckRequest, deadline: float,
                        ledger: str | None = None) -> DiffFound | str:
    """The diff of the request's candidate and active index, or why it cannot be run; with the
    sink's `ledger` index, the keys that differed are read again once both jobs are past the
    same position (see the module's docstring)."""
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
    if complete and ledger is not None and tally.differing and not tally.overflow:
        tally = _settle(client, request, ledger, tally, deadline)
    return DiffFound(
        mode=Mode.STREAMED, candidate_rows=rows_c, active_rows=rows_a,
        only_candidate=tally.counts["only_c"], only_active=tally.counts["only_a"],
        changed=tally.counts["changed"],
        columns=tuple(ColumnChanges(col, tally.column_counts[col], tuple(tally.by_column[col]))
                      for col in columns.compared),
        only_candidate_examples=tuple(tally.only_c), only_active_examples=tuple(tally.only_a),
        changed_examples=tuple(tally.changed), not_compared=columns.not_compared,
        complete=complete, compared=tally.read, settled=tally.settled)


def _settle(client: OpenSearch, request: CheckRequest, ledger: str, first: _Tally,
            deadline: float) -> _Tally:
    """The first read's tally with its differing keys read again once both revisions' ledgers
    reached the settle position; the first tally when they do not before the deadline."""
    revisions = [request.revision, request.active_revision or ""]
    positions = read_heads(client, ledger, revisions).positions
    if not all(r in positions for r in revisions):
        return first
    target = settle_position(*(positions[r].end_offsets for r in revisions))
    while not all(r in positions and reached(positions[r].end_offsets, target)
                  for r in revisions):
        if time.monotonic() + SETTLE_POLL_SECONDS >= deadline:
            return first
        time.sleep(SETTLE_POLL_SECONDS)  # a job's next commit, polled within the check's timeout
        positions = read_heads(client, ledger, revisions).positions
    assert request.active_index is not None
    try:
        again_c = _by_id(client, request.index, first.differing, first.columns, deadline)
        again_a = _by_id(client, request.active_index, first.differing, first.columns, deadline)
    except (_OutOfTime, ConnectionTimeout):
        return first
    settled = _Tally(first.columns)
    settled.read = first.read
    for key in first.differing:
        settled.one(key, again_c.get(key), again_a.get(key))
    settled.settled = len(first.differing) - len(settled.differing)
    return settled


def _by_id(client: OpenSearch, index: str, keys: list[str], fields: tuple[str, ...],
           deadline: float) -> dict[str, _Fields]:
    """The documents of `keys` the index holds now (`mget` reads in real time, not as of
    the last refresh), a page at a time."""
    found: dict[str, _Fields] = {}
    for start in range(0, len(keys), PAGE):
        answer = client.mget(index=index, body={"ids": keys[start:start + PAGE]},
                             params={"_source": ",".join(fields) if fields else "false",
                                     "request_timeout": _left(deadline)})
        for doc in answer["docs"]:
            if doc.get("found"):
                found[str(doc["_id"])] = doc.get("_source") or {}
    return found
