"""The broker's configuration: a SASL/SCRAM listener beside the plaintext one, a user kept per
state directory, and a change detected so a running broker of an older stack is restarted."""

from __future__ import annotations

import dataclasses
import stat
from pathlib import Path

from dvstack.services import kafka_broker
from dvstack.settings import load


def test_sasl_listener_user_and_upgrade_detection(tmp_path: Path) -> None:
    settings = dataclasses.replace(load(), state_dir=tmp_path, kafka_port=29092,
                                   kafka_controller_port=29093, kafka_sasl_port=29094)
    path, changed = kafka_broker._write_config(settings)
    props = dict(line.split("=", 1) for line in path.read_text().splitlines())
    assert changed
    assert props["listeners"] == ("PLAINTEXT://127.0.0.1:29092,SASL_PLAINTEXT://127.0.0.1:29094,"
                                  "CONTROLLER://127.0.0.1:29093")
    assert props["advertised.listeners"] == ("PLAINTEXT://127.0.0.1:29092,"
                                             "SASL_PLAINTEXT://127.0.0.1:29094")
    assert props["sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert props["listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config"] == (
        "org.apache.kafka.common.security.scram.ScramLoginModule required;")
    assert "SASL_PLAINTEXT:SASL_PLAINTEXT" in props["listener.security.protocol.map"]

    assert kafka_broker._write_config(settings)[1] is False  # same stack: nothing to restart
    path.write_text(path.read_text().replace(",SASL_PLAINTEXT://127.0.0.1:29094", ""))
    assert kafka_broker._write_config(settings)[1] is True  # an older stack's file: restart

    user = kafka_broker.sasl_user(settings)
    assert user == kafka_broker.sasl_user(settings)  # generated once, then kept
    assert len(user["password"]) >= 24 and user["username"].startswith("dv-")
    assert stat.S_IMODE((tmp_path / "kafka" / "sasl-user.json").stat().st_mode) == 0o600
    info = kafka_broker.sasl_info(settings)
    assert info == {"bootstrap": "127.0.0.1:29094", "mechanism": "SCRAM-SHA-512",
                    "security_protocol": "SASL_PLAINTEXT", **user}
    other = dataclasses.replace(settings, state_dir=tmp_path / "other")
    assert kafka_broker.sasl_user(other) != user
