"""From the transform's output schema to the index table's columns.

Checked once at start, so a view that cannot be indexed (a missing key column,
an unmappable type) fails before reading a single record.  The same layout
drives the per-batch projection that makes rows safe to COPY: timestamps
travel as ISO text with an explicit UTC offset (Python datetimes from Spark
are naive local times and would shift with the driver's time zone) and nested
values as JSON text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
    VariantType,
)

from dvjob.config import check_pg_identifier
from dvjob.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

DELETED_COLUMN = "_dv_deleted"
RESERVED_PREFIX = "_dv_"
# date_format pattern PostgreSQL parses as timestamptz whatever its TimeZone setting.
TIMESTAMP_TEXT_FORMAT = "yyyy-MM-dd HH:mm:ss.SSSSSSxxx"

Transport = Literal["plain", "timestamp_text", "json_text"]


@dataclass(frozen=True)
class SinkColumn:
    """One index column: its name, PostgreSQL type and how its values travel."""

    name: str
    pg_type: str
    transport: Transport = "plain"


@dataclass(frozen=True)
class TableLayout:
    """The index table's columns (output order) and key; the delete flag is not a column."""

    columns: tuple[SinkColumn, ...]
    primary_key: tuple[str, ...]
    has_delete_flag: bool

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @property
    def key_positions(self) -> tuple[int, ...]:
        names = self.column_names
        return tuple(names.index(k) for k in self.primary_key)


class UnsupportedTypeError(ConfigError):
    """A Spark type with no PostgreSQL column type here."""


def pg_column_type(data_type: DataType) -> tuple[str, Transport]:
    """The PostgreSQL type for a Spark type, and how values are sent."""
    simple: list[tuple[type[DataType], str]] = [
        (StringType, "text"), (LongType, "bigint"), (IntegerType, "integer"),
        (ShortType, "smallint"), (ByteType, "smallint"), (DoubleType, "double precision"),
        (FloatType, "real"), (BooleanType, "boolean"), (DateType, "date"),
        (TimestampNTZType, "timestamp"), (BinaryType, "bytea"),
    ]
    if isinstance(data_type, TimestampType):
        return "timestamptz", "timestamp_text"
    if isinstance(data_type, DecimalType):
        return f"numeric({data_type.precision},{data_type.scale})", "plain"
    for spark_type, pg_type in simple:
        if isinstance(data_type, spark_type):
            return pg_type, "plain"
    if isinstance(data_type, ArrayType | MapType | StructType | VariantType):
        return "jsonb", "json_text"
    if isinstance(data_type, NullType):
        raise UnsupportedTypeError("has no type (a bare NULL?): CAST it to the intended type")
    raise UnsupportedTypeError(f"has type {data_type.simpleString()}, which has no "
                               "PostgreSQL mapping here: CAST it (e.g. to STRING or BIGINT)")


def table_layout(schema: StructType, primary_key: Sequence[str]) -> TableLayout:
    """Validate the transform's output schema and derive the index table from it."""
    names = [f.name for f in schema.fields]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ConfigError(f"transform output: column names repeat: {', '.join(duplicates)}; "
                          "give each column a distinct alias")
    columns: list[SinkColumn] = []
    has_delete_flag = False
    for field in schema.fields:
        if field.name == DELETED_COLUMN:
            if not isinstance(field.dataType, BooleanType):
                raise ConfigError(f"transform output: {DELETED_COLUMN} must be BOOLEAN, "
                                  f"not {field.dataType.simpleString()}")
            has_delete_flag = True
            continue
        if field.name.startswith(RESERVED_PREFIX):
            raise ConfigError(f"transform output: column {field.name!r}: names starting with "
                              f"{RESERVED_PREFIX!r} are reserved (only {DELETED_COLUMN} is known)")
        try:
            check_pg_identifier(field.name)
        except ValueError as exc:
            raise ConfigError(f"transform output: column name {exc}") from None
        try:
            pg_type, transport = pg_column_type(field.dataType)
        except UnsupportedTypeError as exc:
            raise UnsupportedTypeError(f"transform output: column {field.name!r} {exc}") from None
        columns.append(SinkColumn(field.name, pg_type, transport))
    available = [c.name for c in columns]
    missing = [k for k in primary_key if k not in available]
    if missing:
        raise ConfigError(f"sink.primaryKey: {', '.join(missing)} not in the transform's output "
                          f"columns ({', '.join(available) or 'none'}); names are case-sensitive")
    return TableLayout(tuple(columns), tuple(primary_key), has_delete_flag)


def column_named(name: str) -> Column:
    """A top-level column by exact name (dots and backticks are not syntax here)."""
    return F.col("`" + name.replace("`", "``") + "`")


def sink_projection(output: DataFrame, layout: TableLayout) -> DataFrame:
    """The layout's columns in order, COPY-ready, then the delete flag (null means upsert)."""
    selected: list[Column] = []
    for column in layout.columns:
        value = column_named(column.name)
        if column.transport == "timestamp_text":
            value = F.date_format(value, TIMESTAMP_TEXT_FORMAT)
        elif column.transport == "json_text":
            value = F.to_json(value)
        selected.append(value.alias(column.name))
    deleted = (F.coalesce(column_named(DELETED_COLUMN), F.lit(False)) if layout.has_delete_flag
               else F.lit(False))
    selected.append(deleted.alias(DELETED_COLUMN))
    return output.select(*selected)
