"""Which record times a pass asks for, and what it does when Kafka cannot answer: the shell's
decisions with a stand-in reader (the real broker is in tests/integration)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any, cast

from derived_views.adapters.kafka.record_times import RecordTimesReader, RecordTimesUnavailable
from derived_views.api.spec import DerivedViewSpec
from derived_views.api.status import DerivedViewStatus
from derived_views.core.log.kafka_connection import KafkaCluster, SourceOffsets
from derived_views.core.observed import LedgerPosition, SinkObserved
from derived_views.core.revision import revision_of
from derived_views.reconcile.deps import Deps
from derived_views.reconcile.observe import record_times
from support.stand_ins.deps import pass_deps

VIEW = ("shop", "orders")
T = dt.datetime(2026, 3, 1, 12, 0, 0, tzinfo=dt.UTC)
SPEC = DerivedViewSpec.model_validate({
    "source": {"kafka": {"bootstrapServers": "127.0.0.1:9092"}, "topics": ["a"],
               "schema": "a STRING"},
    "transform": {"sql": "SELECT a FROM events"},
    "sink": {"postgres": {"secretRef": {"name": "db"}, "table": "t"}, "primaryKey": ["a"]}})
CLUSTER = KafkaCluster.of("127.0.0.1:9092")
OFFSETS = SourceOffsets({("a", 0): 10, ("a", 1): 5}, cluster=CLUSTER)


class Reader:
    def __init__(self, refuse: bool = False) -> None:
        self.asked: list[set[tuple[tuple[str, int], int]]] = []
        self.refuse = refuse

    def __call__(self, cluster: KafkaCluster, wanted: Iterable[Any]) -> dict[Any, Any]:
        self.asked.append(set(wanted))
        if self.refuse:
            raise RecordTimesUnavailable("127.0.0.1:9092: timed out")
        return dict.fromkeys(self.asked[-1], T)


def deps(reader: Reader) -> Deps:
    return pass_deps(record_times=cast(RecordTimesReader, reader))


def test_a_revision_without_a_batch_asks_for_the_first_records() -> None:
    reader = Reader()
    sink = SinkObserved(ledger={"old": LedgerPosition({("a", 0): 10, ("a", 1): 3}, T)})
    got = record_times(SPEC, DerivedViewStatus(), VIEW, deps(reader), OFFSETS, sink)
    # the spec's revision has no batch: offset 0 of both partitions; "old" is behind on a/1
    assert reader.asked == [{(("a", 0), 0), (("a", 1), 0), (("a", 1), 3)}]
    assert set(got) == reader.asked[0]


def test_nothing_behind_reads_nothing() -> None:
    reader = Reader()
    sink = SinkObserved(ledger={revision_of(SPEC): LedgerPosition({("a", 0): 10, ("a", 1): 5},
                                                                  T)})
    assert record_times(SPEC, DerivedViewStatus(), VIEW, deps(reader), OFFSETS, sink) == {}
    assert reader.asked == []


def test_an_unanswering_cluster_leaves_staleness_unknown() -> None:
    reader = Reader(refuse=True)
    got = record_times(SPEC, DerivedViewStatus(), VIEW, deps(reader), OFFSETS, SinkObserved())
    assert got == {} and len(reader.asked) == 1


def test_no_sink_or_no_ends_reads_nothing() -> None:
    reader = Reader()
    assert record_times(SPEC, DerivedViewStatus(), VIEW, deps(reader), OFFSETS, None) == {}
    assert record_times(SPEC, DerivedViewStatus(), VIEW, deps(reader),
                        SourceOffsets(None), SinkObserved()) == {}
    assert reader.asked == []
