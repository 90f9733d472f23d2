"""Kafka reader options: the view's topics from genesis, credentials from the environment."""

from __future__ import annotations

import pytest

from dvjob.config import SourceConfig
from dvjob.errors import ConfigError
from dvjob.source.load import kafka_reader_options, redacted


def _source(**overrides: object) -> SourceConfig:
    doc: dict[str, object] = {"bootstrapServers": "kafka:9092", "topics": ["orders", "refunds"],
                              "schema": "order_id STRING"}
    doc.update(overrides)
    return SourceConfig.model_validate(doc)


def test_topics_are_read_from_the_earliest_offset_without_credentials() -> None:
    assert kafka_reader_options(_source(), {}) == {
        "kafka.bootstrap.servers": "kafka:9092",
        "subscribe": "orders,refunds",
        "startingOffsets": "earliest",
    }


def test_rate_limit_and_extra_options_are_passed_as_text() -> None:
    options = kafka_reader_options(
        _source(maxOffsetsPerTrigger=5000,
                kafkaOptions={"failOnDataLoss": False, "kafka.fetch.max.bytes": 1048576,
                              "minPartitions": "6"}), {})
    assert options == {
        "kafka.bootstrap.servers": "kafka:9092",
        "subscribe": "orders,refunds",
        "startingOffsets": "earliest",
        "maxOffsetsPerTrigger": "5000",
        "failOnDataLoss": "false",
        "kafka.fetch.max.bytes": "1048576",
        "minPartitions": "6",
    }


def test_sasl_plain_over_ssl_by_default() -> None:
    options = kafka_reader_options(_source(), {"DV_KAFKA_SASL_USERNAME": "reader",
                                               "DV_KAFKA_SASL_PASSWORD": 's3"cr\\t'})
    assert options["kafka.security.protocol"] == "SASL_SSL"
    assert options["kafka.sasl.mechanism"] == "PLAIN"
    # Quotes and backslashes in the password are escaped inside the JAAS string.
    assert options["kafka.sasl.jaas.config"] == (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="reader" password="s3\\"cr\\\\t";')


def test_sasl_scram_over_plaintext_when_asked() -> None:
    options = kafka_reader_options(_source(), {
        "DV_KAFKA_SASL_USERNAME": "reader", "DV_KAFKA_SASL_PASSWORD": "pw",
        "DV_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "DV_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512"})
    assert options["kafka.security.protocol"] == "SASL_PLAINTEXT"
    assert options["kafka.sasl.mechanism"] == "SCRAM-SHA-512"
    assert options["kafka.sasl.jaas.config"] == (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="reader" password="pw";')


def test_security_protocol_alone_is_honoured() -> None:
    options = kafka_reader_options(_source(), {"DV_KAFKA_SECURITY_PROTOCOL": "SSL"})
    assert options["kafka.security.protocol"] == "SSL"
    assert "kafka.sasl.jaas.config" not in options


@pytest.mark.parametrize(("env", "expected"), [
    ({"DV_KAFKA_SASL_USERNAME": "reader"}, "set both DV_KAFKA_SASL_USERNAME and DV_KAFKA_SASL_PASSWORD"),
    ({"DV_KAFKA_SASL_PASSWORD": "pw"}, "set both DV_KAFKA_SASL_USERNAME and DV_KAFKA_SASL_PASSWORD"),
    ({"DV_KAFKA_SASL_USERNAME": "r", "DV_KAFKA_SASL_PASSWORD": "pw",
      "DV_KAFKA_SASL_MECHANISM": "GSSAPI"}, "DV_KAFKA_SASL_MECHANISM='GSSAPI' is not supported"),
])
def test_incomplete_or_unsupported_credentials(env: dict[str, str], expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        kafka_reader_options(_source(), env)


def test_secrets_are_redacted_for_logs() -> None:
    options = kafka_reader_options(_source(kafkaOptions={"kafka.ssl.truststore.password": "tpw"}),
                                   {"DV_KAFKA_SASL_USERNAME": "reader",
                                    "DV_KAFKA_SASL_PASSWORD": "hunter2"})
    shown = redacted(options)
    assert shown["kafka.sasl.jaas.config"] == "***"
    assert shown["kafka.ssl.truststore.password"] == "***"
    assert shown["subscribe"] == "orders,refunds"
    assert "hunter2" not in repr(shown) and "tpw" not in repr(shown)


def test_a_ca_certificate_becomes_a_pem_truststore() -> None:
    pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    options = kafka_reader_options(_source(), {
        "DV_KAFKA_SECRET_NAME": "kafka-creds", "DV_KAFKA_SASL_USERNAME": "reader",
        "DV_KAFKA_SASL_PASSWORD": "pw", "DV_KAFKA_SSL_CA_PEM": pem})
    assert options["kafka.security.protocol"] == "SASL_SSL"
    assert options["kafka.ssl.truststore.type"] == "PEM"
    assert options["kafka.ssl.truststore.certificates"] == pem
    assert redacted(options)["kafka.ssl.truststore.certificates"] == "***"


def test_a_named_secret_without_credentials_names_the_missing_keys() -> None:
    with pytest.raises(ConfigError, match="SASL_SSL needs DV_KAFKA_SASL_USERNAME and "
                                          r"DV_KAFKA_SASL_PASSWORD \(keys username and password "
                                          "of secret kafka-creds\\)"):
        kafka_reader_options(_source(), {"DV_KAFKA_SECRET_NAME": "kafka-creds"})


def test_a_named_secret_for_tls_only_needs_no_credentials() -> None:
    options = kafka_reader_options(_source(), {"DV_KAFKA_SECRET_NAME": "kafka-creds",
                                               "DV_KAFKA_SECURITY_PROTOCOL": "SSL"})
    assert options["kafka.security.protocol"] == "SSL"
    assert "kafka.sasl.mechanism" not in options
