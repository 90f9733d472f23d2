"""One Kafka Secret, two readers: the operator (librdkafka settings) and the Spark job (env
variables the rendered manifest maps from the Secret, then Java client options) must agree on
protocol, mechanism, credentials, CA, and on which Secrets are unusable."""

from __future__ import annotations

from typing import Any

import pytest

from derived_views.api.spec import DerivedViewSpec
from derived_views.core.kafka_client import KafkaSecretInvalid, client_settings
from derived_views.render.sparkapplication import job_env
from dvjob.errors import ConfigError
from dvjob.load import sasl_options

PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
SPEC = DerivedViewSpec.model_validate({
    "source": {"kafka": {"bootstrapServers": "k:9092", "secretRef": {"name": "kafka-creds"}},
               "topics": ["t"], "schema": "a STRING"},
    "transform": {"sql": "SELECT a FROM events"},
    "sink": {"postgres": {"secretRef": {"name": "db"}, "table": "t"}, "primaryKey": ["a"]}})

SECRETS: list[dict[str, str]] = [
    {"username": "u", "password": 'p"w\\'},
    {"username": "u", "password": "p", "mechanism": "SCRAM-SHA-512",
     "securityProtocol": "SASL_PLAINTEXT"},
    {"username": "u", "password": "p", "mechanism": "scram-sha-256", "ca.crt": PEM},
    {"securityProtocol": "SSL", "ca.crt": PEM},
    {"securityProtocol": "SSL"},
    # unusable, on both sides
    {},
    {"username": "u"},
    {"password": "p"},
    {"username": "u", "password": "p", "mechanism": "GSSAPI"},
    {"username": "u", "password": "p", "securityProtocol": "PLAINTEXT"},
    {"username": "u", "password": "p", "securityProtocol": "SASL_PLAINTEXT", "ca.crt": PEM},
]


def job_environment(data: dict[str, str]) -> dict[str, str]:
    """What a kubelet would put in the job's environment for this Secret's data."""
    env: dict[str, str] = {}
    for entry in job_env(SPEC):
        if "value" in entry:
            env[entry["name"]] = entry["value"]
            continue
        ref: dict[str, Any] = entry["valueFrom"]["secretKeyRef"]
        if ref["name"] == "kafka-creds" and ref["key"] in data:
            env[entry["name"]] = data[ref["key"]]
    return env


@pytest.mark.parametrize("data", SECRETS, ids=lambda d: ",".join(f"{k}={v[:12]}"
                                                                  for k, v in d.items()) or "{}")
def test_operator_and_job_read_a_secret_the_same_way(data: dict[str, str]) -> None:
    try:
        operator = client_settings(data)
    except KafkaSecretInvalid:
        with pytest.raises(ConfigError):
            sasl_options(job_environment(data))
        return
    job = sasl_options(job_environment(data))
    assert job["kafka.security.protocol"] == operator["security.protocol"]
    assert job.get("kafka.sasl.mechanism") == operator.get("sasl.mechanism")
    if "sasl.username" in operator:
        jaas = job["kafka.sasl.jaas.config"]
        assert f'username="{operator["sasl.username"]}"' in jaas
        escaped = operator["sasl.password"].replace("\\", "\\\\").replace('"', '\\"')
        assert f'password="{escaped}"' in jaas
    else:
        assert "kafka.sasl.jaas.config" not in job
    assert job.get("kafka.ssl.truststore.certificates") == operator.get("ssl.ca.pem")
    assert (job.get("kafka.ssl.truststore.type") == "PEM") == ("ssl.ca.pem" in operator)
