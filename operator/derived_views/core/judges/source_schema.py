"""The events' Spark DDL and the text that pins their shape, whatever the format.

For json and debezium both are `source.schema`. For avro the shape is the reader schema:
its JSON text is what a revision keeps (in the status, for rollbacks), and its DDL, derived
as Spark's Avro reader types it (`core.judges.avro_schema`), is what the transform is checked
against and the job is told. A reader schema pinned in the registry (`subject`, `version`)
has no text in the spec: the shell fetches it, and the functions that need the text are
handed what is known (`ReaderSchemas`: fetched this pass, or kept by a revision's status).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from derived_views.api.spec import Source
from derived_views.api.status import SubjectVersion
from derived_views.core.judges.avro_schema import spark_ddl

ReaderSchemas = Mapping[SubjectVersion, str]
"""Reader schemas' texts by registry subject and version."""
NONE_KNOWN: ReaderSchemas = MappingProxyType({})


class ReaderSchemaUnknown(LookupError):
    """The spec pins its reader schema in the registry and its text is not known (yet): no
    job can be rendered and the transform cannot be checked."""


def pinned_reader(source: Source) -> SubjectVersion | None:
    """The registry subject and version the spec's reader schema is, if it is pinned there."""
    reader = source.avro.reader_schema if source.avro is not None else None
    if reader is None or reader.subject is None or reader.version is None:
        return None
    return SubjectVersion(subject=reader.subject, version=reader.version)


def reader_text(source: Source, known: ReaderSchemas = NONE_KNOWN) -> str | None:
    """The Avro reader schema's text: inline, or the pinned version's when known; None for a
    view without Avro or a pinned version not known."""
    if source.avro is None:
        return None
    pin = pinned_reader(source)
    return source.avro.reader_schema.text if pin is None else known.get(pin)


def shape_text(source: Source, known: ReaderSchemas = NONE_KNOWN) -> str:
    """What pins the events' shape in a revision: the DDL, or the Avro reader schema's text
    (ReaderSchemaUnknown for a pinned one not in `known`)."""
    if source.avro is None:
        return source.value_schema or ""
    text = reader_text(source, known)
    if text is None:
        raise ReaderSchemaUnknown(f"the reader schema ({_pin(source)}) is not known yet")
    return text


def events_ddl(source: Source, known: ReaderSchemas = NONE_KNOWN) -> str:
    """The events' Spark DDL; AvroSchemaError when the reader schema cannot be read or is
    beyond what is judged (core.judges.avro_schema's limits: its DDL is never longer than a
    `source.schema` may be), ReaderSchemaUnknown when it is pinned and not in `known`. A
    DDL is returned as written: core.judges.spark_ddl judges it (core.judges.transform)."""
    if source.avro is not None:
        return spark_ddl(shape_text(source, known))
    return source.value_schema or ""


def value_subjects(source: Source) -> tuple[str, ...]:
    """The subjects producers register the topics' value schemas under by default
    (TopicNameStrategy: `<topic>-value`), in the spec's order."""
    return tuple(f"{topic}-value" for topic in source.topics)


def _pin(source: Source) -> str:
    pin = pinned_reader(source)
    return pin.describe() if pin is not None else "inline"
