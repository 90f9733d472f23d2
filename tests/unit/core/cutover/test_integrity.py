"""Pure decisions: a lost index (core.cutover.integrity) and partition growth (core.log.partition_growth)."""

from __future__ import annotations

import pytest

from derived_views.core.cutover.integrity import lost_index_cause
from derived_views.core.log.partition_growth import growth_cause, orders_by_offset, partition_counts
from derived_views.core.observed import LedgerPosition

HEAD = LedgerPosition({("orders", 0): 10}, batch_id=4, index_oid=16400)


def test_no_claim_or_no_observation_decides_nothing() -> None:
    assert lost_index_cause("v__a", None, {}) is None
    assert lost_index_cause("v__a", HEAD, None) is None


def test_the_same_table_holds_the_claim() -> None:
    assert lost_index_cause("v__a", HEAD, {"v__a": 16400}) is None


def test_a_missing_table_is_lost() -> None:
    assert lost_index_cause("v__a", HEAD, {"v__b": 16400}) == (
        "index table v__a is missing but the ledger holds its committed batches up to 4 "
        "(dropped?)")


def test_another_table_under_the_name_is_lost() -> None:
    cause = lost_index_cause("v__a", HEAD, {"v__a": 16501})
    assert cause is not None and "identity 16501, recorded 16400" in cause


def test_an_unrecorded_identity_only_checks_existence() -> None:
    legacy = LedgerPosition({("orders", 0): 10}, batch_id=4)
    assert lost_index_cause("v__a", legacy, {"v__a": 1}) is None


@pytest.mark.parametrize(("sql", "expected"), [
    ("SELECT k, max_by(v, _kafka_offset) FROM events GROUP BY k", True),
    ("SELECT k, max_by(v, _KAFKA_OFFSET) FROM events GROUP BY k", True),
    ("SELECT k, v FROM events", False),
    ("SELECT k, my_kafka_offsets FROM events", False),
    (None, False),
])
def test_offset_ordering_is_read_from_the_sql(sql: str | None, expected: bool) -> None:
    assert orders_by_offset(sql) is expected


def test_growth_is_reported_per_topic_only_when_the_sql_orders_by_offset() -> None:
    ends = {("a", 0): 1, ("a", 1): 1, ("a", 2): 1, ("b", 0): 1}
    assert partition_counts(ends, ["a", "b", "c"]) == {"a": 3, "b": 1}
    sql = "SELECT k, max_by(v, _kafka_offset) FROM events GROUP BY k"
    cause = growth_cause("r1", sql, {"a": 2, "b": 1}, ends)
    assert cause is not None and "(a 2->3)" in cause
    assert growth_cause("r1", "SELECT k FROM events", {"a": 2, "b": 1}, ends) is None
    assert growth_cause("r1", sql, {"a": 3, "b": 1}, ends) is None
    assert growth_cause("r1", sql, None, ends) is None
    assert growth_cause("r1", sql, {"a": 2}, None) is None
