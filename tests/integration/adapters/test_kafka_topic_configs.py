"""Topics' retention settings from the real broker: one describe for every topic of a
connection, topics created with their own settings, missing topics, the SASL listener, refused
credentials and an unreachable cluster (the pass is told once and never fails)."""

from __future__ import annotations

import logging
import socket
import time
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

import pytest

from derived_views.adapters.kafka.topic_configs import (
    TopicConfigsCache,
    TopicConfigsUnavailable,
    describe_topic_configs,
)
from derived_views.core.log.kafka_connection import KafkaCluster, SourceOffsets, client_settings
from derived_views.core.observed import TopicRetention
from derived_views.reconcile.observe import topic_configs
from dvstack.testing import replay
from support.stand_ins.deps import pass_deps


def _topic(bootstrap: str, config: Mapping[str, str] | None = None) -> str:
    name = f"cfg-{uuid.uuid4().hex[:8]}"
    replay.create_topic(bootstrap, name, 1, config=config)
    return name


def _sasl(stack: Any, password: str | None = None) -> KafkaCluster:
    s = stack.kafka_sasl
    return KafkaCluster.of(s["bootstrap"], client_settings({
        "username": s["username"], "password": password or s["password"],
        "mechanism": s["mechanism"], "securityProtocol": s["security_protocol"]}))


def _unreachable() -> KafkaCluster:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        return KafkaCluster.of(f"127.0.0.1:{sock.getsockname()[1]}")


def test_topics_of_every_view_are_read_in_one_describe_with_their_own_settings(
        stack: Any) -> None:
    compact = _topic(stack.kafka_bootstrap, {"cleanup.policy": "compact", "retention.ms": "-1"})
    hour = _topic(stack.kafka_bootstrap, {"retention.ms": "3600000",
                                          "retention.bytes": "1048576"})
    plain = _topic(stack.kafka_bootstrap)
    calls: list[frozenset[str]] = []

    def describe(cluster: KafkaCluster, topics: Iterable[str]) -> dict[str, TopicRetention]:
        calls.append(frozenset(topics))
        return describe_topic_configs(cluster, topics)

    cache = TopicConfigsCache(fetch=describe)
    cluster = KafkaCluster.of(stack.kafka_bootstrap)
    cache.get(cluster, [compact, hour, plain, "no-such-topic-xyz"])  # the first view's pass
    answer = cache.get(cluster, [compact, hour, plain])  # another view's: from the reading
    assert answer.failure is None and len(calls) == 1
    assert answer.configs[compact] == TopicRetention(cleanup_policy="compact", retention_ms=-1,
                                                     retention_bytes=-1, remote_storage=False)
    assert not answer.configs[compact].deletes
    assert answer.configs[hour] == TopicRetention(retention_ms=3_600_000,
                                                  retention_bytes=1_048_576)
    assert answer.configs[hour].deletes
    assert answer.configs[plain].cleanup_policy == "delete"
    assert answer.configs[plain].retention_ms is not None  # the broker's default, reported
    assert "no-such-topic-xyz" not in cache.get(cluster, ["no-such-topic-xyz"]).configs


def test_the_sasl_listener_describes_with_the_stacks_scram_user(stack: Any) -> None:
    name = _topic(stack.kafka_bootstrap, {"cleanup.policy": "compact,delete"})
    configs = describe_topic_configs(_sasl(stack), [name, "no-such-topic-xyz"])
    assert list(configs) == [name]
    assert configs[name].cleanup_policy == "compact,delete" and configs[name].compacted


def test_refused_credentials_are_a_clear_error_without_the_password(stack: Any) -> None:
    name = _topic(stack.kafka_bootstrap)
    started = time.monotonic()
    with pytest.raises(TopicConfigsUnavailable) as info:
        describe_topic_configs(_sasl(stack, password="not-the-password"), [name], timeout=5)
    message = str(info.value)
    assert "Authentication failed" in message, message
    assert stack.kafka_sasl["username"] in message and "not-the-password" not in message
    assert time.monotonic() - started < 15  # bounded by the timeout


def test_an_unreachable_cluster_is_told_to_one_pass_and_never_fails_one(
        caplog: pytest.LogCaptureFixture) -> None:
    cluster = _unreachable()
    offsets = SourceOffsets({("a", 0): 1}, cluster=cluster, topics=frozenset({"a"}))
    deps = pass_deps(topic_configs=TopicConfigsCache(
                    fetch=lambda c, t: describe_topic_configs(c, t, timeout=2)))
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="derived_views"):
        assert topic_configs(("ns", "v"), deps, offsets) == {}
        assert time.monotonic() - started < 10  # bounded by the short timeout
        started = time.monotonic()
        for _ in range(3):  # the passes of the backoff: answered at once, quietly
            assert topic_configs(("ns", "v"), deps, offsets) == {}
        assert time.monotonic() - started < 0.5
    warnings = [r.getMessage() for r in caplog.records if "retention settings" in r.message]
    assert len(warnings) == 1, warnings
    assert cluster.bootstrap in warnings[0] and "next try in" in warnings[0]


def test_a_source_that_could_not_be_asked_reads_no_settings(stack: Any) -> None:
    name = _topic(stack.kafka_bootstrap, {"cleanup.policy": "compact"})
    cluster = KafkaCluster.of(stack.kafka_bootstrap)
    deps = pass_deps()
    unavailable = SourceOffsets(None, reason="KafkaUnavailable", cluster=cluster,
                                topics=frozenset({name}))
    assert topic_configs(("ns", "v"), deps, unavailable) == {}
    assert deps.topic_configs.clusters() == []  # not even asked
    found = SourceOffsets({(name, 0): 0}, cluster=cluster, topics=frozenset({name}))
    assert topic_configs(("ns", "v"), deps, found)[name].compacted
