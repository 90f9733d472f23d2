"""benchmarks/jdbc_sink.py: the records Debezium's JDBC sink reads, its settings, its rates."""

from __future__ import annotations

import json
from collections.abc import Callable
from types import ModuleType

import pytest


@pytest.fixture(scope="module")
def js(bench_script: Callable[[str], ModuleType]) -> ModuleType:
    return bench_script("jdbc_sink")


def test_an_order_becomes_the_json_converters_envelope_with_a_connect_timestamp(
        js: ModuleType) -> None:
    order = {"order_id": "o-7-0", "customer_id": "c-0042", "amount": 12.25,
             "ts": "2026-01-01T00:00:01"}
    record = json.loads(js.envelope(order))
    # 2026-01-01T00:00:00Z is 1,767,225,600 s after the epoch
    assert record["payload"] == {"order_id": "o-7-0", "customer_id": "c-0042",
                                 "amount": 12.25, "ts": 1_767_225_601_000}
    fields = {f["field"]: f for f in record["schema"]["fields"]}
    assert fields["ts"]["name"] == "org.apache.kafka.connect.data.Timestamp"
    assert fields["ts"]["type"] == "int64"
    assert [fields[name]["type"] for name in ("order_id", "customer_id", "amount")] == [
        "string", "string", "double"]
    assert fields["order_id"]["optional"] is False  # the key of the upsert


def test_the_connector_upserts_by_order_id_into_the_table_made_beforehand(
        js: ModuleType) -> None:
    config = js.connector_config(topic="t", table="bench_sink_1", tasks=3,
                                 dsn="host=127.0.0.1 port=55432 dbname=views user=dv password=s3")
    assert config["connector.class"] == "io.debezium.connector.jdbc.JdbcSinkConnector"
    assert config["connection.url"] == \
        "jdbc:postgresql://127.0.0.1:55432/views?reWriteBatchedInserts=true"
    assert (config["connection.username"], config["connection.password"]) == ("dv", "s3")
    assert (config["insert.mode"], config["primary.key.mode"], config["primary.key.fields"]) \
        == ("upsert", "record_value", "order_id")
    assert config["schema.evolution"] == "none"
    assert (config["collection.name.format"], config["tasks.max"], config["topics"]) == (
        "bench_sink_1", "3", "t")
    assert config["key.converter"] == "org.apache.kafka.connect.storage.StringConverter"


def test_the_rates_count_from_creation_and_from_the_first_commit(js: ModuleType) -> None:
    samples = [(10.5, 0), (11.0, 0), (12.0, 100_000), (13.0, 400_000), (14.0, 1_000_000)]
    assert js.rates(1_000_000, 10.0, samples) == {
        "jdbc_sink_events_per_s": 450_000,  # 900,000 events in the 2 s after the first commit
        "jdbc_sink_events_per_s_including_startup": 250_000,
        "jdbc_sink_seconds": 4.0}
    # every record in the first commit: no steady rate to speak of
    assert js.rates(500, 0.0, [(1.0, 0), (2.0, 500)])["jdbc_sink_events_per_s"] is None
