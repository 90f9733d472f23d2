"""Kafka Connect's Avro converter: its plugin directory on the plugin path, the settings a
connector writes Confluent-format Avro with, and what `SourceDatabase.capture` sends."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from dvstack import artefacts
from dvstack.services import kafka_connect
from dvstack.services.debezium import SourceDatabase
from dvstack.settings import APICURIO_VERSION, load

CCOMPAT = "http://127.0.0.1:18081/apis/ccompat/v7"
CORE = "http://127.0.0.1:18081/apis/registry/v3"


@pytest.mark.parametrize("given", [CCOMPAT, f"{CCOMPAT}/", CORE, "http://127.0.0.1:18081"])
def test_the_serdes_get_apicurios_own_api_of_the_registry_they_are_given(given: str) -> None:
    assert kafka_connect.registry_core_url(given) == CORE


def test_keys_and_values_are_avro_with_a_content_id_in_the_payload() -> None:
    config = kafka_connect.avro_converter_config(CCOMPAT)
    for side in ("key.converter", "value.converter"):
        assert config[side] == "io.apicurio.registry.utils.converter.AvroConverter"
        settings = {k.removeprefix(f"{side}."): v for k, v in config.items()
                    if k.startswith(f"{side}.")}
        assert settings == {
            "apicurio.registry.url": CORE,
            "apicurio.registry.auto-register": "true",
            "apicurio.registry.artifact-resolver-strategy":
                "io.apicurio.registry.serde.strategy.TopicIdStrategy",
            "apicurio.registry.headers.enabled": "false",
            "apicurio.registry.id-handler": "io.apicurio.registry.serde.Default4ByteIdHandler",
            "apicurio.registry.use-id": "contentId",
            "apicurio.registry.avro.encoding": "BINARY",
            "apicurio.registry.dereference-schema": "true",
        }
    assert len(config) == 2 * 9


def source() -> SourceDatabase:
    pg = {"host": "127.0.0.1", "port": 15432, "user": "postgres", "password": "pw"}
    return SourceDatabase("k1", "host=127.0.0.1 dbname=x", pg, "http://127.0.0.1:18083")


def test_a_capture_keeps_the_workers_json_unless_avro_is_asked_for() -> None:
    plain = source().capture_config()
    assert not any(k.startswith(("key.converter", "value.converter")) for k in plain)
    assert "schema.name.adjustment.mode" not in plain
    avro = source().capture_config(CCOMPAT)
    assert avro == {**plain, **kafka_connect.avro_converter_config(CCOMPAT),
                    "schema.name.adjustment.mode": "avro", "field.name.adjustment.mode": "avro"}


def test_a_worker_is_ready_once_it_lists_the_connectors_and_the_converter() -> None:
    connector = {"class": kafka_connect.POSTGRES_CONNECTOR, "type": "source"}
    sink = {"class": kafka_connect.JDBC_SINK_CONNECTOR, "type": "sink"}
    converter = {"class": kafka_connect.AVRO_CONVERTER, "type": "converter"}
    assert kafka_connect.missing_plugins([connector, sink, converter]) == []
    assert kafka_connect.missing_plugins([connector, sink]) == [kafka_connect.AVRO_CONVERTER]
    assert kafka_connect.missing_plugins([connector, converter]) == [
        kafka_connect.JDBC_SINK_CONNECTOR]
    assert kafka_connect.missing_plugins([]) == list(kafka_connect.REQUIRED_PLUGINS)


def test_the_converter_is_a_plugin_path_root_of_its_own(tmp_path: Path) -> None:
    settings = dataclasses.replace(load(), cache_dir=tmp_path)
    root = tmp_path / f"kafka-connect-apicurio-converter-{APICURIO_VERSION}"
    plugin = root / artefacts.APICURIO_CONVERTER_PLUGIN
    plugin.mkdir(parents=True)
    (plugin / ".complete").write_text("ok\n")  # fetched already: no Maven
    assert artefacts.apicurio_converter_plugins(settings) == root
    debezium = tmp_path / "plugins"
    assert kafka_connect.plugin_path_setting(debezium, root) == f"{debezium},{root}"
