"""End offsets and log starts from the real broker: both listeners, bad credentials, missing
and recreated topics, records deleted from a log's beginning, an unreachable cluster, and a
view's Secret read from the real API server."""

from __future__ import annotations

import dataclasses
import socket
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kubernetes import client

from derived_views.adapters.kafka.offsets import (
    EndOffsetsCache,
    OffsetsReader,
    OffsetsUnavailable,
    fetch_end_offsets,
    fetch_log_starts,
    read_end_offsets,
)
from derived_views.adapters.kube.client import Kube
from derived_views.api.spec import DerivedViewSpec
from derived_views.api.status import DerivedViewStatus
from derived_views.core.judges.tenancy import parse_policy
from derived_views.core.log.kafka_connection import KafkaCluster, client_settings
from derived_views.reconcile.observe import end_offsets
from dvstack.testing import replay
from dvstack.testing.waiting import wait_for
from support.stand_ins.deps import SETTINGS, pass_deps


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})


def _topic(bootstrap: str, partitions: int, per_partition: list[int], name: str = "") -> str:
    name = name or f"off-{uuid.uuid4().hex[:8]}"
    admin = _admin(bootstrap)  # keep the handle alive until the future resolves
    admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1)])[name].result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for p, n in enumerate(per_partition):
        for i in range(n):
            producer.produce(name, value=str(i).encode(), partition=p)
    assert producer.flush(30) == 0
    return name


def _sasl(stack: Any, password: str | None = None) -> KafkaCluster:
    s = stack.kafka_sasl
    return KafkaCluster.of(s["bootstrap"], client_settings({
        "username": s["username"], "password": password or s["password"],
        "mechanism": s["mechanism"], "securityProtocol": s["security_protocol"]}))


def test_end_offsets_of_several_topics_in_one_call(stack: Any) -> None:
    a = _topic(stack.kafka_bootstrap, 3, [5, 0, 2])
    b = _topic(stack.kafka_bootstrap, 1, [7])
    ends = fetch_end_offsets(stack.kafka_bootstrap, [a, b])
    assert ends == {(a, 0): 5, (a, 1): 0, (a, 2): 2, (b, 0): 7}


class _Counting:
    """A reader's consumer, counting the offsets requests made through it."""

    def __init__(self, consumer: Any) -> None:
        self.consumer, self.batches, self.single = consumer, 0, 0

    def offsets_for_times(self, *args: Any, **kwargs: Any) -> Any:
        self.batches += 1
        return self.consumer.offsets_for_times(*args, **kwargs)

    def get_watermark_offsets(self, *args: Any, **kwargs: Any) -> Any:
        self.single += 1
        return self.consumer.get_watermark_offsets(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.consumer, name)


def test_log_starts_come_with_the_ends_one_batched_request_each(stack: Any) -> None:
    a = _topic(stack.kafka_bootstrap, 3, [5, 0, 8])
    b = _topic(stack.kafka_bootstrap, 1, [7])
    low = replay.delete_records_before(stack.kafka_bootstrap, a, {0: 2, 2: 8})
    assert low == {0: 2, 2: 8}
    reader, cluster = OffsetsReader(), KafkaCluster.of(stack.kafka_bootstrap)
    try:
        reader(cluster, [a])  # connects and lists the layout
        counting = _Counting(reader._connections[cluster].consumer)
        reader._connections[cluster].consumer = counting
        fetched = reader(cluster, [a, b, "no-such-topic-xyz"])
    finally:
        reader.close()
    assert fetched.ends == {(a, 0): 5, (a, 1): 0, (a, 2): 8, (b, 0): 7}
    assert fetched.starts == {(a, 0): 2, (a, 1): 0, (a, 2): 8, (b, 0): 0}
    assert fetched.missing == {"no-such-topic-xyz"}
    # OFFSET_BEGINNING (-2) resolves in the batched ListOffsets as OFFSET_END (-1) does:
    # one request for each, no partition left to ask alone.
    assert (counting.batches, counting.single) == (2, 0)
    assert fetch_log_starts(stack.kafka_bootstrap, [b]) == {(b, 0): 0}
    with pytest.raises(OffsetsUnavailable, match="no-such-topic-xyz"):
        fetch_log_starts(stack.kafka_bootstrap, [b, "no-such-topic-xyz"])


def test_deleted_records_move_the_cached_log_start_for_a_fetch_after_them(stack: Any) -> None:
    name = _topic(stack.kafka_bootstrap, 2, [6, 4])
    cluster = KafkaCluster.of(stack.kafka_bootstrap)
    reader = OffsetsReader()
    cache = EndOffsetsCache(interval=60, fetch=reader)
    try:
        cache.register(cluster, [name])
        assert cache.get(cluster).starts_of([name]) == {(name, 0): 0, (name, 1): 0}
        replay.delete_records_before(stack.kafka_bootstrap, name, {0: 4, 1: -1})
        deleted_at = cache.now()
        assert cache.get(cluster).starts_of([name]) == {(name, 0): 0, (name, 1): 0}  # cached
        reading = cache.get(cluster, not_before=deleted_at)
    finally:
        reader.close()
    assert reading.starts_of([name]) == {(name, 0): 4, (name, 1): 4}  # -1: up to the end
    assert reading.of([name]) == ({(name, 0): 6, (name, 1): 4}, frozenset())


def test_the_sasl_listener_answers_with_the_stacks_scram_user(stack: Any) -> None:
    assert stack.kafka_sasl["mechanism"] == "SCRAM-SHA-512"
    assert stack.kafka_sasl["security_protocol"] == "SASL_PLAINTEXT"
    a = _topic(stack.kafka_bootstrap, 2, [3, 4])
    fetched = read_end_offsets(_sasl(stack), [a])
    assert (fetched.ends, fetched.starts) == ({(a, 0): 3, (a, 1): 4}, {(a, 0): 0, (a, 1): 0})


def test_a_wrong_password_is_a_clear_error_without_the_password(stack: Any) -> None:
    a = _topic(stack.kafka_bootstrap, 1, [1])
    with pytest.raises(OffsetsUnavailable) as info:
        read_end_offsets(_sasl(stack, password="not-the-password"), [a], timeout=5)
    message = str(info.value)
    assert "Authentication failed" in message, message
    assert stack.kafka_sasl["bootstrap"] in message and stack.kafka_sasl["username"] in message
    assert "not-the-password" not in message and "\n" not in message


def test_one_missing_topic_leaves_the_present_ones_resolved(stack: Any) -> None:
    a = _topic(stack.kafka_bootstrap, 2, [2, 3])
    b = _topic(stack.kafka_bootstrap, 1, [4])
    fetched = read_end_offsets(KafkaCluster.of(stack.kafka_bootstrap), [a, "no-such-topic-xyz", b])
    assert fetched.ends == {(a, 0): 2, (a, 1): 3, (b, 0): 4}
    assert fetched.missing == {"no-such-topic-xyz"}
    with pytest.raises(OffsetsUnavailable, match=r"topics not found on .*: no-such-topic-xyz"):
        fetch_end_offsets(stack.kafka_bootstrap, [a, "no-such-topic-xyz"])


def test_a_recreated_topic_reports_ends_below_the_earlier_ones(stack: Any) -> None:
    name = _topic(stack.kafka_bootstrap, 1, [6])
    cluster = KafkaCluster.of(stack.kafka_bootstrap)
    assert read_end_offsets(cluster, [name]).ends == {(name, 0): 6}
    admin = _admin(stack.kafka_bootstrap)
    admin.delete_topics([name])[name].result(30)
    wait_for(lambda: read_end_offsets(cluster, [name]).missing == {name}, timeout=60,
             what=f"topic {name} to be gone")

    def recreate() -> bool:
        _topic(stack.kafka_bootstrap, 1, [2], name=name)
        return True

    wait_for(recreate, timeout=60, what=f"topic {name} to be created again")
    assert read_end_offsets(cluster, [name]).ends == {(name, 0): 2}


class _Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_a_long_lived_reader_finds_new_topics_at_once_and_new_partitions_after_its_layout_time(
        stack: Any) -> None:
    clock = _Clock()
    reader = OffsetsReader(layout_seconds=60, clock=clock)
    cluster = KafkaCluster.of(stack.kafka_bootstrap)
    try:
        a = _topic(stack.kafka_bootstrap, 2, [3, 1])
        assert reader(cluster, [a]).ends == {(a, 0): 3, (a, 1): 1}
        b = _topic(stack.kafka_bootstrap, 1, [5])  # created after the reader listed
        assert reader(cluster, [a, b]).ends == {(a, 0): 3, (a, 1): 1, (b, 0): 5}
        admin = _admin(stack.kafka_bootstrap)  # alive until the future resolves
        admin.create_partitions([NewPartitions(a, 3)])[a].result(30)
        producer = Producer({"bootstrap.servers": stack.kafka_bootstrap})
        producer.produce(a, value=b"x", partition=2)
        producer.produce(a, value=b"y", partition=0)
        assert producer.flush(30) == 0
        # Within its layout time the reader still asks for the partitions it listed ...
        assert reader(cluster, [a]).ends == {(a, 0): 4, (a, 1): 1}
        clock.t += 60  # ... and counts the new one once it lists again.
        wait_for(lambda: reader(cluster, [a]).ends == {(a, 0): 4, (a, 1): 1, (a, 2): 1},
                 timeout=30, what=f"the third partition of {a} to be counted")
    finally:
        reader.close()


def test_a_long_lived_reader_reports_a_deleted_topic_missing(stack: Any) -> None:
    reader = OffsetsReader()
    cluster = KafkaCluster.of(stack.kafka_bootstrap)
    try:
        name = _topic(stack.kafka_bootstrap, 1, [2])
        assert reader(cluster, [name]).ends == {(name, 0): 2}
        admin = _admin(stack.kafka_bootstrap)  # alive until the future resolves
        admin.delete_topics([name])[name].result(30)
        wait_for(lambda: reader(cluster, [name]).missing == {name}, timeout=60,
                 what=f"topic {name} to read as missing")
    finally:
        reader.close()


def test_a_long_lived_reader_reports_refused_credentials_on_every_try(stack: Any) -> None:
    reader = OffsetsReader(timeout=5)
    a = _topic(stack.kafka_bootstrap, 1, [1])
    try:
        for _ in range(2):  # a failure closes the client; the next try is a new client
            with pytest.raises(OffsetsUnavailable, match="Authentication failed"):
                reader(_sasl(stack, password="not-the-password"), [a])
        assert reader(_sasl(stack), [a]).ends == {(a, 0): 1}
    finally:
        reader.close()


def test_an_unreachable_cluster_backs_off_and_answers_at_once_meanwhile() -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cluster = KafkaCluster.of(f"127.0.0.1:{port}")
    cache = EndOffsetsCache(interval=1, fetch=lambda c, t: read_end_offsets(c, t, timeout=2),
                            backoff_min=30)
    cache.register(cluster, ["a"])
    started = time.monotonic()
    with pytest.raises(OffsetsUnavailable, match=f"127.0.0.1:{port}"):
        cache.get(cluster)
    first = time.monotonic() - started
    started = time.monotonic()
    with pytest.raises(OffsetsUnavailable, match="next try in"):
        cache.get(cluster)
    assert time.monotonic() - started < 0.5
    assert first < 8  # bounded by the short timeouts, not librdkafka's defaults


def _view_spec(bootstrap: str, topic: str, secret: str) -> DerivedViewSpec:
    return DerivedViewSpec.model_validate({
        "source": {"kafka": {"bootstrapServers": bootstrap, "secretRef": {"name": secret}},
                   "topics": [topic], "schema": "a STRING"},
        "transform": {"sql": "SELECT a FROM events"},
        "sink": {"postgres": {"secretRef": {"name": "db"}, "table": "t"}, "primaryKey": ["a"]}})


def test_a_views_secret_in_the_api_server_drives_the_sasl_fetch(
        stack: Any, kube_api_client: Any, namespace: str) -> None:
    a = _topic(stack.kafka_bootstrap, 3, [1, 2, 3])
    s = stack.kafka_sasl
    data = {"username": s["username"], "password": s["password"],
            "mechanism": s["mechanism"], "securityProtocol": s["security_protocol"]}
    core = client.CoreV1Api(kube_api_client)
    core.create_namespaced_secret(namespace, {
        "metadata": {"name": "kafka-scram", "labels": {"derivedviews.io/view-secret": "true"}},
        "stringData": data})
    core.create_namespaced_secret(namespace, {"metadata": {"name": "not-for-views"},
                                              "stringData": data})
    # the stack's Kafka, which beside the real node is not on loopback, as a platform lists it
    policy = parse_policy(replay.kafka_tenancy_env(s["bootstrap"]).get("DV_TENANCY_POLICY"))
    deps = pass_deps(Kube(kube_api_client), offsets=EndOffsetsCache(interval=5),
                     settings=dataclasses.replace(SETTINGS, tenancy=policy))
    view = (namespace, "v")
    got = end_offsets(_view_spec(s["bootstrap"], a, "kafka-scram"), DerivedViewStatus(), view,
                       deps)
    assert (got.ends, got.reason) == ({(a, 0): 1, (a, 1): 2, (a, 2): 3}, None)
    assert got.starts == {(a, 0): 0, (a, 1): 0, (a, 2): 0}
    got = end_offsets(_view_spec(s["bootstrap"], a, "absent"), DerivedViewStatus(), view, deps)
    assert (got.ends, got.reason) == (None, "KafkaSecretMissing")
    assert got.message == f"Kafka secret {namespace}/absent not found"
    # The default tenancy policy: a Secret its owner has not labelled for views is not used.
    got = end_offsets(_view_spec(s["bootstrap"], a, "not-for-views"), DerivedViewStatus(), view,
                       deps)
    assert (got.ends, got.reason) == (None, "SecretNotLabelled")
    assert "kubectl label secret" in (got.message or "")
