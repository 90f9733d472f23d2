"""The events' Spark DDL and the text that pins their shape, whatever the format.

For json and debezium both are `source.schema`. For avro the shape is the reader schema:
its JSON text is what a revision pins (hashed, kept in the status for rollbacks), and its
DDL, derived as Spark's Avro reader types it (`core.avro_schema`), is what the transform is
checked against and the job is told.
"""

from __future__ import annotations

from derived_views.api.spec import Source
from derived_views.core.avro_schema import spark_ddl


def shape_text(source: Source) -> str:
    """What pins the events' shape in a revision: the DDL, or the Avro reader schema."""
    if source.avro is not None:
        return source.avro.reader_schema.text
    return source.value_schema or ""


def events_ddl(source: Source) -> str:
    """The events' Spark DDL; AvroSchemaError when the reader schema cannot be read."""
    if source.avro is not None:
        return spark_ddl(source.avro.reader_schema.text)
    return source.value_schema or ""
