"""What a replay reads and how long it takes, from the status alone: worked out by hand."""

from __future__ import annotations

from typing import Any

from derived_views.api.status import DerivedViewStatus
from derived_views.core.preview.replay_cost import replay_cost
from support.world.hand_observed import CONTENT_V1, I1, R1, record
from support.world.samples import R3, SQL_V2, make_spec

WEEK_MS = 604_800_000


def status(**changes: Any) -> DerivedViewStatus:
    """R1 serves; its replay began at offset 100 on orders/1 and hydrated 1,500 records in
    15 s (100/s); retired R3 hydrated 1,000 records in 5 s (200/s)."""
    fields: dict[str, Any] = {
        "revision": R1,
        "active": {"revision": R1, "index": I1, "since": "2026-03-01T11:01:00Z",
                   "lag": {"messages": 0,
                           "endOffsets": {"orders/0": 1200, "orders/1": 800}}},
        "revisions": [
            record(R1, "Active", content=CONTENT_V1, startedAt="2026-03-01T11:00:00Z",
                   historyStart={"orders/1": 100},
                   hydrationTarget={"orders/0": 1000, "orders/1": 600},
                   hydratedAt="2026-03-01T11:00:15Z"),
            record(R3, "Retired", startedAt="2026-03-01T10:00:00Z",
                   hydrationTarget={"orders/0": 500, "orders/1": 500},
                   hydratedAt="2026-03-01T10:00:05Z")],
        "sourceLogs": [{"topic": "orders", "cleanupPolicy": "delete", "retentionMs": WEEK_MS}],
    }
    fields.update(changes)
    return DerivedViewStatus.model_validate(fields)


def test_each_partition_reads_from_where_the_active_began_to_the_end_measured() -> None:
    cost = replay_cost(make_spec(SQL_V2), status())
    assert [(p.partition, p.first_offset, p.end_offset, p.records, p.holds_beginning)
            for p in cost.partitions] == [("orders/0", 0, 1200, 1200, None),
                                          ("orders/1", 100, 800, 700, False)]
    assert cost.records == 1900
    assert cost.lost_beginning == ("orders/1",)
    assert cost.may_lose_beginning == ("orders/0",)
    assert cost.retention == "orders: cleanup.policy=delete, retention.ms=604800000 (7 days)"


def test_the_time_is_a_range_over_the_views_measured_builds() -> None:
    cost = replay_cost(make_spec(SQL_V2), status())
    assert [(r.revision, r.records, r.seconds) for r in cost.rates] == [(R1, 1500, 15.0),
                                                                        (R3, 1000, 5.0)]
    assert cost.seconds() == (9.5, 19.0)


def test_without_a_measured_build_the_time_is_unknown() -> None:
    unmeasured = status(revisions=[record(R1, "Active", content=CONTENT_V1)])
    cost = replay_cost(make_spec(SQL_V2), unmeasured)
    assert cost.records == 2000  # no history start kept: both partitions from offset 0
    assert cost.rates == ()
    assert cost.seconds() is None


def test_a_log_kept_forever_holds_its_beginning() -> None:
    forever = status(sourceLogs=[{"topic": "orders", "cleanupPolicy": "delete",
                                  "retentionMs": -1, "retentionBytes": -1}])
    assert [p.holds_beginning for p in replay_cost(make_spec(), forever).partitions] == [
        True, False]


def test_a_new_view_has_nothing_measured() -> None:
    cost = replay_cost(make_spec(), None)
    assert (cost.partitions, cost.unmeasured_topics, cost.records, cost.seconds()) == (
        (), ("orders",), None, None)


def test_a_topic_the_status_has_not_measured_leaves_the_total_unknown() -> None:
    spec = make_spec(source={"topics": ["orders", "refunds"]})
    cost = replay_cost(spec, status())
    assert cost.unmeasured_topics == ("refunds",)
    assert cost.records is None
    assert cost.seconds() is None
