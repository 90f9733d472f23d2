"""The reader schema's DDL, by the mapping Spark's Avro documentation gives (the job's
integration test holds it to `from_avro` itself), and the schemas a view cannot read."""

from __future__ import annotations

import json
from typing import Any

import pytest

from derived_views.core.judges import avro_schema
from derived_views.core.judges.avro_schema import (
    MAX_SCHEMA_DEPTH,
    MAX_TEXT_CHARS,
    AvroSchemaError,
    AvroWork,
    spark_ddl,
)
from derived_views.core.judges.spark_ddl import MAX_DDL_CHARS, MAX_NESTING, parse_schema
from support.corpora.hostile_specs import (
    LIMIT,
    TOO_LONG_DDL,
    arrays,
    doubling,
    exact_ddl,
    field,
    nesting,
    reader,
)
from support.corpora.hostile_specs import record as named


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


# --- bounds: every translation is counted work, refused past its limits -----------------------

def test_a_schema_using_each_levels_record_twice_is_refused_at_the_ddl_limit() -> None:
    for levels in (12, 14, 16, 20):  # 2^levels copies: 20 levels once built 55 MB of DDL
        work = AvroWork()
        with pytest.raises(AvroSchemaError) as raised:
            spark_ddl(doubling(levels), work)
        assert TOO_LONG_DDL in str(raised.value) and "uses of named types by name" in str(
            raised.value)
        assert "Use large named records fewer times, or read fewer fields" in str(raised.value)
        # refused once the DDL made passes the limit (by one piece, itself within it), each
        # definition walked once
        assert MAX_DDL_CHARS < work.chars <= 2 * MAX_DDL_CHARS
        assert work.steps < 10 * levels


def test_the_work_grows_with_the_schema_not_with_its_copies() -> None:
    """Each named type is walked once, each use costs one step: twice the levels, twice
    the steps, though the DDL is 2^levels times longer."""
    small, large = AvroWork(), AvroWork()
    spark_ddl(doubling(4), small)
    spark_ddl(doubling(8), large)
    assert large.references == 2 * small.references == 8
    assert large.steps < 2 * small.steps
    assert large.chars == 16 * small.chars


def test_a_ddl_of_exactly_the_limit_is_accepted_and_one_more_character_is_not() -> None:
    assert len(spark_ddl(exact_ddl(MAX_DDL_CHARS))) == MAX_DDL_CHARS == LIMIT
    with pytest.raises(AvroSchemaError, match=TOO_LONG_DDL):
        spark_ddl(exact_ddl(MAX_DDL_CHARS + 1))
    assert len(spark_ddl(doubling(9))) < MAX_DDL_CHARS  # 9 levels of copies fit
    with pytest.raises(AvroSchemaError, match=TOO_LONG_DDL):
        spark_ddl(doubling(10))


def test_the_text_is_judged_up_to_the_crd_limit() -> None:
    text = reader(field("a", "int"))
    padded = text[:-1] + " " * (MAX_TEXT_CHARS - len(text)) + "}"
    assert len(padded) == MAX_TEXT_CHARS and spark_ddl(padded) == "`id` STRING, `a` INT"
    with pytest.raises(AvroSchemaError, match=f"{MAX_TEXT_CHARS + 1} characters, more than"):
        spark_ddl(padded + " ")


def test_the_schema_nests_at_most_max_depth_levels() -> None:
    assert spark_ddl(reader(field("a", arrays(MAX_SCHEMA_DEPTH - 1)))).endswith(
        "ARRAY<" * (MAX_SCHEMA_DEPTH - 1) + "INT" + ">" * (MAX_SCHEMA_DEPTH - 1))
    with pytest.raises(AvroSchemaError, match=f"nested deeper than {MAX_SCHEMA_DEPTH} levels"):
        spark_ddl(reader(field("a", arrays(MAX_SCHEMA_DEPTH))))


def test_the_type_nests_at_most_as_deep_as_the_ddl_check_reads() -> None:
    """Records used by name inside further arrays nest past the schema's own levels: the
    type is refused past MAX_NESTING, so every DDL made here is one parse_schema reads."""
    deepest = spark_ddl(nesting(MAX_NESTING))
    assert max_nesting(deepest) == MAX_NESTING
    parse_schema(deepest)
    with pytest.raises(AvroSchemaError, match=f"nests deeper than {MAX_NESTING} levels"):
        spark_ddl(nesting(MAX_NESTING + 1))


def max_nesting(ddl: str) -> int:
    level = deepest = 0
    for char in ddl:
        level += (char == "<") - (char == ">")
        deepest = max(deepest, level)
    return deepest


@pytest.mark.parametrize(("schema", "says"), [
    (reader(field("a", named("A", field("b", named("B", field("a", ["null", "A"])))))),
     "the record 'A' contains itself"),
    (reader(field("a", named("A", field("again", named("A", field("x", "int")))))),
     "contains itself"),
    (reader(field("a", named("A", field("x", "int"))), field("b", named("A", field(
        "y", "int")))), "the named type 'A' is defined twice, differently"),
    (reader(field("u", ["null", ["int", "string"]])), "a union directly inside a union"),
    (reader(field("u", json.loads('["null", ' * 400 + '"int"' + "]" * 400))),
     "a union directly inside a union"),
    (reader(field("a", json.loads('{"type": ' * 500 + '"int"' + "}" * 500))),
     f"nested deeper than {MAX_SCHEMA_DEPTH} levels"),
    (reader(field("e", {"type": "enum", "name": "E", "symbols": "AB"})), "needs \"symbols\""),
    (reader(field("f", {"type": "fixed", "name": "F", "size": True})), "integer \"size\""),
    (reader(field("r", named("R", field("x", "int"), namespace=["a"]))), "\"namespace\""),
    (reader(field("x", {"type": {"type": 5}})), "unknown Avro type 5"),
])
def test_recursion_redefinition_and_malformed_types_are_refused(schema: str, says: str
                                                                ) -> None:
    with pytest.raises(AvroSchemaError) as raised:
        spark_ddl(schema)
    assert says in str(raised.value), str(raised.value)


@pytest.mark.parametrize("prop", ["java-class", "java-key-class", "java-element-class",
                                  "avro.java.string", "javaAnnotation", "class", "pyClass"])
def test_a_property_naming_a_class_is_refused_wherever_it_is(prop: str) -> None:
    props = {prop: "java.lang.Runtime"}
    for schema in (
            reader(field("s", {"type": "string", **props})),
            reader(field("s", "string", **props)),
            json.dumps(named("Row", field("id", "string"), **props)),
            reader(field("m", {"type": "map", "values": "int", **props})),
            reader(field("a", {"type": "array", "items": "int", **props})),
            reader(field("u", [{"type": "null", **props}, "string"])),
            reader(field("e", {"type": "enum", "name": "E", "symbols": ["A"], **props})),
            reader(field("r", named("R", field("x", "int"), **props)))):
        with pytest.raises(AvroSchemaError) as raised:
            spark_ddl(schema)
        assert f"the property {prop!r} names a Java class" in str(raised.value)


def test_properties_naming_no_class_are_read_past() -> None:
    """Kafka Connect's and Debezium's own properties (their values may be class names,
    which only the producer's converter reads) and other custom properties."""
    assert spark_ddl(reader(field("t", {
        "type": "long", "connect.name": "io.debezium.time.MicroTimestamp", "connect.version": 1,
        "classification": "internal", "doc": "when"}))) == "`id` STRING, `t` BIGINT"


@pytest.mark.parametrize(("avro_type", "ddl"), [
    ({"type": "int", "logicalType": "time-millis"}, "INT"),
    ({"type": "long", "logicalType": "time-micros"}, "BIGINT"),
    ({"type": "long", "logicalType": "timestamp-nanos"}, "BIGINT"),
    ({"type": "long", "logicalType": "local-timestamp-micros"}, "TIMESTAMP_NTZ"),
    ({"type": "string", "logicalType": "uuid"}, "STRING"),
    ({"type": "string", "logicalType": "date"}, "STRING"),  # on the wrong type: ignored
    ({"type": "fixed", "name": "D", "size": 8, "logicalType": "decimal", "precision": 18,
      "scale": 4}, "DECIMAL(18,4)"),
    ({"type": "fixed", "name": "Dur", "size": 12, "logicalType": "duration"}, "BINARY"),
    ({"type": "bytes", "logicalType": "made-up"}, "BINARY"),
    ({"type": ["null", "string"]}, "STRING"),  # a union wrapped in {"type": ...}
])
def test_logical_types_map_as_spark_reads_them(avro_type: Any, ddl: str) -> None:
    assert spark_ddl(reader(field("x", avro_type))) == f"`id` STRING, `x` {ddl}"


def test_a_named_type_is_found_by_its_short_name_and_an_equal_redefinition_is_a_use() -> None:
    ship = named("Ship", field("city", "string"), namespace="com.example")
    assert spark_ddl(reader(field("a", ship), field("b", "Ship"), field("c", "com.example.Ship"),
                            field("d", ship))) == (
        "`id` STRING, " + ", ".join(f"`{n}` STRUCT<`city`: STRING>" for n in "abcd"))


def test_whatever_else_goes_wrong_while_judging_is_a_refusal(monkeypatch: Any) -> None:
    def broken(*args: Any) -> Any:
        raise KeyError("a bug")
    monkeypatch.setattr(avro_schema._Walk, "union", broken)
    with pytest.raises(AvroSchemaError, match=r"could not be judged \(KeyError\), so it is "
                                              "refused"):
        spark_ddl(reader(field("u", ["null", "int", "string"])))
