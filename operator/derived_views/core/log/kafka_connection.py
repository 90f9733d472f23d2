"""How the operator connects to a view's Kafka cluster: the Secret contract, pure.

`spec.source.kafka.secretRef` names a Secret that the Spark job (its files, mounted
where `core.job.sparkapplication.secret_mounts` asks; dvjob.credentials) and the
operator's own offsets client read the same way:

- `username`, `password`: SASL credentials (required for the SASL protocols);
- `mechanism`: `PLAIN` (default), `SCRAM-SHA-256` or `SCRAM-SHA-512`;
- `securityProtocol`: `SASL_SSL` (default), `SASL_PLAINTEXT` or `SSL`;
- `ca.crt`: PEM certificate(s) to trust for TLS, instead of the system store.

`client_settings` maps that data to librdkafka settings; `KafkaCluster` is one
connection (bootstrap plus settings), hashable so caches key by it, and never
shows its settings in a repr or a log line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
PROTOCOLS = ("SASL_SSL", "SASL_PLAINTEXT", "SSL")
DEFAULT_MECHANISM = "PLAIN"
DEFAULT_PROTOCOL = "SASL_SSL"

KEY_USERNAME = "username"
KEY_PASSWORD = "password"
KEY_MECHANISM = "mechanism"
KEY_PROTOCOL = "securityProtocol"
KEY_CA = "ca.crt"


class KafkaSecretInvalid(ValueError):
    """The Kafka Secret exists but its data cannot make a connection (one-line reason)."""


def client_settings(data: Mapping[str, str], secret: str = "the Kafka Secret") -> dict[str, str]:
    """librdkafka settings for the Secret's `data`; `secret` names it in error messages."""
    protocol = (data.get(KEY_PROTOCOL) or DEFAULT_PROTOCOL).strip().upper()
    if protocol not in PROTOCOLS:
        raise KafkaSecretInvalid(
            f"{secret}: {KEY_PROTOCOL}={data.get(KEY_PROTOCOL)!r} is not supported; "
            f"use one of {', '.join(PROTOCOLS)}")
    settings = {"security.protocol": protocol}
    if protocol.startswith("SASL_"):
        absent = [k for k in (KEY_USERNAME, KEY_PASSWORD) if not data.get(k)]
        if absent:
            raise KafkaSecretInvalid(
                f"{secret} has no key {' and no key '.join(absent)} "
                f"(needed for {KEY_PROTOCOL} {protocol})")
        mechanism = (data.get(KEY_MECHANISM) or DEFAULT_MECHANISM).strip().upper()
        if mechanism not in MECHANISMS:
            raise KafkaSecretInvalid(
                f"{secret}: {KEY_MECHANISM}={data.get(KEY_MECHANISM)!r} is not supported; "
                f"use one of {', '.join(MECHANISMS)}")
        settings.update({"sasl.mechanism": mechanism, "sasl.username": data[KEY_USERNAME],
                         "sasl.password": data[KEY_PASSWORD]})
    ca = data.get(KEY_CA)
    if ca:
        if protocol == "SASL_PLAINTEXT":
            raise KafkaSecretInvalid(f"{secret}: {KEY_CA} is set but {KEY_PROTOCOL} is "
                                     "SASL_PLAINTEXT, which does not use TLS")
        if "-----BEGIN CERTIFICATE-----" not in ca:
            raise KafkaSecretInvalid(f"{secret}: {KEY_CA} is not a PEM certificate "
                                     "(no '-----BEGIN CERTIFICATE-----' line)")
        settings["ssl.ca.pem"] = ca
    return settings


@dataclass(frozen=True)
class KafkaCluster:
    """One connection to a cluster: the cache key of its end offsets.

    Two views share a fetch only when they connect the same way (same
    bootstrap servers and the same credentials); the settings stay out of
    repr, so the object may be logged.
    """

    bootstrap: str
    settings: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    @classmethod
    def of(cls, bootstrap: str, settings: Mapping[str, str] | None = None) -> KafkaCluster:
        return cls(bootstrap, tuple(sorted((settings or {}).items())))

    def config(self) -> dict[str, str]:
        return {"bootstrap.servers": self.bootstrap, **dict(self.settings)}

    def describe(self) -> str:
        """Bootstrap, protocol and user: what a log line may say about the connection."""
        s = dict(self.settings)
        who = f" as {s['sasl.username']}" if "sasl.username" in s else ""
        protocol = s.get("security.protocol", "PLAINTEXT")
        return f"{self.bootstrap} ({protocol}{who})"


@dataclass(frozen=True)
class SourceOffsets:
    """What one pass learned about a view's topics' end offsets.

    `ends` holds the partitions of the view's topics that resolved (None when
    nothing could be asked); `missing` the view's topics the cluster does not
    have; `reason`/`message` say why ends are absent or partial, in the words
    of a status condition (`KafkaSecretMissing`, `KafkaSecretInvalid`,
    `KafkaUnavailable`, `TopicMissing`: core.reasons).
    """

    ends: Mapping[tuple[str, int], int] | None
    missing: frozenset[str] = frozenset()
    starts: Mapping[tuple[str, int], int] | None = None
    """Log start offsets (low watermarks) of the partitions of `ends`, from the same fetch."""
    reason: str | None = None
    message: str | None = None
    cluster: KafkaCluster | None = None
    """The connection asked, when the view's Secret allowed one."""
    topics: frozenset[str] = frozenset()
    """The topics asked for (the view's, as core.observed.topics_to_observe names them)."""

    def problem(self) -> tuple[str, str] | None:
        """(reason, message) when the cluster could not be asked at all; missing topics are
        reported per topic (Observed.missing_topics), not here."""
        if self.ends is not None or self.reason is None:
            return None
        return self.reason, self.message or self.reason
