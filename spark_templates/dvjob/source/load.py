"""The Kafka source: a stream over all the view's topics, from genesis.

Credentials come from the Kafka Secret's mounted files (dvjob.credentials, which
names them as the variables older operators set), never from the configuration
document, which is visible in the SparkApplication.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from dvjob.config import SourceConfig
from dvjob.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

ENV_USERNAME = "DV_KAFKA_SASL_USERNAME"
ENV_PASSWORD = "DV_KAFKA_SASL_PASSWORD"
ENV_PROTOCOL = "DV_KAFKA_SECURITY_PROTOCOL"
ENV_MECHANISM = "DV_KAFKA_SASL_MECHANISM"
ENV_CA = "DV_KAFKA_SSL_CA_PEM"
ENV_SECRET = "DV_KAFKA_SECRET_NAME"
"""Set (to the Secret's name) when the view names a Kafka Secret: its protocol then defaults
to SASL_SSL, as in the operator's reading of the same Secret."""

_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
_PROTOCOLS = ("SASL_SSL", "SASL_PLAINTEXT", "SSL")
_SECRET_OPTIONS = frozenset({"kafka.sasl.jaas.config", "kafka.ssl.key.password",
                             "kafka.ssl.keystore.password", "kafka.ssl.truststore.password",
                             "kafka.ssl.truststore.certificates"})


def _option_text(value: str | int | float | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _jaas_quote(value: str) -> str:
    """A JAAS string literal: Kafka's parser honours backslash escapes inside quotes."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def sasl_options(env: Mapping[str, str]) -> dict[str, str]:
    """Kafka client security options from `env` (the Kafka Secret's keys, named as variables).

    Same contract as the operator's `core.log.kafka_connection.client_settings`: protocol
    SASL_SSL unless `securityProtocol` says SASL_PLAINTEXT or SSL; mechanism PLAIN
    unless SCRAM-SHA-256/512; a `ca.crt` PEM becomes a PEM truststore.
    """
    username = env.get(ENV_USERNAME)
    password = env.get(ENV_PASSWORD)
    secret = env.get(ENV_SECRET)
    if bool(username) != bool(password):
        raise ConfigError(f"set both {ENV_USERNAME} and {ENV_PASSWORD}, or neither")
    raw_protocol = env.get(ENV_PROTOCOL)
    if not raw_protocol and not (secret or username):
        return {}
    protocol = (raw_protocol or "SASL_SSL").strip().upper()
    if protocol not in _PROTOCOLS:
        raise ConfigError(f"{ENV_PROTOCOL}={raw_protocol!r} is not supported; use one of "
                          f"{', '.join(_PROTOCOLS)}")
    options = {"kafka.security.protocol": protocol}
    if protocol.startswith("SASL_"):
        if not username or not password:
            source = f" (keys username and password of secret {secret})" if secret else ""
            raise ConfigError(f"{protocol} needs {ENV_USERNAME} and {ENV_PASSWORD}{source}")
        mechanism = (env.get(ENV_MECHANISM) or "PLAIN").strip().upper()
        module = _LOGIN_MODULES.get(mechanism)
        if module is None:
            raise ConfigError(f"{ENV_MECHANISM}={env.get(ENV_MECHANISM)!r} is not supported; "
                              f"use one of {', '.join(sorted(_LOGIN_MODULES))}")
        options["kafka.sasl.mechanism"] = mechanism
        options["kafka.sasl.jaas.config"] = (
            f"{module} required username={_jaas_quote(username)} "
            f"password={_jaas_quote(password)};")
    ca = env.get(ENV_CA)
    if ca:
        if protocol == "SASL_PLAINTEXT":
            raise ConfigError(f"{ENV_CA} is set but {ENV_PROTOCOL} is SASL_PLAINTEXT, "
                              "which does not use TLS")
        # Kafka clients >= 2.7 (KIP-651) read PEM certificates straight from the option.
        options["kafka.ssl.truststore.type"] = "PEM"
        options["kafka.ssl.truststore.certificates"] = ca
    return options


def kafka_reader_options(source: SourceConfig, env: Mapping[str, str],
                         min_partitions: int | None = None) -> dict[str, str]:
    """All options of the Kafka reader: the view's topics from offset 0 on.

    `min_partitions` (unless kafkaOptions sets minPartitions): Spark reads one
    task per Kafka partition, so 3 partitions on 2 cores leave a core idle a
    third of each batch; split into at least this many ranges, the cores stay
    busy (1M orders on 2 cores: 3 tasks 4.3 s, 6 tasks 3.6 s).
    """
    options = {k: _option_text(v) for k, v in source.kafka_options.items()}
    if min_partitions is not None and "minpartitions" not in {k.lower() for k in options}:
        options["minPartitions"] = str(min_partitions)
    options.update(sasl_options(env))
    options.update({
        "kafka.bootstrap.servers": source.bootstrap_servers,
        "subscribe": ",".join(source.topics),
        "startingOffsets": "earliest",
    })
    if source.max_offsets_per_trigger is not None:
        options["maxOffsetsPerTrigger"] = str(source.max_offsets_per_trigger)
    return options


def redacted(options: Mapping[str, str]) -> dict[str, str]:
    """The options, fit for a log line."""
    return {k: ("***" if k in _SECRET_OPTIONS or "password" in k.lower() else v)
            for k, v in options.items()}


def load_kafka_stream(spark: SparkSession, options: Mapping[str, str]) -> DataFrame:
    """The raw Kafka stream (key, value, topic, partition, offset, timestamp, ...)."""
    return spark.readStream.format("kafka").options(**options).load()
