"""A large batch's rows as lines of PostgreSQL's COPY text format, built by Spark.

Why: a staging task that receives typed rows spends most of its time in Python
turning each value into COPY text (psycopg's write_row); Spark builds the same
text in the JVM, in generated code, and the task then only writes strings.  The
values are the sink projection's (dvjob.sinks.schema: timestamps already as ISO
text with an offset, nested values as JSON text), so each type's text here is
what PostgreSQL's input function for the column's type reads back as the same
value: integers and decimals as digits, doubles as Java's round-trip decimal
form (NaN and Infinity included), booleans as t/f, dates and zone-less
timestamps as ISO text, binary as bytea's hex form; NULL is \\N, and text has
backslash, tab, newline and carriage return escaped.  The line holds the
layout's columns then the delete flag; the task appends the ordinal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, BooleanType, DataType, StringType

from dvjob.sinks.schema import DELETED_COLUMN, column_named

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

LINE_COLUMN = "_dv_line"
_ESCAPES = (("\\", "\\\\"), ("\t", "\\t"), ("\n", "\\n"), ("\r", "\\r"))


def _escaped(value: Column) -> Column:
    for search, replacement in _ESCAPES:  # the backslash first
        value = F.replace(value, F.lit(search), F.lit(replacement))
    return value


def field_text(value: Column, data_type: DataType) -> Column:
    """One value as COPY text (NULL as \\N)."""
    text: Column
    if isinstance(data_type, StringType):
        text = _escaped(value)
    elif isinstance(data_type, BinaryType):
        text = F.concat(F.lit("\\\\x"), F.lower(F.hex(value)))  # the text \x..., escaped
    elif isinstance(data_type, BooleanType):
        text = F.when(value, F.lit("t")).when(~value, F.lit("f"))  # NULL stays NULL
    else:
        text = value.cast("string")
    return F.coalesce(text, F.lit("\\N"))


def copy_text_lines(projected: DataFrame) -> DataFrame:
    """One column of COPY text lines (no ordinal, no newline) from the sink projection."""
    texts = [field_text(column_named(field.name), field.dataType)
             for field in projected.schema.fields if field.name != DELETED_COLUMN]
    deleted = F.when(F.col(DELETED_COLUMN), F.lit("t")).otherwise(F.lit("f"))
    return projected.select(F.concat_ws("\t", *texts, deleted).alias(LINE_COLUMN))
