"""The job's configuration contract: what is accepted, and errors that name the field."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from dvjob.config import config_from_argv, parse_config
from dvjob.errors import ConfigError
from dvjob.main import main
from support.spark_job.configs import VALID


def _with(path: str, value: Any) -> str:
    """VALID with the dotted `path` set to `value` (or removed, for ...)."""
    doc = copy.deepcopy(VALID)
    *parents, leaf = path.split(".")
    target = doc
    for part in parents:
        target = target[part]
    if value is ...:
        del target[leaf]
    else:
        target[leaf] = value
    return json.dumps(doc)


def test_the_contract_example_is_read_from_camel_case_keys() -> None:
    config = parse_config(json.dumps(VALID))
    assert config.view == "shop/orders-by-customer"
    assert config.revision == "3f9c1a2b4d5e"
    assert config.source.bootstrap_servers == "127.0.0.1:9092"
    assert config.source.topics == ["orders", "refunds"]
    assert config.source.schema_ddl == "order_id STRING, customer_id STRING, amount DOUBLE, ts TIMESTAMP"
    assert config.source.max_offsets_per_trigger is None
    assert config.source.kafka_options == {"failOnDataLoss": False}
    assert config.transform.sql is not None and config.transform.python is None
    assert config.sink.table == "orders_by_customer__3f9c1a2b4d5e"
    assert config.sink.db_schema == "public"
    assert config.sink.primary_key == ["customer_id"]
    assert config.sink.ledger_table == "dv_ledger"
    assert config.checkpoint_location == "/checkpoints/shop/orders-by-customer/3f9c1a2b4d5e"
    assert config.trigger.processing_time_seconds == 1.0
    assert config.trigger.available_now is None


def test_python_transform_available_now_and_defaults() -> None:
    doc = copy.deepcopy(VALID)
    doc["transform"] = {"python": "views.orders:per_customer"}
    doc["trigger"] = {"availableNow": True}
    for optional in ("maxOffsetsPerTrigger", "kafkaOptions", "format"):
        del doc["source"][optional]
    for optional in ("schema", "ledgerTable"):
        del doc["sink"][optional]
    config = parse_config(json.dumps(doc))
    assert config.transform.python == "views.orders:per_customer"
    assert config.trigger.available_now is True
    assert config.source.format == "json"
    assert config.source.kafka_options == {}
    assert config.sink.db_schema == "public"
    assert config.sink.ledger_table == "dv_ledger"


@pytest.mark.parametrize(("path", "value", "expected"), [
    ("revision", ..., "revision: Field required"),
    ("revision", "3f9c 1a", "revision: Value error"),
    ("view", "", "view: String should have at least 1 character"),
    ("source.bootstrapServers", ..., "source.bootstrapServers: Field required"),
    ("source.topics", [], "source.topics: List should have at least 1 item"),
    ("source.topics", ["orders", "orders"], "source.topics: Value error, topics must not repeat"),
    ("source.topics", ["a,b"], "source.topics: Value error, 'a,b' is not a valid topic name"),
    ("source.format", "protobuf", "source.format: Input should be 'json'"),
    ("source.maxOffsetsPerTrigger", 0, "source.maxOffsetsPerTrigger: Input should be greater than 0"),
    ("source.kafkaOptions", {"startingOffsets": "latest"},
     "source.kafkaOptions: Value error, startingOffsets cannot be set here"),
    ("transform", {"sql": "SELECT 1", "python": "a:b"},
     "transform: Value error, give exactly one of 'sql' or 'python'"),
    ("transform", {}, "transform: Value error, give exactly one of 'sql' or 'python'"),
    ("transform", {"python": "views.orders"},
     "transform.python: Value error, 'views.orders' is not of the form 'package.module:function'"),
    ("transform", {"sql": "SELECT 1", "language": "sql"},
     "transform.language: Extra inputs are not permitted"),
    ("sink.primaryKeys", ["customer_id"], "sink.primaryKeys: Extra inputs are not permitted"),
    ("sink.primaryKey", [], "sink.primaryKey: List should have at least 1 item"),
    ("sink.primaryKey", ["a", "a"], "sink.primaryKey: Value error, primary key columns must not repeat"),
    ("sink.primaryKey", ["_dv_deleted"], "sink.primaryKey: Value error, _dv_deleted is the delete flag"),
    ("sink.table", "t" * 64, "sink.table: Value error, '" + "t" * 64 + "' is longer than PostgreSQL's limit of 63 bytes"),
    # 32 characters, but 64 bytes in UTF-8: the limit is in bytes.
    ("sink.table", "é" * 32, "sink.table: Value error, '" + "é" * 32 + "' is longer than PostgreSQL's limit of 63 bytes"),
    ("sink.table", "", "sink.table: Value error, must not be empty"),
    ("sink.ledgerTable", "x\u0000", "sink.ledgerTable: Value error, must not contain NUL"),
    ("checkpointLocation", "", "checkpointLocation: String should have at least 1 character"),
    ("trigger", {}, "trigger: Value error, give exactly one of 'processingTimeSeconds' or 'availableNow'"),
    ("trigger", {"processingTimeSeconds": 1, "availableNow": True}, "trigger: Value error, give exactly one"),
    ("trigger", {"processingTimeSeconds": -1}, "trigger.processingTimeSeconds: Input should be greater than 0"),
    ("trigger", {"processingTimeSeconds": "1"}, "trigger.processingTimeSeconds: Input should be a valid number"),
    ("trigger", {"availableNow": False}, "trigger.availableNow: Input should be True"),
])
def test_invalid_field_is_named_in_the_error(path: str, value: Any, expected: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config(_with(path, value))
    message = str(raised.value)
    assert message.startswith("invalid job configuration (--config-json): ")
    assert expected in message


def test_every_problem_is_reported_at_once() -> None:
    doc = copy.deepcopy(VALID)
    doc["source"]["topics"] = []
    doc["sink"]["table"] = ""
    with pytest.raises(ConfigError) as raised:
        parse_config(json.dumps(doc))
    assert "source.topics:" in str(raised.value)
    assert "sink.table:" in str(raised.value)


def test_malformed_json_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="Invalid JSON"):
        parse_config('{"view": ')


def test_argv_takes_json_or_a_file(tmp_path: Path) -> None:
    assert config_from_argv(["--config-json", json.dumps(VALID)]).revision == "3f9c1a2b4d5e"
    config_file = tmp_path / "job.json"
    config_file.write_text(json.dumps(VALID))
    assert config_from_argv(["--config-file", str(config_file)]).revision == "3f9c1a2b4d5e"


def test_argv_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"cannot read --config-file .*missing\.json"):
        config_from_argv(["--config-file", str(tmp_path / "missing.json")])
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(ConfigError, match=r"\(--config-file .*bad\.json\): view: Field required"):
        config_from_argv(["--config-file", str(bad)])
    with pytest.raises(SystemExit):
        config_from_argv([])
    with pytest.raises(SystemExit):
        config_from_argv(["--config-json", "{}", "--config-file", str(bad)])


def test_main_fails_fast_on_a_bad_config_with_one_error_line(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--config-json", _with("sink.primaryKey", [])]) == 2
    last_line = capsys.readouterr().out.strip().splitlines()[-1]
    assert last_line.startswith("dvjob: error: invalid job configuration (--config-json): "
                                "sink.primaryKey: List should have at least 1 item")
