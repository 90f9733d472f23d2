"""Kafka records -> the `events` rows the view's transform sees, bad records held back.

The value is JSON read with the view's DDL schema (fields the schema does not
name are ignored).  Kafka's metadata comes along as `_kafka_*` columns so a
transform can key on the record key, order by offset or turn a tombstone into
a delete.

`debezium` values are change events (bare, or wrapped as `{"schema", "payload"}`
by a JSON converter with schemas on); the DDL schema describes the table's
ROW, and the events expose the row as of the change: `after` for c/u/r,
`before` for d, and for a tombstone the record key's fields (Debezium's key
is the row's primary key), so `_debezium_deleted AS _dv_deleted` mirrors the
table.

Every record gets a cause (`_dv_bad_cause`, NULL for a good record) BEFORE the
transform sees it, so a bad record is never summed or counted as nulls: a value
that is not a JSON object, a field whose JSON type does not fit the schema
(from_json's corrupt-record column, probed per field to name it), text holding
a NUL character (PostgreSQL cannot store it), and a Debezium op the job cannot
map (t, m, unknown, missing): dropping one silently would diverge the index
from the log.  The view's bad-record policy decides (`parse_events`): `fail`
stops the query naming topic/partition@offset and the cause; `skip` and
`deadLetter` leave the record out, and the batch writer counts (and
dead-letters) the same records, found again by `bad_records`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, LongType, StringType, StructField, StructType

from dvjob.errors import ConfigError
from dvjob.source.avro_decoding import Decoding, cause, decoded

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

KAFKA_PREFIX = "_kafka_"
KAFKA_COLUMNS = ("_kafka_key", "_kafka_topic", "_kafka_partition", "_kafka_offset",
                 "_kafka_timestamp", "_kafka_tombstone")
DEBEZIUM_PREFIX = "_debezium_"
DEBEZIUM_COLUMNS = ("_debezium_op", "_debezium_ts_ms", "_debezium_deleted")
DEBEZIUM_ROW_OPS = ("c", "u", "r")
DEBEZIUM_DELETE_OP = "d"
RESERVED_PREFIXES = (KAFKA_PREFIX, DEBEZIUM_PREFIX)
BAD_CAUSE = "_dv_bad_cause"
CORRUPT = "_dv_corrupt"
"""from_json's corrupt-record column: set (to the raw text) when a value or a field does not
parse as the schema says; the other fields then hold what did parse."""
_JSON_OPTIONS = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}
FAIL_HINT = ("source.badRecords.policy is fail: fix the record's producer, or set the policy to "
             "skip or deadLetter to go past such records (they are counted in the status)")


def value_schema(ddl: str) -> StructType:
    """The DDL string as a struct; needs an active SparkSession to parse it."""
    try:
        parsed = DataType.fromDDL(ddl)
    except Exception as exc:  # ParseException; its message says where
        first_line = (str(exc).strip().splitlines() or [""])[0]
        raise ConfigError(f"source.schema: cannot parse {ddl!r}: {first_line[:300]}") from None
    if not isinstance(parsed, StructType) or not parsed.fields:
        raise ConfigError(f"source.schema: {ddl!r} must list one or more 'name TYPE' fields")
    clashes = [f.name for f in parsed.fields if f.name.lower().startswith(RESERVED_PREFIXES)]
    if clashes:
        raise ConfigError(f"source.schema: {', '.join(clashes)}: names starting with "
                          f"{' or '.join(map(repr, RESERVED_PREFIXES))} are reserved for "
                          "Kafka and Debezium metadata")
    return parsed


def _kafka_metadata() -> list[Column]:
    return [F.col("key").cast("string").alias("_kafka_key"),
            F.col("topic").alias("_kafka_topic"),
            F.col("partition").alias("_kafka_partition"),
            F.col("offset").alias("_kafka_offset"),
            F.col("timestamp").alias("_kafka_timestamp"),
            F.col("value").isNull().alias("_kafka_tombstone")]


def debezium_change(row: StructType) -> StructType:
    """A change event's fields the job reads."""
    return StructType([StructField("before", row), StructField("after", row),
                       StructField("op", StringType()), StructField("ts_ms", LongType())])


def _wrappable(fields: StructType) -> StructType:
    """`fields` at the top level or under `payload`, as a JSON converter with schemas on
    wraps values and keys."""
    return StructType([*fields.fields, StructField("payload", fields)])


def _unwrapped(parsed: Column, fields: StructType) -> Column:
    """`payload` when the converter wrapped the event (or key) with its schema, else itself."""
    bare = F.struct(*[parsed[f.name].alias(f.name) for f in fields.fields])
    return F.when(parsed["payload"].isNotNull(), parsed["payload"]).otherwise(bare)


def parse_events(raw: DataFrame, schema: StructType, fmt: str = "json",
                 policy: str = "fail", avro: Decoding | None = None) -> DataFrame:
    """The good events of any format; a bad record stops the query (`fail`) or is left out
    (`skip`, `deadLetter`: `bad_records` finds the same records again for the batch writer)."""
    checked = checked_records(raw, schema, fmt, avro)
    cause = F.col(BAD_CAUSE)
    if policy == "fail":
        refused = F.concat(F.lit("refused record "), F.col("_kafka_topic"), F.lit("/"),
                           F.col("_kafka_partition").cast("string"), F.lit("@"),
                           F.col("_kafka_offset").cast("string"), F.lit(": "), cause,
                           F.lit(f"; {FAIL_HINT}"))
        # A filter, not a column: the check must run even when the transform reads no metadata.
        kept = checked.where(F.when(cause.isNull(), F.lit(True))
                             .otherwise(F.raise_error(refused).cast("boolean")))
    elif policy in ("skip", "deadLetter"):
        kept = checked.where(cause.isNull())
    else:
        raise ConfigError(f"source.badRecords.policy: {policy!r} is not fail, skip or deadLetter")
    columns = KAFKA_COLUMNS + (DEBEZIUM_COLUMNS if fmt == "debezium" else ())
    return kept.select("_dv_row.*", *columns)


def bad_records(raw: DataFrame, schema: StructType, fmt: str,
                avro: Decoding | None = None) -> DataFrame:
    """The raw records (all of Kafka's columns) that `parse_events` leaves out, with their cause."""
    checked = checked_records(raw, schema, fmt, avro)
    return checked.where(F.col(BAD_CAUSE).isNotNull()).select(*raw.columns, BAD_CAUSE)


def checked_records(raw: DataFrame, schema: StructType, fmt: str,
                    avro: Decoding | None = None) -> DataFrame:
    """`raw`'s columns plus `_dv_row` (the event's fields), the `_kafka_*` (and for debezium
    `_debezium_*`) columns and `_dv_bad_cause`."""
    if fmt == "debezium":
        return _checked_debezium(raw, schema) if avro is None else _checked_debezium_avro(
            raw, schema, avro)
    if fmt == "avro":
        if avro is None:
            raise ConfigError("source.format avro needs the reader and writer schemas")
        return _checked_avro(raw, schema, avro)
    if fmt != "json":
        raise ConfigError(f"source.format: {fmt!r} is not supported (json, debezium, avro)")
    return _checked_json(raw, schema)


def _with_corrupt(fields: StructType) -> StructType:
    return StructType([*fields.fields, StructField(CORRUPT, StringType())])


def _parsed(column: str, fields: StructType) -> Column:
    return F.from_json(F.col(column).cast("string"), _with_corrupt(fields), _JSON_OPTIONS)


def _not_json_object(column: str) -> Column:
    """True when the text is no JSON object at all (not merely a field of the wrong type)."""
    probe = _parsed(column, StructType([StructField("_dv_probe", StringType())]))
    return probe.isNull() | probe[CORRUPT].isNotNull()


def _mismatched_field(column: str, fields: StructType) -> Column:
    """Which field's JSON value does not fit the schema: each parsed alone (evaluated only for
    a corrupt record: `when` branches are lazy)."""
    probes = [F.when(_parsed(column, StructType([f]))[CORRUPT].isNotNull(),
                     F.lit(f"field '{f.name}' does not match source.schema type "
                           f"{f.dataType.simpleString().upper()}"))
              for f in fields.fields]
    return F.coalesce(*probes, F.lit("a field does not match source.schema"))


def _leaf_types(data_type: DataType) -> list[DataType]:
    if isinstance(data_type, StructType):
        return [leaf for f in data_type.fields for leaf in _leaf_types(f.dataType)]
    inner = [getattr(data_type, name) for name in ("elementType", "keyType", "valueType")
             if hasattr(data_type, name)]
    return [leaf for t in inner for leaf in _leaf_types(t)] if inner else [data_type]


def _contains_nul(value: Column, data_type: DataType) -> Column | None:
    """Whether a value holds U+0000 anywhere (None: its type holds no text)."""
    if isinstance(data_type, StringType):
        return F.instr(value, "\x00") > 0
    if any(isinstance(t, StringType) for t in _leaf_types(data_type)):
        return F.instr(F.to_json(value), "\\u0000") > 0
    return None


def _nul_cause(row: Column, fields: StructType) -> Column:
    causes = [F.when(check, F.lit(f"field '{f.name}' contains a NUL character (U+0000), which "
                                  "PostgreSQL text cannot hold"))
              for f in fields.fields
              if (check := _contains_nul(row[f.name], f.dataType)) is not None]
    return F.coalesce(*causes) if causes else F.lit(None).cast("string")


def _once(parsed: Column) -> Column:
    """`parsed`, computed once per record.

    Spark pushes a filter below a projection of deterministic expressions by
    inlining them, so the bad-record filter of `parse_events` would run
    from_json again for each reference, and the projection once more (1M
    orders parsed and aggregated on 2 cores: 8.9 s with the inlining, 4.3 s
    without).  A non-deterministic guard
    (the partition id, which is never negative) keeps the projection, and the
    parse, where it is.
    """
    return F.when(F.spark_partition_id() >= 0, parsed)


def _checked_json(raw: DataFrame, schema: StructType) -> DataFrame:
    staged = raw.select("*", _once(_parsed("value", schema)).alias("_dv_parsed"),
                        *_kafka_metadata())
    parsed = F.col("_dv_parsed")
    cause = (F.when(F.col("_kafka_tombstone"), F.lit(None).cast("string"))
             .when(parsed.isNull() | (parsed[CORRUPT].isNotNull() & _not_json_object("value")),
                   F.lit("value is not a JSON object"))
             .when(parsed[CORRUPT].isNotNull(), _mismatched_field("value", schema))
             .otherwise(_nul_cause(parsed, schema)))
    row = F.struct(*[parsed[f.name].alias(f.name) for f in schema.fields])
    return staged.select(*raw.columns, row.alias("_dv_row"), *KAFKA_COLUMNS,
                         cause.alias(BAD_CAUSE))


def _checked_debezium(raw: DataFrame, row: StructType) -> DataFrame:
    staged = raw.select("*",
                        _once(_parsed("value", _wrappable(debezium_change(row)))).alias("_dv_change"),
                        _once(_parsed("key", _wrappable(row))).alias("_dv_key"), *_kafka_metadata())
    raw_change, raw_key = F.col("_dv_change"), F.col("_dv_key")
    change = _unwrapped(raw_change, debezium_change(row))
    op = change["op"]
    tombstone = F.col("_kafka_tombstone")
    image = (F.when(tombstone, _unwrapped(raw_key, row))
             .when(op == DEBEZIUM_DELETE_OP, change["before"])
             .otherwise(change["after"]))
    mappable = op.isin(*DEBEZIUM_ROW_OPS, DEBEZIUM_DELETE_OP)
    cause = (
        F.when(tombstone & (raw_key.isNull() | raw_key[CORRUPT].isNotNull()),
               F.lit("tombstone whose key is not a JSON object (a Debezium key names the "
                     "deleted row)"))
        .when(tombstone, F.lit(None).cast("string"))
        .when(raw_change.isNull() | (raw_change[CORRUPT].isNotNull() & _not_json_object("value")),
              F.lit("value is not a JSON object"))
        .when(raw_change[CORRUPT].isNotNull(),
              F.lit("value does not match source.schema: a field of the change event's "
                    "before/after (or op, ts_ms) has another type"))
        .when(op.isNull(), F.lit("not a Debezium change event (no 'op'; is source.format "
                                 "right?)"))
        .when(~mappable, F.concat(F.lit("Debezium op '"), op, F.lit(
            "' cannot be mapped to upserts and deletes (c, u, r and d can)")))
        .otherwise(_nul_cause(image, row)))
    return staged.select(
        *raw.columns, image.alias("_dv_row"), *KAFKA_COLUMNS,
        F.when(tombstone, F.lit(None).cast("string")).otherwise(op).alias("_debezium_op"),
        change["ts_ms"].alias("_debezium_ts_ms"),
        (tombstone | (op == DEBEZIUM_DELETE_OP)).alias("_debezium_deleted"),
        cause.alias(BAD_CAUSE))


def _checked_avro(raw: DataFrame, schema: StructType, decoding: Decoding) -> DataFrame:
    staged = raw.select("*", _once(decoded(F.col("value"), decoding)).alias("_dv_decoded"),
                        *_kafka_metadata())
    row = F.col("_dv_decoded")
    why = cause(F.col("value"), row, decoding)
    good_row = F.when(F.col("value").isNull(), F.lit(None)).otherwise(row)
    fields = F.struct(*[good_row[f.name].alias(f.name) for f in schema.fields])
    return staged.select(*raw.columns, fields.alias("_dv_row"), *KAFKA_COLUMNS,
                         F.coalesce(why, _nul_cause(row, schema)).alias(BAD_CAUSE))


def _checked_debezium_avro(raw: DataFrame, row: StructType, decoding: Decoding) -> DataFrame:
    """Debezium's change events through its Avro converter: as `_checked_debezium`, with the
    envelope and (for a tombstone) the key decoded by their writers' schemas."""
    if decoding.key is None:
        raise ConfigError("format debezium in Avro needs the record keys' decoding")
    staged = raw.select("*", _once(decoded(F.col("value"), decoding)).alias("_dv_change"),
                        _once(decoded(F.col("key"), decoding.key)).alias("_dv_key"),
                        *_kafka_metadata())
    change, key = F.col("_dv_change"), F.col("_dv_key")
    op, tombstone = change["op"], F.col("_kafka_tombstone")
    deleted = op == DEBEZIUM_DELETE_OP
    image = F.struct(*[F.when(tombstone, key[f.name]).when(deleted, change["before"][f.name])
                       .otherwise(change["after"][f.name]).alias(f.name) for f in row.fields])
    key_cause = F.when(F.col("key").isNull(), F.lit(
        "tombstone without a key (a Debezium key names the deleted row)")).otherwise(
        cause(F.col("key"), key, decoding.key))
    why = (F.when(tombstone, key_cause)
           .otherwise(F.coalesce(
               cause(F.col("value"), change, decoding),
               F.when(~op.isin(*DEBEZIUM_ROW_OPS, DEBEZIUM_DELETE_OP), F.concat(
                   F.lit("Debezium op '"), op, F.lit(
                       "' cannot be mapped to upserts and deletes (c, u, r and d can)"))),
               _nul_cause(image, row))))
    return staged.select(
        *raw.columns, image.alias("_dv_row"), *KAFKA_COLUMNS,
        F.when(tombstone, F.lit(None).cast("string")).otherwise(op).alias("_debezium_op"),
        F.when(tombstone, F.lit(None).cast("long")).otherwise(change["ts_ms"])
        .alias("_debezium_ts_ms"),
        (tombstone | deleted).alias("_debezium_deleted"),
        why.alias(BAD_CAUSE))
