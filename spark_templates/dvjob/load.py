"""The Kafka source: a stream over all the view's topics, from genesis.

Credentials come from the environment (the operator maps a Secret there), never
from the configuration document, which is visible in the SparkApplication.
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

_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
_SECRET_OPTIONS = frozenset({"kafka.sasl.jaas.config", "kafka.ssl.key.password",
                             "kafka.ssl.keystore.password", "kafka.ssl.truststore.password"})


def _option_text(value: str | int | float | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _jaas_quote(value: str) -> str:
    """A JAAS string literal: Kafka's parser honours backslash escapes inside quotes."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def sasl_options(env: Mapping[str, str]) -> dict[str, str]:
    """Kafka client options for the SASL credentials in `env`, if any."""
    username = env.get(ENV_USERNAME)
    password = env.get(ENV_PASSWORD)
    options: dict[str, str] = {}
    if username is None and password is None:
        protocol = env.get(ENV_PROTOCOL)
        if protocol:
            options["kafka.security.protocol"] = protocol
        return options
    if not username or password is None:
        raise ConfigError(f"set both {ENV_USERNAME} and {ENV_PASSWORD}, or neither")
    mechanism = env.get(ENV_MECHANISM) or "PLAIN"
    module = _LOGIN_MODULES.get(mechanism.upper())
    if module is None:
        raise ConfigError(f"{ENV_MECHANISM}={mechanism!r} is not supported; use one of "
                          f"{', '.join(sorted(_LOGIN_MODULES))}")
    options["kafka.security.protocol"] = env.get(ENV_PROTOCOL) or "SASL_SSL"
    options["kafka.sasl.mechanism"] = mechanism.upper()
    options["kafka.sasl.jaas.config"] = (
        f"{module} required username={_jaas_quote(username)} password={_jaas_quote(password)};")
    return options


def kafka_reader_options(source: SourceConfig, env: Mapping[str, str]) -> dict[str, str]:
    """All options of the Kafka reader: the view's topics from offset 0 on."""
    options = {k: _option_text(v) for k, v in source.kafka_options.items()}
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
