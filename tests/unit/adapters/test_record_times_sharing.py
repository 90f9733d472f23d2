"""Passes that miss the record-times cache at once share readings: the reader's own
concurrency, with its broker read replaced (the real broker is in tests/integration)."""

from __future__ import annotations

import datetime as dt
import threading
from typing import Any

import pytest

from derived_views.adapters.kafka.record_times import (
    RecordTimesReader,
    RecordTimesUnavailable,
    Wanted,
)
from derived_views.core.log.kafka_connection import KafkaCluster

CLUSTER = KafkaCluster.of("127.0.0.1:9092")
T = dt.datetime(2026, 3, 1, 12, 0, 0, tzinfo=dt.UTC)


class GatedReader(RecordTimesReader):
    """Its first broker read blocks until released, so other passes pile up behind it."""

    def __init__(self, fail: bool = False) -> None:
        super().__init__(timeout=5.0)
        self.reads: list[list[Wanted]] = []
        self.first_started, self.release = threading.Event(), threading.Event()
        self.fail = fail

    def _read(self, cluster: KafkaCluster, unread: list[Wanted]
              ) -> dict[Wanted, dt.datetime | None]:
        self.reads.append(list(unread))
        if len(self.reads) == 1:
            self.first_started.set()
            assert self.release.wait(10)
        if self.fail:
            raise RecordTimesUnavailable("127.0.0.1:9092: refused")
        return {pair: T + dt.timedelta(seconds=pair[1]) for pair in unread}


def pair(topic: str, offset: int = 0) -> Wanted:
    return ((topic, 0), offset)


def ask_in_threads(reader: RecordTimesReader, asks: list[list[Wanted]]) -> list[Any]:
    answers: list[Any] = [None] * len(asks)

    def ask(i: int) -> None:
        try:
            answers[i] = reader(CLUSTER, asks[i])
        except RecordTimesUnavailable as exc:
            answers[i] = exc

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(asks))]
    for thread in threads:
        thread.start()
    return [threads, answers]


def wait_gathered(reader: RecordTimesReader, pairs: int) -> None:
    """Until the reading being gathered holds `pairs` pairs (a deadline of 5 s)."""
    pause = threading.Event()
    for _ in range(100):
        gathering = reader._readings[CLUSTER].gathering
        if gathering is not None and len(gathering.pairs) == pairs:
            return
        pause.wait(0.05)
    raise AssertionError(f"the next reading never gathered {pairs} pairs")


def test_passes_waiting_on_a_reading_share_the_next_one() -> None:
    reader = GatedReader()
    first = ask_in_threads(reader, [[pair("a")]])
    assert reader.first_started.wait(10)
    threads, answers = ask_in_threads(reader, [[pair("b"), pair("c", 3)], [pair("c", 3)],
                                               [pair("d")]])
    wait_gathered(reader, 3)  # every waiter has joined before the first reading ends
    reader.release.set()
    for thread in first[0] + threads:
        thread.join(10)
    assert reader.reads == [[pair("a")], [pair("b"), pair("c", 3), pair("d")]]
    assert first[1] == [{pair("a"): T}]
    assert answers == [{pair("b"): T, pair("c", 3): T + dt.timedelta(seconds=3)},
                       {pair("c", 3): T + dt.timedelta(seconds=3)}, {pair("d"): T}]
    # Now cached: no further read.
    assert reader(CLUSTER, [pair("b"), pair("d")]) == {pair("b"): T, pair("d"): T}
    assert len(reader.reads) == 2


def test_a_shared_reading_that_fails_fails_every_pass_in_it() -> None:
    reader = GatedReader(fail=True)
    first = ask_in_threads(reader, [[pair("a")]])
    assert reader.first_started.wait(10)
    threads, answers = ask_in_threads(reader, [[pair("b")], [pair("c")]])
    wait_gathered(reader, 2)
    reader.release.set()
    for thread in first[0] + threads:
        thread.join(10)
    assert len(reader.reads) == 2
    assert all(isinstance(answer, RecordTimesUnavailable) for answer in first[1] + answers)
    assert "refused" in str(answers[0])


def test_a_reading_that_outlasts_the_wait_leaves_the_pairs_unknown() -> None:
    reader = GatedReader()
    reader.timeout = 0.1  # a waiter gives up after two readings' time and a second
    first = ask_in_threads(reader, [[pair("a")]])
    assert reader.first_started.wait(10)
    assert reader(CLUSTER, [pair("b")]) == {}
    reader.release.set()
    first[0][0].join(10)
    assert first[1] == [{pair("a"): T}]


@pytest.mark.parametrize("asks", [1, 8])
def test_every_pass_gets_its_own_pairs_only(asks: int) -> None:
    reader = GatedReader()
    reader.release.set()
    threads, answers = ask_in_threads(reader, [[pair(f"t{i}"), pair("shared")]
                                               for i in range(asks)])
    for thread in threads:
        thread.join(10)
    assert answers == [{pair(f"t{i}"): T, pair("shared"): T} for i in range(asks)]
