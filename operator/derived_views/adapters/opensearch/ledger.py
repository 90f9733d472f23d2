"""The OpenSearch sink's ledger as the operator reads and prunes it (docs/sinks.md).

The job writes one document per batch into the ledger index (`<revision>:<batch_id>`),
with `refresh=wait_for`, so a search sees every batch whose rows are in the index. The
operator reads each revision's newest batch and an earlier one for the commit rate, and
prunes what neither resuming nor the rate needs. Bad-record counts live in the batch
documents; a pruned batch's count moves into the revision's summary document
(`<revision>:pruned`, written with a sequence-number check, before the delete), which
records below which batch id the counts were folded: a crash between the two steps
neither loses nor doubles a count.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from opensearchpy import NotFoundError, OpenSearch

from derived_views.adapters.sink_contract import LEDGER_KEEP_BATCHES, RATE_WINDOW_SECONDS
from derived_views.core.observed import LedgerPosition, RunningBatch


def _summary_id(revision: str) -> str:
    return f"{revision}:pruned"


def _progress_id(revision: str) -> str:
    """The job's report of its running batch (dvjob.sinks.opensearch.mapping.progress_id)."""
    return f"{revision}:progress"


def _batches_of(revision: str, *more: dict[str, Any]) -> dict[str, Any]:
    return {"bool": {"filter": [{"term": {"revision": revision}},
                                {"exists": {"field": "batch_id"}}, *more]}}


def _time(raw: Any) -> dt.datetime | None:
    if not raw:
        return None
    parsed = dt.datetime.fromisoformat(str(raw).replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def _offsets(raw: Any) -> dict[tuple[str, int], int]:
    """The ledger's `{topic: {partition: offset}}` as `{(topic, partition): offset}`."""
    return {(topic, int(p)): int(o) for topic, parts in (raw or {}).items()
            for p, o in parts.items()}


def ledger_exists(client: OpenSearch, ledger: str) -> bool:
    return bool(client.indices.exists(index=ledger))


class Heads(NamedTuple):
    positions: dict[str, LedgerPosition]
    bad: dict[str, int]
    """Bad-record totals."""
    oldest: dict[str, int]
    """Oldest batch id kept."""
    running: dict[str, RunningBatch]
    """The job's last report of its running batch (revisions that reported)."""


def read_heads(client: OpenSearch, ledger: str, revisions: Iterable[str]) -> Heads:
    """Per revision with a batch: its head, bad-record total and oldest batch kept; per
    revision that reported one, its running batch.

    One `mget` (the summaries and progress reports) and two `_msearch` requests whatever the
    number of revisions: the newest batch of each (with the sum of bad records above the
    summary's fold point), then the earlier batch for the rate.
    """
    wanted = sorted(set(revisions))
    if not wanted or not ledger_exists(client, ledger):
        return Heads({}, {}, {}, {})
    summaries, running = _summaries(client, ledger, wanted)
    body: list[dict[str, Any]] = []
    for revision in wanted:
        folded_below = summaries.get(revision, (0, 0))[0]
        body += [{"index": ledger}, {
            "size": 1, "sort": [{"batch_id": "desc"}],
            "query": _batches_of(revision),
            "aggs": {"oldest": {"min": {"field": "batch_id"}},
                     "bad": {"filter": {"range": {"batch_id": {"gte": folded_below}}},
                             "aggs": {"sum": {"sum": {"field": "bad_records"}}}}}}]
    newest: dict[str, dict[str, Any]] = {}
    bad: dict[str, int] = {}
    oldest: dict[str, int] = {}
    for revision, answer in zip(wanted, _msearch(client, body), strict=False):
        hits = answer["hits"]["hits"]
        if not hits:
            continue
        newest[revision] = hits[0]["_source"]
        aggs = answer["aggregations"]
        bad[revision] = summaries.get(revision, (0, 0))[1] + int(aggs["bad"]["sum"]["value"] or 0)
        oldest[revision] = int(aggs["oldest"]["value"])
    earlier = _earlier(client, ledger, newest)
    positions = {}
    for revision, doc in newest.items():
        before = earlier.get(revision)
        positions[revision] = LedgerPosition(
            end_offsets=_offsets(doc.get("end_offsets")), committed_at=_time(doc.get("committed_at")),
            batch_id=int(doc["batch_id"]), index_oid=doc.get("index_uuid"),
            history_start=(None if doc.get("history_start") is None
                           else _offsets(doc["history_start"])),
            earlier=None if before is None else LedgerPosition(
                end_offsets=_offsets(before.get("end_offsets")),
                committed_at=_time(before.get("committed_at")), batch_id=int(before["batch_id"])))
    return Heads(positions, bad, oldest, running)


def _msearch(client: OpenSearch, body: list[dict[str, Any]]) -> list[dict[str, Any]]:
    answers: list[dict[str, Any]] = client.msearch(body=body)["responses"]
    for answer in answers:
        if "error" in answer:
            raise RuntimeError(f"ledger search failed: {answer['error']}")
    return answers


def running_batch(source: Mapping[str, Any]) -> RunningBatch | None:
    """A progress document's report, or None when it does not parse: it is the job's word,
    written where anyone with the cluster's write credentials could write, so a malformed
    one is ignored rather than failing the view's pass."""
    try:
        reported, started = _time(source.get("reported_at")), _time(source.get("started_at"))
        if reported is None or started is None:
            return None
        return RunningBatch(batch_id=int(source["progress_batch"]),
                            records_read=int(source["records_read"]),
                            end_offsets=_offsets(source.get("end_offsets")),
                            started_at=started, reported_at=reported)
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def _summaries(client: OpenSearch, ledger: str, revisions: list[str]
               ) -> tuple[dict[str, tuple[int, int]], dict[str, RunningBatch]]:
    """revision -> (folded below batch id, bad records folded) from the summary documents,
    and revision -> its running batch from the progress documents (a real-time get: the job
    writes them without a refresh)."""
    reports = {_progress_id(r): r for r in revisions}
    ids = [_summary_id(r) for r in revisions] + list(reports)
    docs = client.mget(index=ledger, body={"ids": ids})["docs"]
    summaries, running = {}, {}
    for doc in docs:
        if not doc.get("found"):
            continue
        source = doc["_source"]
        if doc["_id"] in reports:
            report = running_batch(source)
            if report is not None:
                running[reports[doc["_id"]]] = report
        else:
            summaries[source["revision"]] = (int(source["folded_below"]),
                                             int(source["bad_records"]))
    return summaries, running


def _earlier(client: OpenSearch, ledger: str, newest: Mapping[str, Mapping[str, Any]]
             ) -> dict[str, dict[str, Any]]:
    """The newest batch a rate window older than the newest, else the revision's first."""
    body: list[dict[str, Any]] = []
    order = sorted(newest)
    for revision in order:
        head = newest[revision]
        before_head = {"range": {"batch_id": {"lt": int(head["batch_id"])}}}
        cutoff = _time(head.get("committed_at"))
        old_enough = [] if cutoff is None else [{"range": {"committed_at": {
            "lte": (cutoff - dt.timedelta(seconds=RATE_WINDOW_SECONDS)).isoformat()}}}]
        body += [{"index": ledger}, {"size": 1, "sort": [{"batch_id": "desc"}],
                                     "query": _batches_of(revision, before_head, *old_enough)},
                 {"index": ledger}, {"size": 1, "sort": [{"batch_id": "asc"}],
                                     "query": _batches_of(revision, before_head)}]
    if not body:
        return {}
    answers = _msearch(client, body)
    out: dict[str, dict[str, Any]] = {}
    for i, revision in enumerate(order):
        for answer in (answers[2 * i], answers[2 * i + 1]):
            hits = answer["hits"]["hits"]
            if hits:
                out[revision] = hits[0]["_source"]
                break
    return out


def prune(client: OpenSearch, ledger: str, positions: Mapping[str, LedgerPosition],
          oldest: Mapping[str, int], keep_batches: int = LEDGER_KEEP_BATCHES) -> int:
    """Delete batch documents neither resuming nor the rate needs; returns how many went.

    Kept per revision: everything from the earlier batch the rate reads on, and at least the
    newest `keep_batches`; a revision whose earlier batch is its first keeps all.
    """
    deleted = 0
    for revision, head in positions.items():
        if head.batch_id is None or head.earlier is None or head.earlier.batch_id is None:
            continue
        keep_from = min(head.earlier.batch_id, head.batch_id - keep_batches)
        if oldest.get(revision, keep_from) >= keep_from:
            continue
        _fold(client, ledger, revision, keep_from)
        deleted += _delete_matching(client, ledger, _batches_of(revision, {"range": {
            "batch_id": {"lt": keep_from}}}))
    return deleted


DELETE_PAGE = 1000


def _delete_matching(client: OpenSearch, ledger: str, query: dict[str, Any]) -> int:
    """Delete the documents `query` matches, a page of ids at a time, by one bulk request each.

    Not `_delete_by_query`: it lives in the reindex module, which a minimal distribution
    (the stack's integ-test zip) leaves out, and a page bounds one pass's work anyway.
    """
    deleted = 0
    while True:
        hits = client.search(index=ledger, body={"size": DELETE_PAGE, "_source": False,
                                                 "query": query})["hits"]["hits"]
        if not hits:
            return deleted
        lines = [{"delete": {"_index": ledger, "_id": h["_id"]}} for h in hits]
        answer = client.bulk(body=lines, params={"refresh": "true"})
        deleted += sum(1 for item in answer["items"] if item["delete"].get("result") == "deleted")
        if len(hits) < DELETE_PAGE:
            return deleted


def _fold(client: OpenSearch, ledger: str, revision: str, keep_from: int) -> None:
    """Move the bad-record counts of batches below `keep_from` into the summary document."""
    try:
        found = client.get(index=ledger, id=_summary_id(revision))
        source, cas = found["_source"], {"if_seq_no": found["_seq_no"],
                                          "if_primary_term": found["_primary_term"]}
    except NotFoundError:
        source, cas = {"revision": revision, "folded_below": 0, "bad_records": 0}, {}
    folded_below = int(source["folded_below"])
    if folded_below >= keep_from:
        return
    answer = client.search(index=ledger, body={
        "size": 0, "query": _batches_of(revision, {"range": {"batch_id": {
            "gte": folded_below, "lt": keep_from}}}),
        "aggs": {"sum": {"sum": {"field": "bad_records"}}}})
    moved = int(answer["aggregations"]["sum"]["value"] or 0)
    params: dict[str, Any] = {"refresh": "true", **cas}
    if not cas:
        params["op_type"] = "create"
    client.index(index=ledger, id=_summary_id(revision), params=params, body={
        "revision": revision, "folded_below": keep_from,
        "bad_records": int(source["bad_records"]) + moved})


def in_flight_id(revision: str) -> str:
    """As the job names it (dvjob.sinks.opensearch.mapping.in_flight_id)."""
    return f"{revision}:in-flight"


def in_flight(client: OpenSearch, ledger: str, revision: str) -> dict[tuple[str, int], int]:
    """The end offsets of the batch the revision's job is writing or wrote last (empty: none
    recorded). A get, not a search: real-time, so a document written a moment ago counts."""
    try:
        found = client.get(index=ledger, id=in_flight_id(revision))
    except NotFoundError:
        return {}
    return _offsets(found["_source"].get("end_offsets"))


def _hold_id(alias: str) -> str:
    return f"hold:{alias}"


def record_hold(client: OpenSearch, ledger: str, alias: str, index: str) -> None:
    """Say, before blocking `index`'s writes for a cutover, that this alias's switch holds it:
    an operator that dies holding it leaves this record for the next pass to lift."""
    client.index(index=ledger, id=_hold_id(alias), body={
        "hold_of": alias, "index": index, "since": dt.datetime.now(dt.UTC).isoformat()})


def hold_of(client: OpenSearch, ledger: str, alias: str) -> tuple[str, dt.datetime] | None:
    """(index held, since when) for the alias's switch, if one is recorded."""
    try:
        found = client.get(index=ledger, id=_hold_id(alias))
    except NotFoundError:
        return None
    since = _time(found["_source"].get("since"))
    return str(found["_source"]["index"]), since or dt.datetime.min.replace(tzinfo=dt.UTC)


def forget_hold(client: OpenSearch, ledger: str, alias: str) -> None:
    with contextlib.suppress(NotFoundError):
        client.delete(index=ledger, id=_hold_id(alias))


def drop_revision(client: OpenSearch, ledger: str, revision: str) -> None:
    """Every ledger document of a revision (its batches, its summary, its in-flight and its
    progress documents). The job writes the last two without a refresh, so a search may not
    see them yet: they are deleted by id too."""
    if not ledger_exists(client, ledger):
        return
    _delete_matching(client, ledger, {"term": {"revision": revision}})
    client.bulk(body=[{"delete": {"_index": ledger, "_id": doc_id}}
                      for doc_id in (in_flight_id(revision), _progress_id(revision))],
                params={"refresh": "true"})
