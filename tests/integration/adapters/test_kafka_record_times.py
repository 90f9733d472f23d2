"""Record timestamps at given offsets from the real broker: what staleness is read from."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from derived_views.adapters.kafka.record_times import RecordTimesReader, RecordTimesUnavailable
from derived_views.core.log.kafka_connection import KafkaCluster, client_settings

BASE = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC)


def _stamped_topic(bootstrap: str, per_partition: list[int]) -> str:
    """Record i of partition p carries the producer-set time BASE + p hours + i seconds."""
    name = f"times-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    admin.create_topics([NewTopic(name, num_partitions=len(per_partition),
                                  replication_factor=1)])[name].result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for p, n in enumerate(per_partition):
        for i in range(n):
            stamp = BASE + dt.timedelta(hours=p, seconds=i)
            producer.produce(name, value=b"{}", partition=p,
                             timestamp=int(stamp.timestamp() * 1000))
    assert producer.flush(30) == 0
    return name


def test_times_at_offsets_and_nothing_past_the_end(stack: Any) -> None:
    topic = _stamped_topic(stack.kafka_bootstrap, [5, 3])
    reader = RecordTimesReader()
    cluster = KafkaCluster.of(stack.kafka_bootstrap)
    try:
        wanted = [((topic, 0), 0), ((topic, 0), 4), ((topic, 1), 2), ((topic, 1), 3)]
        got = reader(cluster, wanted)
        assert got == {((topic, 0), 0): BASE, ((topic, 0), 4): BASE + dt.timedelta(seconds=4),
                       ((topic, 1), 2): BASE + dt.timedelta(hours=1, seconds=2),
                       ((topic, 1), 3): None}  # the end: no record there yet
        # Two offsets of one partition in one call (a serving and a building revision).
        assert reader(cluster, [((topic, 0), 1), ((topic, 0), 3)]) == {
            ((topic, 0), 1): BASE + dt.timedelta(seconds=1),
            ((topic, 0), 3): BASE + dt.timedelta(seconds=3)}
        # A record that arrives later is read then: "none yet" was not cached.
        producer = Producer({"bootstrap.servers": stack.kafka_bootstrap})
        producer.produce(topic, value=b"{}", partition=1,
                         timestamp=int((BASE + dt.timedelta(days=1)).timestamp() * 1000))
        assert producer.flush(30) == 0
        assert reader(cluster, [((topic, 1), 3)]) == {
            ((topic, 1), 3): BASE + dt.timedelta(days=1)}
    finally:
        reader.close()


def test_cached_times_need_no_broker(stack: Any) -> None:
    topic = _stamped_topic(stack.kafka_bootstrap, [2])
    reader = RecordTimesReader()
    cluster = KafkaCluster.of(stack.kafka_bootstrap)
    try:
        assert reader(cluster, [((topic, 0), 1)]) == {((topic, 0), 1): BASE + dt.timedelta(
            seconds=1)}
        reader.forget(cluster)  # closes the consumer: a read now would make a new one
        reader._consumers[cluster] = None  # type: ignore[assignment]  # and fail if used
        assert reader(cluster, [((topic, 0), 1)]) == {((topic, 0), 1): BASE + dt.timedelta(
            seconds=1)}
    finally:
        reader._consumers.clear()


def test_refused_credentials_are_unavailable_not_unknown_forever(stack: Any) -> None:
    s = stack.kafka_sasl
    topic = _stamped_topic(stack.kafka_bootstrap, [1])
    cluster = KafkaCluster.of(s["bootstrap"], client_settings({
        "username": s["username"], "password": "wrong", "mechanism": s["mechanism"],
        "securityProtocol": s["security_protocol"]}))
    reader = RecordTimesReader(timeout=3)
    try:
        try:
            got = reader(cluster, [((topic, 0), 0)])
        except RecordTimesUnavailable as exc:
            assert "wrong" not in str(exc)  # no credentials in the message
        else:
            assert got == {}  # refused as a timeout: unknown, never a made-up time
    finally:
        reader.close()
