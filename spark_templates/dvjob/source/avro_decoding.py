"""Avro values in the Confluent wire format -> the view's reader shape, bad records held back.

A value is a magic byte 0, the writer's schema id (4 bytes, big-endian) and the Avro
binary. Each record is decoded with its own writer's schema and resolved to the view's
reader schema by Avro's resolution rules (Spark's `from_avro` with the writer's schema
and the `avroSchema` option, which is Avro's own resolving reader), so a topic whose
producers moved through several compatible schemas replays into one shape.

The plan is built from the writers known at its start: one `from_avro` per schema id.
A record whose id the plan does not know stops the query with `UNKNOWN_ID_MARK`; the
driver (`Decoding.learn`) asks the registry, and restarts the query from its checkpoint
with the id decoded (a new producer version) or, when the registry has no such id,
counted as bad. So no record is ever judged bad only because its writer registered a
schema after the job started.

Bad records, each with a cause naming the schema id (and, when resolution fails, the
field): a value not in the wire format, an id the registry does not have, a writer's
schema that cannot be resolved to the reader's (decided once per id by Avro's
`SchemaCompatibility`), bytes that do not decode. A tombstone (null value) is a good
record with a null row, as for JSON.

Debezium's Avro converter writes the change envelope (`before`/`after` of the table's
`Value` record, `op`, `ts_ms`, more the job ignores) as the value and the row's primary key
(`Key`) as the key, each under its own subject. The view's reader schema is the row's:
`debezium_readers` wraps it into the envelope's reader and a key reader whose fields are
all optional (a key holds only the key's columns), so a tombstone still names its row.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from py4j.protocol import Py4JJavaError  # type: ignore[import-untyped]
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import from_avro
from pyspark.sql.types import StructType

from dvjob.errors import ConfigError
from dvjob.source.schema_registry import Registry, SchemaNotFound

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MAGIC = b"\x00"
HEADER_BYTES = 5
UNKNOWN_ID_MARK = "dvjob: schema id not known to this query: "
_UNKNOWN_ID = re.compile(re.escape(UNKNOWN_ID_MARK) + r"(?:(key|value) )?(\d+)")
WIRE_FORMAT = ("Avro in the Confluent wire format (a magic byte 0, a 4-byte schema id, the "
               "Avro binary)")


@dataclass(frozen=True)
class Decoding:
    """What the plan decodes: the reader schema and every writer schema id seen so far."""

    reader: str
    writers: Mapping[int, str] = field(default_factory=dict)
    """Ids whose writer's schema resolves to the reader's: decoded."""
    unresolvable: Mapping[int, str] = field(default_factory=dict)
    """Ids whose writer's schema does not: their records are bad, with this cause."""
    missing: frozenset[int] = frozenset()
    """Ids the registry does not have: their records are bad."""
    role: str = "value"
    """Which part of a record it decodes, `value` or `key` (its subject is `<topic>-<role>`)."""
    key: Decoding | None = None
    """Debezium's Avro converter: the record keys' decoding, read for tombstones."""

    def known(self) -> frozenset[int]:
        return frozenset(self.writers) | frozenset(self.unresolvable) | self.missing

    def learn(self, ids: set[int], registry: Registry,
              resolve: Callable[[str, str], str | None]) -> Decoding:
        """This decoding with `ids` fetched: decodable, unresolvable (cause from `resolve`)
        or missing."""
        fetched: dict[int, str] = {}
        missing = set(self.missing)
        for schema_id in sorted(ids - self.known()):
            try:
                fetched[schema_id] = registry.schema(schema_id)
            except SchemaNotFound:
                missing.add(schema_id)
        return with_writers(replace(self, missing=frozenset(missing)), fetched, resolve)


def unknown_ids(error: BaseException) -> set[tuple[str, int]]:
    """The (role, id) pairs a failed query stopped at (`UNKNOWN_ID_MARK` in its error)."""
    return {(role or "value", int(i)) for role, i in _UNKNOWN_ID.findall(str(error))}


def debezium_readers(row_reader: str) -> tuple[str, str]:
    """The reader schemas of Debezium's Avro envelope and key around the row's.

    Named as Debezium names them (`Envelope`, `Value`, `Key`: Avro matches records by
    unqualified name). The envelope reads only what the job uses; the writer's other fields
    (`source`, `transaction`, ...) are skipped by Avro's resolution. Every key field is
    optional: the key holds the primary key's columns alone."""
    row = json.loads(row_reader)
    value = {**{k: v for k, v in row.items() if k not in ("name", "namespace", "aliases")},
             "name": "Value"}
    envelope = {"type": "record", "name": "Envelope", "fields": [
        {"name": "before", "type": ["null", value], "default": None},
        {"name": "after", "type": ["null", "Value"], "default": None},
        {"name": "op", "type": "string"},
        {"name": "ts_ms", "type": ["null", "long"], "default": None}]}
    key = {"type": "record", "name": "Key", "fields": [
        {"name": f["name"], "type": _optional(f["type"]), "default": None}
        for f in value.get("fields", [])]}
    return json.dumps(envelope), json.dumps(key)


def _optional(avro_type: Any) -> list[Any]:
    """`avro_type` as a union whose first branch is null (a null default needs that)."""
    branches = avro_type if isinstance(avro_type, list) else [avro_type]
    return ["null", *[b for b in branches if b != "null"]]


def resolution_cause(spark: SparkSession) -> Callable[[str, str], str | None]:
    """Avro's own verdict (`SchemaCompatibility`, the library Spark decodes with) on whether
    data written with a writer's schema can be read with the reader's: None, or the first
    incompatibility named by the reader's field."""
    jvm: Any = spark.sparkContext._jvm

    def check(reader: str, writer: str) -> str | None:
        parser = jvm.org.apache.avro.Schema.Parser
        try:  # the registry's answer, not checked by anyone before (the reader was)
            written = parser().parse(writer)
        except Py4JJavaError as exc:
            said = str(exc.java_exception.getMessage() or "").splitlines()[:1]
            return f"not a schema Avro can parse ({(said or ['no reason'])[0][:200]})"
        result = jvm.org.apache.avro.SchemaCompatibility.checkReaderWriterCompatibility(
            parser().parse(reader), written)
        if result.getType().toString() == "COMPATIBLE":
            return None
        problems = list(result.getResult().getIncompatibilities())
        if not problems:
            return str(result.getDescription()).splitlines()[0]
        first = problems[0]
        where = field_at(json.loads(reader), str(first.getLocation()))
        return f"field '{where}': {first.getMessage()}" if where else str(first.getMessage())
    return check


def field_at(schema: Any, pointer: str) -> str:
    """The dotted field path a JSON pointer into a schema (`/fields/1/type/fields/0`) names."""
    names: list[str] = []
    node = schema
    for part in [p for p in pointer.split("/") if p]:
        if isinstance(node, list):
            node = node[int(part)] if part.isdigit() and int(part) < len(node) else None
        elif isinstance(node, dict):
            node = node.get(part)
        else:
            break
        if isinstance(node, dict) and "name" in node and "type" in node and part.isdigit():
            names.append(str(node["name"]))
    return ".".join(names)


def initial(reader: str, topics: list[str], registry: Registry,
            resolve: Callable[[str, str], str | None], role: str = "value") -> Decoding:
    """The writers registered under each topic's `role` subject, known before the replay."""
    writers: dict[int, str] = {}
    for topic in topics:
        writers.update(registry.subject_schemas(f"{topic}-{role}"))
    decoding = Decoding(reader=reader, role=role)
    return with_writers(decoding, writers, resolve)


def with_writers(decoding: Decoding, writers: Mapping[int, str],
                 resolve: Callable[[str, str], str | None]) -> Decoding:
    """`decoding` with `writers` sorted by `resolve`: decoded, or unresolvable with a cause."""
    ok, bad = dict(decoding.writers), dict(decoding.unresolvable)
    for schema_id, writer in writers.items():
        cause = resolve(decoding.reader, writer)
        if cause is None:
            ok[schema_id] = writer
        else:
            what = "writer" if decoding.role == "value" else f"{decoding.role} writer"
            bad[schema_id] = (f"{what} schema id {schema_id} cannot be resolved to the reader "
                              f"schema: {cause}")
    return replace(decoding, writers=ok, unresolvable=bad)


def check_reader_type(spark: SparkSession, decoding: Decoding, schema: StructType) -> None:
    """`from_avro`'s type for the reader schema (Debezium's: its row) must be the DDL the
    operator derived from it (nullability aside): the transform was checked against that DDL."""
    frame = spark.range(0).select(
        from_avro(F.lit(b"").cast("binary"), decoding.reader).alias("r"))
    got = frame.schema["r"].dataType
    if decoding.key is not None and isinstance(got, StructType):
        got = got["after"].dataType
    if _shape(got) != _shape(schema):
        raise ConfigError(f"source.schema {schema.simpleString()} is not the reader schema's "
                          f"type {got.simpleString()}: the operator derives one from the other")


def _shape(data_type: Any) -> Any:
    """A type with nullability left out."""
    return json.loads(json.dumps(data_type.jsonValue()).replace('"nullable": false',
                                                                '"nullable": true')
                      .replace('"containsNull": false', '"containsNull": true')
                      .replace('"valueContainsNull": false', '"valueContainsNull": true'))


def schema_id_of(value: Column) -> Column:
    return F.conv(F.hex(F.substring(value, 2, 4)), 16, 10).cast("long")


def decoded(value: Column, decoding: Decoding) -> Column:
    """The record resolved to the reader's shape; null when its id is not decodable, a row of
    nulls when its bytes do not decode (`from_avro`'s PERMISSIVE mode, see `cause`)."""
    sid = schema_id_of(value)
    payload = F.substring(value, HEADER_BYTES + 1, 2**31 - 1)
    options = {"mode": "PERMISSIVE", "avroSchema": decoding.reader}
    column: Column | None = None
    for schema_id, writer in sorted(decoding.writers.items()):
        branch = from_avro(payload, writer, options)
        column = (F.when(sid == schema_id, branch) if column is None
                  else column.when(sid == schema_id, branch))
    empty = from_avro(F.lit(None).cast("binary"), decoding.reader, options)
    return empty if column is None else column.otherwise(empty)


def cause(value: Column, row: Column, decoding: Decoding) -> Column:
    """Why a record's value (or key: `decoding.role`) is bad (NULL: good). An id the plan
    does not know stops the query."""
    role = decoding.role
    sid = schema_id_of(value)
    wire = (F.length(value) >= HEADER_BYTES) & (F.substring(value, 1, 1) == F.lit(MAGIC))
    chain = F.when(value.isNull(), F.lit(None).cast("string")).when(
        ~wire, F.lit(f"{role} is not {WIRE_FORMAT}"))
    if decoding.missing:
        chain = chain.when(sid.isin(*sorted(decoding.missing)), F.concat(
            F.lit(f"{role} schema id "), sid.cast("string"),
            F.lit(" is not in the schema registry")))
    for schema_id, why in sorted(decoding.unresolvable.items()):
        chain = chain.when(sid == schema_id, F.lit(why))
    known = sorted(decoding.writers)
    unknown = ~sid.isin(*known) if known else F.lit(True)
    stop = F.raise_error(F.concat(F.lit(f"{UNKNOWN_ID_MARK}{role} "), sid.cast("string")))
    undecoded = row.isNull()
    reader_fields = _field_names(decoding.reader)
    for schema_id, writer in sorted(decoding.writers.items()):
        witness = next((n for n in _required_fields(writer) if n in reader_fields), None)
        if witness is not None:
            undecoded = undecoded | ((sid == schema_id) & row[witness].isNull())
    return (chain.when(unknown, stop.cast("string"))
            .when(undecoded, F.concat(F.lit(f"{role} does not decode with writer schema id "),
                                      sid.cast("string"), F.lit(
                                          " (truncated or not written with that schema)")))
            .otherwise(F.lit(None).cast("string")))


def _field_names(schema_json: str) -> set[str]:
    schema = json.loads(schema_json)
    return {str(f.get("name")) for f in schema.get("fields", []) if isinstance(f, dict)}


def _required_fields(schema_json: str) -> list[str]:
    """The writer's top-level fields that can never be null (no null branch): `from_avro`'s
    PERMISSIVE mode turns bytes that do not decode into a row of nulls, so a null in one of
    them is how such a record is told from a good one. (A writer without any: an all-null
    row passes as decoded, and a NULL primary key still stops or counts it.)"""
    schema = json.loads(schema_json)
    required = []
    for f in schema.get("fields", []):
        kind = f.get("type") if isinstance(f, dict) else None
        nullable = kind == "null" or (isinstance(kind, list) and "null" in kind) or (
            isinstance(kind, list) and any(isinstance(b, dict) and b.get("type") == "null"
                                           for b in kind))
        if kind is not None and not nullable:
            required.append(str(f["name"]))
    return required
