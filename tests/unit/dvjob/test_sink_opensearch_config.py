"""The OpenSearch sink's configuration: kind, index names, credentials from its Secret's keys."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType

from dvjob.config import parse_config
from dvjob.credentials import Credentials
from dvjob.errors import ConfigError
from dvjob.sinks.opensearch.client import redacted_url
from dvjob.sinks.opensearch.sink import OpenSearchSink
from dvjob.sinks.registry import SINK_KINDS, open_sink
from dvjob.sinks.schema import table_layout

CONFIG: dict[str, Any] = {
    "view": "shop/orders", "revision": "r1",
    "source": {"bootstrapServers": "k:9092", "topics": ["orders"], "format": "json",
               "schema": "customer_id STRING, n BIGINT"},
    "transform": {"sql": "SELECT customer_id, n FROM events"},
    "sink": {"kind": "opensearch", "table": "orders__r1", "primaryKey": ["customer_id"],
             "ledgerTable": "dv_ledger"},
    "checkpointLocation": "/c/r1", "trigger": {"availableNow": True},
}
LAYOUT = table_layout(StructType([StructField("customer_id", StringType()),
                                  StructField("n", LongType())]), ["customer_id"])


def with_sink(**changes: Any) -> str:
    doc = copy.deepcopy(CONFIG)
    doc["sink"].update(changes)
    return json.dumps(doc)


def secret(**keys: str) -> Credentials:
    """The sink Secret's keys as dvjob.credentials names them."""
    return Credentials(opensearch={f"DV_OPENSEARCH_{k.upper()}": v for k, v in keys.items()})


def test_opensearch_is_a_sink_kind_whose_table_is_the_index() -> None:
    assert "opensearch" in SINK_KINDS
    config = parse_config(with_sink())
    assert (config.sink.kind, config.sink.table, config.sink.ledger_table) == (
        "opensearch", "orders__r1", "dv_ledger")


def test_an_index_name_longer_than_postgres_allows_is_fine() -> None:
    assert parse_config(with_sink(table="o" * 200 + "__r1")).sink.table == "o" * 200 + "__r1"


@pytest.mark.parametrize(("field", "name", "message"), [
    ("table", "Orders__r1", "sink.table: Value error, 'Orders__r1': OpenSearch index names "
                            "must be lowercase"),
    ("ledgerTable", "DV_Ledger", "sink.ledgerTable: Value error, 'DV_Ledger': OpenSearch index "
                                 "names must be lowercase"),
    ("table", "_orders", "cannot be '.' or '..' or start with '-', '_' or '+'"),
    ("table", "..", "cannot be '.' or '..'"),
    ("table", "a b*", "cannot contain ' ' '*'"),
    ("table", "o" * 256, "longer than OpenSearch's limit of 255 bytes"),
    ("table", "", "sink.table: Value error, must not be empty"),
])
def test_index_names_opensearch_refuses_are_refused_at_start(field: str, name: str,
                                                             message: str) -> None:
    with pytest.raises(ConfigError, match="invalid job configuration") as raised:
        parse_config(with_sink(**{field: name}))
    assert message in str(raised.value)


def test_postgres_names_keep_their_rules() -> None:
    assert parse_config(with_sink(kind="postgres", table="Orders__r1")).sink.table == "Orders__r1"
    with pytest.raises(ConfigError, match="longer than PostgreSQL's limit of 63 bytes"):
        parse_config(with_sink(kind="postgres", table="t" * 64))


def test_open_sink_reads_the_url_and_logs_it_without_credentials() -> None:
    creds = secret(url="https://dv:s3cret@search.example:9200", username="dv", password="s3cret")
    sink = open_sink(parse_config(with_sink()), LAYOUT, creds)  # connects lazily: nothing reached
    assert isinstance(sink, OpenSearchSink)
    assert sink.describe() == "index orders__r1 (ledger dv_ledger) at https://search.example:9200"
    assert "s3cret" not in sink.describe()


def test_open_sink_needs_the_url() -> None:
    with pytest.raises(ConfigError, match="DV_OPENSEARCH_URL is not set"):
        open_sink(parse_config(with_sink()), LAYOUT, secret())
    with pytest.raises(ConfigError, match=r"give an http:// or https:// URL"):
        open_sink(parse_config(with_sink()), LAYOUT, secret(url="search.example:9200"))


def test_a_username_without_a_password_is_refused() -> None:
    with pytest.raises(ConfigError, match="set both or neither"):
        open_sink(parse_config(with_sink()), LAYOUT,
                  secret(url="http://search.example:9200", username="dv"))


def test_column_names_are_checked_when_the_sink_is_opened() -> None:
    dotted = table_layout(StructType([StructField("customer_id", StringType()),
                                      StructField("a.b", LongType())]), ["customer_id"])
    with pytest.raises(ConfigError, match=r"column 'a\.b'"):
        open_sink(parse_config(with_sink()), dotted, secret(url="http://search.example:9200"))


@pytest.mark.parametrize(("url", "shown"), [
    ("http://u:p@h:9200/prefix?x=1", "http://h:9200/prefix"),
    ("https://h", "https://h"),
])
def test_urls_are_logged_without_credentials(url: str, shown: str) -> None:
    assert redacted_url(url) == shown
