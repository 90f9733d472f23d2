"""What one pass learns about a view's end offsets, and the reason when it learns too little.

The Kubernetes side is a stand-in holding Secrets in memory; the cache runs
with a fake fetch, so these are the shell's decisions only (the real broker and
API server are in tests/integration).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from derived_views.adapters.kafka.offsets import EndOffsetsCache, Fetched, OffsetsUnavailable
from derived_views.api.spec import DerivedViewSpec
from derived_views.api.status import DerivedViewStatus
from derived_views.core.log.kafka_connection import KafkaCluster
from derived_views.reconcile.deps import Deps
from derived_views.reconcile.observe import end_offsets
from support.stand_ins.deps import pass_deps
from support.stand_ins.kube import FakeKube

VIEW = ("shop", "orders")


def spec(topics: list[str], secret: str | None = None,
         bootstrap: str = "127.0.0.1:9092") -> DerivedViewSpec:
    kafka: dict[str, Any] = {"bootstrapServers": bootstrap}  # loopback: the default policy's
    if secret:
        kafka["secretRef"] = {"name": secret}
    return DerivedViewSpec.model_validate({
        "source": {"kafka": kafka, "topics": topics, "schema": "a STRING"},
        "transform": {"sql": "SELECT a FROM events"},
        "sink": {"postgres": {"secretRef": {"name": "db"}, "table": "t"}, "primaryKey": ["a"]}})


def deps(secrets: dict[str, dict[str, str]], fetch: Any) -> Deps:
    return pass_deps(FakeKube(secrets=secrets),
                     offsets=EndOffsetsCache(interval=5, fetch=fetch, clock=lambda: 0.0))


def test_credentials_from_the_secret_reach_the_fetch_and_ends_are_the_views_topics() -> None:
    seen: list[KafkaCluster] = []

    def fetch(cluster: KafkaCluster, topics: Iterable[str]) -> Fetched:
        seen.append(cluster)
        return Fetched({("a", 0): 4, ("other", 0): 9})

    d = deps({"kafka": {"username": "u", "password": "p", "mechanism": "SCRAM-SHA-512",
                        "securityProtocol": "SASL_PLAINTEXT"}}, fetch)
    got = end_offsets(spec(["a"], "kafka"), DerivedViewStatus(), VIEW, d)
    assert got.ends == {("a", 0): 4} and got.reason is None
    assert dict(seen[0].settings) == {"security.protocol": "SASL_PLAINTEXT",
                                      "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "u",
                                      "sasl.password": "p"}


def test_a_cluster_the_policy_does_not_list_is_never_connected_to() -> None:
    """The operator would hand the Kafka Secret to the author's host: refused before reading
    the Secret or connecting (tenancy.kafka.clusters)."""
    seen: list[KafkaCluster] = []

    def fetch(cluster: KafkaCluster, topics: Iterable[str]) -> Fetched:
        seen.append(cluster)
        return Fetched({("a", 0): 4})

    d = deps({"kafka": {"username": "u", "password": "p"}}, fetch)
    got = end_offsets(spec(["a"], "kafka", bootstrap="kafka.attacker.example:9092"),
                       DerivedViewStatus(), VIEW, d)
    assert (got.ends, got.reason, seen) == (None, "PolicyViolation", [])
    assert "tenancy.kafka.clusters" in (got.message or "")


def test_a_missing_secret_is_its_own_reason() -> None:
    got = end_offsets(spec(["a"], "kafka"), DerivedViewStatus(), VIEW,
                       deps({}, lambda c, t: Fetched({})))
    assert (got.ends, got.reason) == (None, "KafkaSecretMissing")
    assert got.message == "Kafka secret shop/kafka not found"


def test_an_unusable_secret_is_its_own_reason() -> None:
    got = end_offsets(spec(["a"], "kafka"), DerivedViewStatus(), VIEW,
                       deps({"kafka": {"user": "u"}}, lambda c, t: Fetched({})))
    assert (got.ends, got.reason) == (None, "KafkaSecretInvalid")
    assert got.message is not None and got.message.startswith(
        "secret shop/kafka has no key username and no key password")


def test_an_unreachable_cluster_is_its_own_reason() -> None:
    def fetch(cluster: KafkaCluster, topics: Iterable[str]) -> Fetched:
        raise OffsetsUnavailable("k:9092 (PLAINTEXT): Connection refused")

    got = end_offsets(spec(["a"]), DerivedViewStatus(), VIEW, deps({}, fetch))
    assert (got.ends, got.reason) == (None, "KafkaUnavailable")
    assert got.message == "k:9092 (PLAINTEXT): Connection refused"


def test_missing_topics_are_named_and_the_present_ones_resolve() -> None:
    got = end_offsets(spec(["a", "typo"]), DerivedViewStatus(), VIEW,
                       deps({}, lambda c, t: Fetched({("a", 0): 1}, frozenset({"typo"}))))
    assert got.ends == {("a", 0): 1}
    assert (got.missing, got.reason) == (frozenset({"typo"}), "TopicMissing")
    assert got.message == "topics not found on 127.0.0.1:9092 (PLAINTEXT): typo"
