"""A view's Avro reader schema: checked, and turned into the Spark DDL of its events.

The reader schema is the shape every record of the topics is resolved to, whichever
writer's schema it was written with (Avro's schema resolution). The rest of the product
speaks Spark DDL (`source.schema`: the transform's analysis, the job's `events` view),
so the reader schema is translated here the way Spark's own Avro reader translates it
(`org.apache.spark.sql.avro.SchemaConverters.toSqlType` in Spark 4.0, default options):
the job then checks that `from_avro` produced exactly that type.

Pure: the operator checks a spec within its first pass, before any job starts; the job's
`from_avro` and Avro's own resolution have the last word on records.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from derived_views.core.spark_ddl import RESERVED_PREFIXES

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
PRIMITIVES = {"null": "VOID", "boolean": "BOOLEAN", "int": "INT", "long": "BIGINT",
              "float": "FLOAT", "double": "DOUBLE", "bytes": "BINARY", "string": "STRING"}
"""Spark's type of each Avro primitive (`null` alone has no column type a view can use)."""
MAX_DEPTH = 32
"""Nesting deeper than this is refused rather than recursed into."""


class AvroSchemaError(ValueError):
    """The reader schema is not one a view can read with; the message names where."""


def spark_ddl(schema_json: str) -> str:
    """The DDL of the events' value columns for a reader schema (a JSON text)."""
    try:
        schema = json.loads(schema_json)
    except ValueError as exc:
        raise AvroSchemaError(f"not JSON: {exc}") from None
    except RecursionError:  # `[[[[...` within the size limit: Python's parser recurses
        raise AvroSchemaError(f"nested deeper than {MAX_DEPTH} levels") from None
    named: dict[str, Any] = {}
    if not isinstance(schema, Mapping) or schema.get("type") != "record":
        raise AvroSchemaError("the reader schema must be an Avro record (a JSON object with "
                              '"type": "record"): its fields become the events\' columns')
    fields = _fields(schema, named, "", 0, active=())
    if not fields:
        raise AvroSchemaError("the record has no fields")
    clashes = [name for name, _ in fields if name.lower().startswith(RESERVED_PREFIXES)]
    if clashes:
        raise AvroSchemaError(f"{', '.join(clashes)}: names starting with "
                              f"{' or '.join(map(repr, RESERVED_PREFIXES))} are reserved for "
                              "Kafka and Debezium metadata")
    return ", ".join(f"{_quoted(name)} {ddl}" for name, ddl in fields)


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _full_name(schema: Mapping[str, Any], where: str, namespace: str) -> str:
    name = schema.get("name")
    if not isinstance(name, str) or not all(NAME.match(p) for p in name.split(".")):
        raise AvroSchemaError(f"{where or 'the record'}: a {schema.get('type')} needs a "
                              f"\"name\" of letters, digits and _ (got {name!r})")
    space = schema.get("namespace", namespace)
    return name if "." in name or not space else f"{space}.{name}"


def _fields(record: Mapping[str, Any], named: dict[str, Any], where: str, depth: int,
            active: tuple[str, ...]) -> list[tuple[str, str]]:
    full = _full_name(record, where, "")
    named[full] = record
    raw = record.get("fields")
    if not isinstance(raw, Sequence) or isinstance(raw, str):
        raise AvroSchemaError(f"{where or 'the record'}: \"fields\" must be a list")
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for index, field in enumerate(raw):
        if not isinstance(field, Mapping):
            raise AvroSchemaError(f"{where}/fields/{index}: not an object")
        name = field.get("name")
        if not isinstance(name, str) or not NAME.match(name):
            raise AvroSchemaError(f"{where}/fields/{index}: \"name\" must be letters, digits "
                                  f"and _, not starting with a digit (got {name!r})")
        if name.lower() in seen:
            raise AvroSchemaError(f"{where}/fields/{index}: field {name!r} twice (Spark column "
                                  "names are case-insensitive)")
        seen.add(name.lower())
        if "type" not in field:
            raise AvroSchemaError(f"{where}/fields/{index} ({name}): no \"type\"")
        path = f"{where}.{name}" if where else name
        out.append((name, _ddl(field["type"], named, path, depth + 1, (*active, full))))
    return out


def _ddl(schema: Any, named: dict[str, Any], where: str, depth: int,
         active: tuple[str, ...]) -> str:
    if depth > MAX_DEPTH:
        raise AvroSchemaError(f"field {where}: nested deeper than {MAX_DEPTH} levels")
    if isinstance(schema, str):
        if schema in PRIMITIVES:
            return _primitive(schema, where)
        known = named.get(schema) or next(
            (s for n, s in named.items() if n.rsplit(".", 1)[-1] == schema), None)
        if known is None:
            raise AvroSchemaError(f"field {where}: unknown type {schema!r} (a named type must "
                                  "be defined before it is used)")
        if known.get("type") == "record" and _full_name(known, where, "") in active:
            raise AvroSchemaError(f"field {where}: the record {schema!r} contains itself; a "
                                  "recursive schema has no Spark column type")
        return _ddl(known, named, where, depth, active)
    if isinstance(schema, Sequence):
        return _union(schema, named, where, depth, active)
    if not isinstance(schema, Mapping):
        raise AvroSchemaError(f"field {where}: {schema!r} is not an Avro schema")
    kind = schema.get("type")
    logical = schema.get("logicalType")
    if kind in PRIMITIVES:
        return _logical(kind, logical, schema, where) or _primitive(kind, where)
    if kind == "record":
        inner = _fields(schema, named, where, depth, active)
        return "STRUCT<" + ", ".join(f"{_quoted(n)}: {d}" for n, d in inner) + ">"
    if kind == "enum":
        named[_full_name(schema, where, "")] = schema
        if not isinstance(schema.get("symbols"), Sequence):
            raise AvroSchemaError(f"field {where}: an enum needs \"symbols\"")
        return "STRING"
    if kind == "fixed":
        named[_full_name(schema, where, "")] = schema
        if not isinstance(schema.get("size"), int):
            raise AvroSchemaError(f"field {where}: a fixed needs an integer \"size\"")
        return _logical("fixed", logical, schema, where) or "BINARY"
    if kind == "array":
        if "items" not in schema:
            raise AvroSchemaError(f"field {where}: an array needs \"items\"")
        return f"ARRAY<{_ddl(schema['items'], named, where + '[]', depth + 1, active)}>"
    if kind == "map":
        if "values" not in schema:
            raise AvroSchemaError(f"field {where}: a map needs \"values\"")
        values = _ddl(schema["values"], named, where + "{}", depth + 1, active)
        return f"MAP<STRING, {values}>"
    if isinstance(kind, (str, Sequence, Mapping)) and kind not in (None, ""):
        return _ddl(kind, named, where, depth + 1, active)  # {"type": {"type": ...}}
    raise AvroSchemaError(f"field {where}: unknown Avro type {kind!r}")


def _primitive(kind: str, where: str) -> str:
    if kind == "null":
        raise AvroSchemaError(f"field {where}: a field of type null alone holds nothing; use "
                              'a union such as ["null", "string"]')
    return PRIMITIVES[kind]


def _logical(kind: str, logical: Any, schema: Mapping[str, Any], where: str) -> str | None:
    """Spark's type for the logical types it maps (others read as their underlying type)."""
    if logical == "date" and kind == "int":
        return "DATE"
    if logical in ("timestamp-millis", "timestamp-micros") and kind == "long":
        return "TIMESTAMP"
    if logical in ("local-timestamp-millis", "local-timestamp-micros") and kind == "long":
        return "TIMESTAMP_NTZ"
    if logical == "decimal" and kind in ("bytes", "fixed"):
        precision, scale = schema.get("precision"), schema.get("scale", 0)
        if not isinstance(precision, int) or not isinstance(scale, int) or not (
                0 < precision <= 38 and 0 <= scale <= precision):
            raise AvroSchemaError(f"field {where}: decimal needs 0 < precision <= 38 and "
                                  f"0 <= scale <= precision (got {precision!r}, {scale!r})")
        return f"DECIMAL({precision},{scale})"
    return None


def _union(branches: Sequence[Any], named: dict[str, Any], where: str, depth: int,
           active: tuple[str, ...]) -> str:
    if not branches:
        raise AvroSchemaError(f"field {where}: an empty union")
    rest = [b for b in branches if b != "null" and not (
        isinstance(b, Mapping) and b.get("type") == "null")]
    if not rest:
        raise AvroSchemaError(f"field {where}: a union of null alone holds nothing")
    if len(rest) == 1:
        return _ddl(rest[0], named, where, depth, active)
    types = [_ddl(b, named, where, depth, active) for b in rest]
    if set(types) <= {"INT", "BIGINT"}:
        return "BIGINT"
    if set(types) <= {"FLOAT", "DOUBLE"}:
        return "DOUBLE"
    # Spark's Avro reader: one nullable struct field per branch, named by position.
    return "STRUCT<" + ", ".join(f"member{n}: {t}" for n, t in enumerate(types)) + ">"
