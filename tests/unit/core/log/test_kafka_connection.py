"""The Kafka Secret contract as the operator reads it: Secret data -> librdkafka settings."""

from __future__ import annotations

import pytest

from derived_views.core.log.kafka_connection import (
    KafkaCluster,
    KafkaSecretInvalid,
    client_settings,
)

PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


@pytest.mark.parametrize(("data", "expected"), [
    ({"username": "u", "password": "p"},
     {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "u",
      "sasl.password": "p"}),
    ({"username": "u", "password": "p", "mechanism": "scram-sha-512",
      "securityProtocol": "sasl_plaintext"},
     {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
      "sasl.username": "u", "sasl.password": "p"}),
    ({"username": "u", "password": "p", "mechanism": "SCRAM-SHA-256", "ca.crt": PEM},
     {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "u",
      "sasl.password": "p", "ssl.ca.pem": PEM}),
    ({"securityProtocol": "SSL", "ca.crt": PEM},
     {"security.protocol": "SSL", "ssl.ca.pem": PEM}),
    ({"securityProtocol": "SSL", "username": "ignored"}, {"security.protocol": "SSL"}),
])
def test_secret_data_to_librdkafka_settings(data: dict[str, str], expected: dict[str, str]) -> None:
    assert client_settings(data) == expected


@pytest.mark.parametrize(("data", "message"), [
    ({}, "secret shop/kafka has no key username and no key password "
         "(needed for securityProtocol SASL_SSL)"),
    ({"username": "u"}, "secret shop/kafka has no key password"),
    ({"username": "u", "password": ""}, "secret shop/kafka has no key password"),
    ({"username": "u", "password": "p", "mechanism": "GSSAPI"},
     "secret shop/kafka: mechanism='GSSAPI' is not supported; use one of PLAIN, SCRAM-SHA-256, "
     "SCRAM-SHA-512"),
    ({"username": "u", "password": "p", "securityProtocol": "PLAINTEXT"},
     "secret shop/kafka: securityProtocol='PLAINTEXT' is not supported; use one of SASL_SSL, "
     "SASL_PLAINTEXT, SSL"),
    ({"username": "u", "password": "p", "securityProtocol": "SASL_PLAINTEXT", "ca.crt": PEM},
     "ca.crt is set but securityProtocol is SASL_PLAINTEXT"),
    ({"securityProtocol": "SSL", "ca.crt": "not a certificate"},
     "ca.crt is not a PEM certificate"),
])
def test_unusable_secret_is_one_clear_line(data: dict[str, str], message: str) -> None:
    with pytest.raises(KafkaSecretInvalid) as info:
        client_settings(data, secret="secret shop/kafka")
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_a_cluster_is_its_bootstrap_and_credentials_and_never_shows_the_password() -> None:
    a = KafkaCluster.of("k:9092", client_settings({"username": "u", "password": "hunter2"}))
    same = KafkaCluster.of("k:9092", {"sasl.password": "hunter2", "sasl.username": "u",
                                      "sasl.mechanism": "PLAIN", "security.protocol": "SASL_SSL"})
    other_password = KafkaCluster.of("k:9092", client_settings({"username": "u",
                                                                "password": "other"}))
    assert a == same and hash(a) == hash(same)
    assert a != other_password and a != KafkaCluster.of("k:9092")
    for shown in (repr(a), str(a), a.describe()):
        assert "hunter2" not in shown
    assert a.describe() == "k:9092 (SASL_SSL as u)"
    assert KafkaCluster.of("k:9092").describe() == "k:9092 (PLAINTEXT)"
    assert a.config()["bootstrap.servers"] == "k:9092" and a.config()["sasl.password"] == "hunter2"
