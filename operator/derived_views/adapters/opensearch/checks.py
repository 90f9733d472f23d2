"""Run a candidate's cutover checks against OpenSearch: measurements only, judged in core.cutover.checks.

Row counts come from `_count` on both indexes (near real time: what a refresh has made
searchable, as readers see it). The key sample draws random document ids from one index
(`random_score`, a new seed each run) and asks the other for them by id with `_mget`, which
reads the newest version without waiting for a refresh. The diff reads both indexes in `_id`
order (adapters.opensearch.diff). SQL assertions are refused for an
OpenSearch sink at admission, so none reaches here.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

from opensearchpy import OpenSearch, TransportError
from opensearchpy.exceptions import ConnectionError as OpenSearchConnectionError
from opensearchpy.exceptions import ConnectionTimeout

from derived_views.adapters.opensearch.diff import diff_search_indexes
from derived_views.core.check_runs import EXAMPLES, CheckKind, CheckRequest, measured
from derived_views.core.cutover.checks import (
    CouldNotRun,
    KeySampleFound,
    Measurement,
    RowCounts,
)
from derived_views.core.naming import LEDGER_TABLE


def run_query_checks(client: OpenSearch, request: CheckRequest, ledger: str = LEDGER_TABLE
                     ) -> dict[str, tuple[Measurement, float]]:
    """Each check's measurement and how long it took; a check that cannot run says why.
    `ledger`: the sink's ledger index (the diff reads where each job stands)."""
    found: dict[str, tuple[Measurement, float]] = {}
    timeout = float(request.checks.timeout_seconds)
    for check in measured(request):  # the registry of check kinds, in its order
        if check.kind is CheckKind.ROW_COUNT:
            found[check.name] = _timed(timeout, lambda: _row_counts(client, request, timeout))
        elif check.kind is CheckKind.KEY_SAMPLE:
            found[check.name] = _timed(timeout, lambda: _key_sample(client, request, timeout))
        elif check.kind is CheckKind.DIFF:
            found[check.name] = _timed(timeout, lambda: _diff(client, request, timeout,
                                                              ledger))
        else:
            found[check.name] = (CouldNotRun("SQL assertions need a PostgreSQL sink"), 0.0)
    return found


def _timed(timeout: float, measure: Callable[[], Measurement]) -> tuple[Measurement, float]:
    started = time.perf_counter()
    try:
        measured = measure()
    except ConnectionTimeout:
        measured = CouldNotRun(f"timed out after {timeout:g}s")
    except (OpenSearchConnectionError, TransportError) as exc:
        measured = CouldNotRun(message_line(exc))
    return measured, time.perf_counter() - started


def message_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _count(client: OpenSearch, index: str, timeout: float) -> int:
    return int(client.count(index=index, params={"request_timeout": timeout})["count"])


def _row_counts(client: OpenSearch, request: CheckRequest, timeout: float) -> RowCounts:
    assert request.active_index is not None
    return RowCounts(candidate=_count(client, request.index, timeout),
                     active=_count(client, request.active_index, timeout))


def _diff(client: OpenSearch, request: CheckRequest, timeout: float, ledger: str
          ) -> Measurement:
    found = diff_search_indexes(client, request, time.monotonic() + timeout, ledger)
    return CouldNotRun(found) if isinstance(found, str) else found


def _missing(client: OpenSearch, source: str, other: str, size: int, timeout: float
             ) -> tuple[int, int, list[str]]:
    """(sampled, missing, examples): random ids of `source` absent from `other`."""
    params = {"request_timeout": timeout}
    sample = client.search(index=source, params=params, body={
        "size": size, "_source": False,
        "query": {"function_score": {"query": {"match_all": {}}, "boost_mode": "replace",
                                     "random_score": {"seed": random.getrandbits(31),
                                                      "field": "_seq_no"}}}})
    ids = [hit["_id"] for hit in sample["hits"]["hits"]]
    if not ids:
        return 0, 0, []
    docs = client.mget(index=other, params={**params, "_source": "false"},
                       body={"ids": ids})["docs"]
    missing = [d["_id"] for d in docs if not d.get("found")]
    return len(ids), len(missing), missing[:EXAMPLES]


def _key_sample(client: OpenSearch, request: CheckRequest, timeout: float) -> KeySampleFound:
    assert request.active_index is not None and request.checks.key_sample is not None
    size = request.checks.key_sample.size
    sampled_a, missing_c, ex_c = _missing(client, request.active_index, request.index, size,
                                          timeout)
    sampled_c, missing_a, ex_a = _missing(client, request.index, request.active_index, size,
                                          timeout)
    return KeySampleFound(sampled_active=sampled_a, missing_from_candidate=missing_c,
                          sampled_candidate=sampled_c, missing_from_active=missing_a,
                          examples=tuple((ex_c + ex_a)[:EXAMPLES]))
