"""The job picks its sink module from the configuration's sink kind."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType

from dvjob.config import parse_config
from dvjob.credentials import Credentials
from dvjob.errors import ConfigError
from dvjob.sinks.registry import open_sink
from dvjob.sinks.schema import table_layout

CONFIG: dict[str, Any] = {
    "view": "shop/orders", "revision": "r1",
    "source": {"bootstrapServers": "k:9092", "topics": ["orders"], "format": "json",
               "schema": "customer_id STRING, n BIGINT"},
    "transform": {"sql": "SELECT customer_id, n FROM events"},
    "sink": {"table": "orders__r1", "schema": "shop", "primaryKey": ["customer_id"],
             "ledgerTable": "dv_ledger"},
    "checkpointLocation": "/c/r1", "trigger": {"availableNow": True},
}
LAYOUT = table_layout(StructType([StructField("customer_id", StringType()),
                                  StructField("n", LongType())]), ["customer_id"])


def test_a_config_without_a_kind_is_the_postgres_sink_of_earlier_operators() -> None:
    config = parse_config(json.dumps(CONFIG))
    assert config.sink.kind == "postgres"
    sink = open_sink(config, LAYOUT, Credentials())  # connects lazily: nothing is reached here
    assert sink.describe().startswith("shop.orders__r1 (ledger shop.dv_ledger) at ")


def test_an_unknown_kind_is_refused_naming_the_field() -> None:
    doc = copy.deepcopy(CONFIG)
    doc["sink"]["kind"] = "elasticsearch"
    with pytest.raises(ConfigError, match=r"sink\.kind"):
        parse_config(json.dumps(doc))
