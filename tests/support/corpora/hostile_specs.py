"""Hostile schemas a tenant may write, and the largest legitimate ones, for every judge.

One corpus for the judges of a spec's schema (tests/unit/core/test_hostile_schemas.py runs
each judge over all of it and records the time each takes on its worst case). A schema is
a Spark DDL in `source.schema` (format json) or an inline Avro reader schema (format avro).
Each hostile one is refused before any job, with `reason` and a part of the refusal
(`says`); a few are longer than the CRD allows (layer "admission": the spec is refused when
read, and the schema judges refuse them too). Each legitimate one sits at a judge's limit
(core.judges.spark_ddl, core.judges.avro_schema) and is accepted by every judge, so the time a judge takes
on the worst of them is the most an accepted spec costs it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

LIMIT = 32768
"""The judges' limits of characters: a source.schema, a reader schema, the DDL derived from
a reader schema (written out: the corpus's own expectation)."""
NESTING = 64
"""Levels of STRUCT, ARRAY and MAP a type may nest."""
DEPTH = 32
"""Levels of an Avro schema as written."""
KEY = "id"
"""The column every schema of the corpus has first: the primary key of the spec around it."""
TOO_LONG_DDL = f"the events' Spark type would be longer than {LIMIT} characters"
JAVA = "names a Java class, and a view's schema names no class"


@dataclass(frozen=True)
class SchemaCase:
    cls: str
    what: str
    fmt: str
    """json (a DDL in source.schema) or avro (an inline reader schema)."""
    text: str
    says: str = ""
    """A part of the refusal; empty for a schema every judge accepts."""
    reason: str = "InvalidSchema"
    layer: str = "operator"
    """Who refuses first: "operator" (Stalled, no job) or "admission" (the CRD's length)."""
    sql: str = "SELECT * FROM events"
    """The transform around the schema (refused itself when `reason` is InvalidTransform,
    the schema then being accepted)."""


def record(name: str, *fields: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": list(fields), **more}


def field(name: str, type_: Any, **more: Any) -> dict[str, Any]:
    return {"name": name, "type": type_, **more}


def reader(*fields: dict[str, Any]) -> str:
    """A top-level reader schema with an `id` column first."""
    return json.dumps(record("Row", field("id", "string"), *fields))


def doubling(levels: int) -> str:
    """Each level's record defines the next and uses it again by name: 2^levels copies."""
    inner = record(f"L{levels}", field("v", "int"))
    for k in range(levels - 1, -1, -1):
        inner = record(f"L{k}", field("a", inner), field("b", f"L{k + 1}"))
    return reader(field("tree", inner))


def arrays(levels: int, of: Any = "int") -> Any:
    for _ in range(levels):
        of = {"type": "array", "items": of}
    return of


def nesting(levels: int) -> str:
    """An Avro schema whose DDL nests `levels` deep (at least 62) within DEPTH levels of the
    schema: R0 nests 31 levels, R1 (arrays of R0) 62, and R1 is used by name in arrays."""
    return reader(field("x", record("R0", field("f", arrays(DEPTH - 2)))),
                  field("y", record("R1", field("g", arrays(DEPTH - 2, "R0")))),
                  field("z", arrays(levels - 2 * (DEPTH - 1), "R1")))


def exact_ddl(chars: int) -> str:
    """A reader schema whose DDL is exactly `chars` long (at least 130), by using one record
    four times: `id STRING, f0..f3 STRUCT<name: INT>` and a padding column."""
    fixed = len("`id` STRING") + 4 * len(", `f0` STRUCT<``: INT>") + len(", `p` INT")
    name, pad = divmod(chars - fixed, 4)
    big = record("Big", field("n" * name, "int"))
    return reader(field("f0", big), *(field(f"f{i}", "Big") for i in (1, 2, 3)),
                  field("p" * (pad + 1), "int"))


def flat_ddl(column: str = "customer_attribute_{:04d} STRING", sep: str = ", ") -> str:
    """As many columns as LIMIT holds, `id` first."""
    parts = ["id STRING"]
    while len(sep.join([*parts, column.format(len(parts))])) <= LIMIT:
        parts.append(column.format(len(parts)))
    return sep.join(parts)


def filled(template: str, unit: str, budget: int = LIMIT) -> str:
    """`template` with `{}` replaced by as many `unit`s as keep it within `budget`."""
    count = (budget - len(template.format(""))) // len(unit)
    return template.format(unit * count)


def wide_struct() -> str:
    """`id STRING, s STRUCT<b0:INT,b1:INT,...>` as long as LIMIT allows: the most tokens."""
    names: list[str] = []
    while len(f"id STRING, s STRUCT<{','.join([*names, f'b{len(names)}:INT'])}>") <= LIMIT:
        names.append(f"b{len(names)}:INT")
    return f"id STRING, s STRUCT<{','.join(names)}>"


def too_long_avro() -> str:
    """A valid reader schema of LIMIT + 1 characters (a long `doc`)."""
    short = json.dumps(record("Row", field("id", "string"), doc=""))
    return json.dumps(record("Row", field("id", "string"), doc="x" * (LIMIT + 1 - len(short))))


def flat_avro() -> str:
    fields = [field("id", "string")]
    while len(json.dumps(record("Order", *fields, namespace="com.example.shop"))) <= LIMIT:
        fields.append(field(f"customer_attribute_{len(fields):04d}", ["null", "string"],
                            default=None))
    return json.dumps(record("Order", *fields[:-1], namespace="com.example.shop"))


def debezium_envelope() -> str:
    """Debezium's Avro envelope of a table (`before` and `after` the same `Value`, the
    connector's `source`, the transaction block) with as many columns as LIMIT holds."""
    def column(i: int) -> dict[str, Any]:
        timestamp = {"type": "long", "connect.version": 1,
                     "connect.name": "io.debezium.time.MicroTimestamp"}
        money = {"type": "bytes", "scale": 2, "precision": 12, "connect.version": 1,
                 "connect.parameters": {"scale": "2", "connect.decimal.precision": "12"},
                 "connect.name": "org.apache.kafka.connect.data.Decimal",
                 "logicalType": "decimal"}
        address = record(f"Address{i}", *(field(n, ["null", "string"], default=None)
                                          for n in ("street", "city", "zip")),
                         namespace="shop.public.orders")
        kinds: list[Any] = ["string", timestamp, money, "int", address]
        return field(f"column_{i:03d}", ["null", kinds[i % len(kinds)]], default=None)

    def envelope(columns: int) -> str:
        value = record("Value", field("id", "string"), *(column(i) for i in range(columns)),
                       namespace="shop.public.orders")
        source = record("Source", *(field(n, "string") for n in (
            "version", "connector", "name", "db", "schema", "table")),
            field("ts_ms", "long"), field("lsn", ["null", "long"]),
            field("snapshot", ["null", {"type": "string", "connect.name": "io.debezium.data.Enum",
                                        "connect.parameters": {"allowed": "true,last,false"}}]),
            namespace="io.debezium.connector.postgresql")
        block = record("block", field("id", "string"), field("total_order", "long"),
                       field("data_collection_order", "long"), namespace="event")
        return json.dumps(record(
            "Envelope", field("id", "string"), field("before", ["null", value], default=None),
            field("after", ["null", "Value"], default=None), field("source", source),
            field("transaction", ["null", block], default=None), field("op", "string"),
            field("ts_ms", ["null", "long"], default=None), namespace="shop.public.orders",
            **{"connect.name": "shop.public.orders.Envelope"}))

    columns = 1
    while len(envelope(columns + 1)) <= LIMIT:
        columns += 1
    return envelope(columns)


def _avro(cls: str, what: str, text: str, says: str = "", layer: str = "operator"
          ) -> SchemaCase:
    return SchemaCase(cls, what, "avro", text, says, layer=layer)


def _ddl(cls: str, what: str, text: str, says: str = "", layer: str = "operator") -> SchemaCase:
    return SchemaCase(cls, what, "json", text, says, layer=layer)


UNKNOWN_COLUMN = "z" * 64


def suggestions() -> SchemaCase:
    """The most columns of 64-character names LIMIT holds, and a query naming none: the
    refusal ranks every column by its distance to the unknown name."""
    ddl = flat_ddl("c{:05d}" + "x" * 58 + " INT")
    return SchemaCase("suggestions", "the most columns of 64-character names, a query naming "
                      "none of them", "json", ddl, "UNRESOLVED_COLUMN", "InvalidTransform",
                      sql=f"SELECT {UNKNOWN_COLUMN} AS id FROM events")


EXPANSION = "named types used again by name"
DEPTH_CLS = "nesting"
RECURSION = "recursive types"
CLASSES = "names of classes"
EXPRESSIONS = "expressions in a schema"
SIZE = "size"
PARSING = "text the parser must read to the end"

BIG_NAME = "n" * 10_000

HOSTILE: list[SchemaCase] = [
    *(_avro(EXPANSION, f"{levels} levels, each record used twice", doubling(levels),
            TOO_LONG_DDL) for levels in (12, 14, 16, 20)),
    _avro(EXPANSION, "a record with a 10,000-character field name, used four times",
          reader(field("a", record("R", field(BIG_NAME, "int"))),
                 *(field(f"b{i}", "R") for i in range(3))), TOO_LONG_DDL),
    _avro(EXPANSION, "200 records each using one 8,000-character record by name",
          reader(field("big", record("Big", field("n" * 8000, "int"))),
                 *(field(f"w{i}", record(f"W{i}", field("x", "Big"))) for i in range(200))),
          TOO_LONG_DDL),
    _avro(EXPANSION, "a union of 400 records using one record", reader(
        field("r", record("R", field("n" * 200, "int"))),
        field("u", ["null", "int", *(record(f"U{i}", field("r", "R")) for i in range(400))])),
        TOO_LONG_DDL),
    _avro(DEPTH_CLS, "arrays 33 levels deep", reader(field("a", arrays(DEPTH))),
          f"nested deeper than {DEPTH} levels"),
    _avro(DEPTH_CLS, '{"type": ...} 500 levels deep',
          reader(field("a", json.loads('{"type": ' * 500 + '"int"' + "}" * 500))),
          f"nested deeper than {DEPTH} levels"),
    _avro(DEPTH_CLS, "JSON arrays 16,000 levels deep", "[" * 16_000 + "]" * 16_000,
          f"nested deeper than {DEPTH} levels"),
    _avro(DEPTH_CLS, "unions 400 levels deep", reader(field("u", json.loads(
        '["null", ' * 400 + '"int"' + "]" * 400))), "a union directly inside a union"),
    _avro(DEPTH_CLS, f"a type nesting {NESTING + 1} levels through records used by name",
          nesting(NESTING + 1), f"nests deeper than {NESTING} levels"),
    _avro(RECURSION, "a record containing itself",
          reader(field("node", record("Node", field("next", ["null", "Node"])))),
          "contains itself"),
    _avro(RECURSION, "two records containing each other", reader(field("a", record(
        "A", field("b", record("B", field("a", ["null", "A"]))))), ), "contains itself"),
    _avro(RECURSION, "a record defined again inside itself", reader(field("a", record(
        "A", field("again", record("A", field("x", "int")))))), "contains itself"),
    _avro(RECURSION, "a named type defined twice, differently", reader(
        field("a", record("A", field("x", "int"))), field("b", record("A", field("y", "int")))),
        "is defined twice, differently"),
    _avro(CLASSES, "java-class on a string",
          reader(field("s", {"type": "string", "java-class": "java.io.File"})), JAVA),
    _avro(CLASSES, "avro.java.string on a string",
          reader(field("s", {"type": "string", "avro.java.string": "String"})), JAVA),
    _avro(CLASSES, "java-key-class on a map", reader(field("m", {
        "type": "map", "values": "int", "java-key-class": "java.net.URL"})), JAVA),
    _avro(CLASSES, "java-element-class on an array", reader(field("a", {
        "type": "array", "items": "int", "java-element-class": "javax.script.ScriptEngine"})),
        JAVA),
    _avro(CLASSES, "java-class on a field", reader(field("s", "string", **{
        "java-class": "java.lang.ProcessBuilder"})), JAVA),
    _avro(CLASSES, "java-class on a record", json.dumps(record(
        "Row", field("id", "string"), **{"java-class": "java.lang.Runtime"})), JAVA),
    _avro(CLASSES, "java-class on the null branch of a union", reader(field("s", [
        {"type": "null", "java-class": "java.lang.Runtime"}, "string"])), JAVA),
    _avro(CLASSES, "a user-defined type's class and pyClass", reader(field("p", {
        "type": "bytes", "class": "org.example.PointUDT", "pyClass": "evil.PointUDT"})), JAVA),
    _avro(SIZE, f"{LIMIT + 1} characters", too_long_avro(), f"more than {LIMIT}", "admission"),
    _ddl(DEPTH_CLS, "ARRAY< 4,000 levels deep", "id STRING, a " + "ARRAY<" * 4000 + "INT"
         + ">" * 4000, f"nests deeper than {NESTING} levels"),
    _ddl(DEPTH_CLS, "STRUCT< 3,000 levels deep", "id STRING, a " + "STRUCT<a:" * 3000
         + "INT" + ">" * 3000, f"nests deeper than {NESTING} levels"),
    _ddl(DEPTH_CLS, f"MAP< {NESTING + 1} levels deep", "id STRING, a " + "MAP<INT, " * 65
         + "INT" + ">" * 65, f"nests deeper than {NESTING} levels"),
    _ddl(EXPRESSIONS, "a DEFAULT expression reaching the JVM",
         "id STRING DEFAULT reflect('java.lang.System', 'getenv', 'PGPASSWORD')",
         "takes no DEFAULT expression"),
    _ddl(EXPRESSIONS, "a GENERATED column reaching the JVM",
         "id STRING GENERATED ALWAYS AS (java_method('java.lang.Runtime', 'getRuntime'))",
         "takes no GENERATED expression"),
    _ddl(CLASSES, "a user-defined type named by its class",
         "id STRING, v org.apache.spark.ml.linalg.VectorUDT", "Syntax error at or near '.'"),
    _ddl(CLASSES, "a user-defined type in Spark's JSON form", json.dumps({
        "type": "struct", "fields": [{"name": "id", "type": {
            "type": "udt", "class": "org.example.PointUDT", "pyClass": "evil.PointUDT",
            "sqlType": "string"}, "nullable": True, "metadata": {}}]}),
         "Syntax error at or near '{'"),
    _ddl(PARSING, "an unterminated back-quoted name", filled("id STRING, `{}", "x"),
         "Syntax error at or near '`'"),
    _ddl(PARSING, "an unterminated COMMENT", filled("id STRING COMMENT '{}", "x"),
         "Syntax error at or near '''"),
    _ddl(PARSING, "32,000 spaces, then something else", filled("id STRING{};", " "),
         "Syntax error at or near ';'"),
    _ddl(PARSING, "10,000 fields, then a trailing comma", filled("id STRING{},", ", a INT"),
         "Syntax error at or near end of input"),
    _ddl(SIZE, f"{2 * LIMIT} characters", "id STRING, " + "a" * (2 * LIMIT - 15) + " INT",
         f"more than the {LIMIT}", "admission"),
    suggestions(),
]

LEGITIMATE: list[SchemaCase] = [
    _ddl(SIZE, f"{LIMIT} characters of columns", flat_ddl()),
    _ddl(PARSING, "the most tokens: one STRUCT of as many fields as fit", wide_struct()),
    _ddl(DEPTH_CLS, f"columns nesting {NESTING} levels, as many as fit", ", ".join(
        ["id STRING", *(f"a{i} " + "STRUCT<b:" * NESTING + "INT" + ">" * NESTING
                        for i in range(50))])[:LIMIT].rsplit(", ", 1)[0]),
    _avro(SIZE, f"{LIMIT} characters of nullable columns", flat_avro()),
    _avro(SIZE, f"a Debezium envelope of {LIMIT} characters", debezium_envelope()),
    _avro(EXPANSION, "9 levels, each record used twice", doubling(9)),
    _avro(EXPANSION, f"named types used again up to a DDL of exactly {LIMIT} characters",
          exact_ddl(LIMIT)),
    _avro(DEPTH_CLS, f"a type nesting {NESTING} levels through records used by name",
          nesting(NESTING)),
]
