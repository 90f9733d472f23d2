"""A running batch's progress report as the operator parses it: the job's word, so anything
malformed is ignored (no report) instead of failing the view's pass."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from derived_views.adapters.opensearch.ledger import running_batch
from derived_views.adapters.postgres.progress import _end_offsets
from derived_views.core.observed import RunningBatch

T0 = dt.datetime(2026, 3, 1, 12, 0, 0, tzinfo=dt.UTC)
GOOD = {"revision": "r1", "progress_batch": 4, "records_read": 900,
        "end_offsets": {"orders": {"0": 1200, "1": 40}},
        "started_at": "2026-03-01T12:00:00+00:00", "reported_at": "2026-03-01T12:00:09Z"}


def test_a_progress_document_becomes_a_running_batch() -> None:
    assert running_batch(GOOD) == RunningBatch(
        batch_id=4, records_read=900, end_offsets={("orders", 0): 1200, ("orders", 1): 40},
        started_at=T0, reported_at=T0 + dt.timedelta(seconds=9))


@pytest.mark.parametrize("change", [
    {"progress_batch": "four"}, {"records_read": None}, {"end_offsets": ["orders"]},
    {"end_offsets": {"orders": {"zero": 1}}}, {"reported_at": "yesterday"},
    {"started_at": None}, {"progress_batch": None}])
def test_a_malformed_progress_document_is_no_report(change: dict[str, Any]) -> None:
    assert running_batch({**GOOD, **change}) is None


def test_postgres_end_offsets_of_another_shape_are_no_report() -> None:
    assert _end_offsets({"orders": {"0": 5}}) == {("orders", 0): 5}
    for bad in (None, [], {"orders": 5}, {"orders": {"x": 1}}, "{}"):
        assert _end_offsets(bad) is None
