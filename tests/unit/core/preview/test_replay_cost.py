"""What a replay reads and how long it takes, from the status alone: worked out by hand."""

from __future__ import annotations

from typing import Any

from derived_views.api.status import DerivedViewStatus
from derived_views.core.log.build_rates import AssumedRate
from derived_views.core.preview.replay_cost import replay_cost
from support.world.hand_observed import CONTENT_V1, I1, R1, record
from support.world.samples import R3, SQL_V2, make_spec

WEEK_MS = 604_800_000


DEFAULT = AssumedRate(40_000.0, 30.0)


def status(**changes: Any) -> DerivedViewStatus:
    """R1 serves; its replay began at offset 100 on orders/1; its build committed 100 records
    15 s in, then 100 records/s (a start-up of 15 - 100/100 = 14 s); retired R3's build
    committed 200 records 6.5 s in, then 200/s (a start-up of 5.5 s)."""
    fields: dict[str, Any] = {
        "revision": R1,
        "active": {"revision": R1, "index": I1, "since": "2026-03-01T11:01:00Z",
                   "lag": {"messages": 0,
                           "endOffsets": {"orders/0": 1200, "orders/1": 800}}},
        "revisions": [
            record(R1, "Active", content=CONTENT_V1, startedAt="2026-03-01T11:00:00Z",
                   historyStart={"orders/1": 100},
                   buildRate={"firstRecords": 100, "firstSeconds": 15, "records": 1500,
                              "seconds": 29, "recordsPerSecond": 100},
                   hydratedAt="2026-03-01T11:00:29Z"),
            record(R3, "Retired", startedAt="2026-03-01T10:00:00Z",
                   buildRate={"firstRecords": 200, "firstSeconds": 6.5, "records": 1000,
                              "seconds": 10.5, "recordsPerSecond": 200},
                   hydratedAt="2026-03-01T10:00:10Z")],
        "sourceLogs": [{"topic": "orders", "cleanupPolicy": "delete", "retentionMs": WEEK_MS}],
    }
    fields.update(changes)
    return DerivedViewStatus.model_validate(fields)


def test_each_partition_reads_from_where_the_active_began_to_the_end_measured() -> None:
    cost = replay_cost(make_spec(SQL_V2), status(), DEFAULT)
    assert [(p.partition, p.first_offset, p.end_offset, p.records, p.holds_beginning)
            for p in cost.partitions] == [("orders/0", 0, 1200, 1200, None),
                                          ("orders/1", 100, 800, 700, False)]
    assert cost.records == 1900
    assert cost.lost_beginning == ("orders/1",)
    assert cost.may_lose_beginning == ("orders/0",)
    assert cost.retention == "orders: cleanup.policy=delete, retention.ms=604800000 (7 days)"


def test_the_time_is_a_range_around_the_active_revisions_measured_build() -> None:
    cost = replay_cost(make_spec(SQL_V2), status(), DEFAULT)
    assert cost.rate == AssumedRate(100.0, 14.0, R1)
    # 1,900 records after 14 s: at 150/s 26.7 s, at 66.7/s 42.5 s
    assert cost.seconds() == (27, 43)


def test_without_the_actives_measurement_the_newest_measured_build_is_assumed() -> None:
    unmeasured = status(revisions=[record(R1, "Active", content=CONTENT_V1),
                                   *status().revisions[1:]])
    cost = replay_cost(make_spec(SQL_V2), unmeasured, DEFAULT)
    assert cost.records == 2000  # no history start kept: both partitions from offset 0
    assert cost.rate == AssumedRate(200.0, 5.5, R3)
    # 2,000 records after 5.5 s: at 300/s 12.2 s, at 133.3/s 20.5 s
    assert cost.seconds() == (13, 21)


def test_with_no_build_measured_the_installations_default_is_assumed() -> None:
    unmeasured = status(revisions=[record(R1, "Active", content=CONTENT_V1)])
    cost = replay_cost(make_spec(SQL_V2), unmeasured, AssumedRate(10.0, 30.0))
    assert cost.rate == AssumedRate(10.0, 30.0)
    # 2,000 records after 30 s: at 30/s 96.7 s, at 3.3/s 630 s (the default's spread is 3)
    assert cost.seconds() == (97, 630)


def test_a_log_kept_forever_holds_its_beginning() -> None:
    forever = status(sourceLogs=[{"topic": "orders", "cleanupPolicy": "delete",
                                  "retentionMs": -1, "retentionBytes": -1}])
    assert [p.holds_beginning for p in replay_cost(make_spec(), forever, DEFAULT).partitions] == [
        True, False]


def test_a_new_view_has_nothing_measured() -> None:
    cost = replay_cost(make_spec(), None, DEFAULT)
    assert (cost.partitions, cost.unmeasured_topics, cost.records, cost.seconds()) == (
        (), ("orders",), None, None)
    assert cost.rate == DEFAULT


def test_a_topic_the_status_has_not_measured_leaves_the_total_unknown() -> None:
    spec = make_spec(source={"topics": ["orders", "refunds"]})
    cost = replay_cost(spec, status(), DEFAULT)
    assert cost.unmeasured_topics == ("refunds",)
    assert cost.records is None
    assert cost.seconds() is None
