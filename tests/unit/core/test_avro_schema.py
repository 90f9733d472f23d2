"""The reader schema's DDL, by the mapping Spark's Avro documentation gives (the job's
integration test holds it to `from_avro` itself), and the schemas a view cannot read."""

from __future__ import annotations

import json
from typing import Any

import pytest

from derived_views.core.avro_schema import AvroSchemaError, spark_ddl


def record(*fields: dict[str, Any], name: str = "Order") -> str:
    return json.dumps({"type": "record", "name": name, "fields": list(fields)})


def test_primitives_logical_types_and_nesting_map_as_spark_reads_them() -> None:
    ddl = spark_ddl(record(
        {"name": "id", "type": "string"},
        {"name": "qty", "type": "int"},
        {"name": "total", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10,
                                   "scale": 2}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "long"}},
        {"name": "state", "type": {"type": "enum", "name": "State", "symbols": ["A", "B"]}},
        {"name": "ship", "type": {"type": "record", "name": "Ship", "fields": [
            {"name": "city", "type": "string"}]}},
        {"name": "back", "type": ["null", "Ship"], "default": None},
        {"name": "n", "type": ["int", "long"]},
        {"name": "either", "type": ["null", "string", "int"]},
    ))
    assert ddl == ("`id` STRING, `qty` INT, `total` DECIMAL(10,2), `at` TIMESTAMP, `day` DATE, "
                   "`note` STRING, `tags` ARRAY<STRING>, `attrs` MAP<STRING, BIGINT>, "
                   "`state` STRING, `ship` STRUCT<`city`: STRING>, "
                   "`back` STRUCT<`city`: STRING>, `n` BIGINT, "
                   "`either` STRUCT<member0: STRING, member1: INT>")


@pytest.mark.parametrize(("schema", "says"), [
    ("{", "not JSON"),
    ('"string"', "must be an Avro record"),
    (record(), "no fields"),
    (record({"name": "x"}), "no \"type\""),
    (record({"name": "1x", "type": "int"}), "letters, digits"),
    (record({"name": "a", "type": "int"}, {"name": "A", "type": "int"}), "twice"),
    (record({"name": "_kafka_key", "type": "string"}), "reserved"),
    (record({"name": "x", "type": "Missing"}), "unknown type 'Missing'"),
    (record({"name": "x", "type": "null"}), "holds nothing"),
    (record({"name": "x", "type": {"type": "bytes", "logicalType": "decimal",
                                   "precision": 50}}), "precision <= 38"),
    (record({"name": "next", "type": ["null", "Order"]}), "contains itself"),
    (record({"name": "x", "type": {"type": "array"}}), "needs \"items\""),
    (record({"name": "x", "type": {"type": "thing"}}), "unknown type 'thing'"),
    ("[" * 16_000 + "]" * 16_000, "nested deeper than 32 levels"),  # within the 32768 chars
])
def test_a_schema_a_view_cannot_read_is_refused_naming_where(schema: str, says: str) -> None:
    with pytest.raises(AvroSchemaError) as raised:
        spark_ddl(schema)
    assert says in str(raised.value), str(raised.value)
