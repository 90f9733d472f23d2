"""A revision is the content hash of the spec fields that decide the view's rows.

Included: topics (as a set), value format and schema, the transform (SQL or
Python function and its files), the sink table base name and PostgreSQL
schema, and the primary key. Change any of them and the index must be rebuilt
from offset 0, so the hash changes and a candidate is built.

Excluded, deliberately:
- `source.kafka.bootstrapServers` and both `secretRef`s: connection details
  say *where* to reach the log and the database, not *which* rows the view
  holds. Renaming a listener or rotating a credential Secret must not cost a
  full replay. (Pointing the view at a different cluster that merely reuses
  the topic names is a content change this hash cannot see: change a content
  field, e.g. the table base name, to force a rebuild.)
- `source.maxOffsetsPerTrigger`: batch sizing; the rows converge to the same (a change
  restarts the running jobs from their checkpoints: see `job_settings_of`).
- `source.badRecords`: whether the job stops at a bad record or leaves it out (counted
  per revision in the status), not what a good record contributes; a change restarts
  the running jobs from their checkpoints, so `skip` gets a view past a record that
  stopped it without a replay.
- `cutover`, `spark`, `deletionPolicy`, labels and annotations: policy and
  resources.

Text is compared after stripping only its outer whitespace (YAML block
scalars add a trailing newline): any other edit counts as new content, which
costs a replay at worst but never serves stale logic.

An Avro reader schema pinned in the registry is hashed as its subject and version, not its
text: the revision is known from the spec alone (before the registry answers, and whatever
it answers later), a registry version never changes, and naming another version (or moving
between the inline and pinned forms) is new content. The fetched text is kept in the
revision's status content, so its job renders from there.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from derived_views.api.spec import BadRecords, DerivedViewSpec
from derived_views.api.status import RevisionContent, SubjectVersion
from derived_views.core.judges.source_schema import (
    NONE_KNOWN,
    ReaderSchemas,
    pinned_reader,
    shape_text,
)

REVISION_LENGTH = 10
"""Hex characters: 40 bits, so two revisions of one view colliding is not a practical concern,
and `<table>__<revision>` stays within PostgreSQL's 63 bytes (table base <= 40)."""

HASH_SCHEME = 1
"""Part of the hashed document, so a future change of what is hashed is explicit."""


def content_of(spec: DerivedViewSpec, known: ReaderSchemas = NONE_KNOWN) -> RevisionContent:
    """The spec's content fields, as the status keeps them per revision: a pinned reader
    schema with its text from `known` (ReaderSchemaUnknown when it is not there)."""
    python = spec.transform.python
    return RevisionContent(
        topics=list(spec.source.topics), format=spec.source.format,
        value_schema=shape_text(spec.source, known),
        encoding="avro" if spec.source.avro is not None else None,
        reader_schema=pinned_reader(spec.source), sql=spec.transform.sql,
        python_function=python.function if python else None,
        py_files=list(python.py_files) if python else [],
        primary_key=list(spec.sink.primary_key))


def spec_fields(content: RevisionContent) -> dict[str, Any]:
    """A revision's content as the spec (JSON) fields that hold it: the one mapping
    both `with_content` and `dv rollback`'s spec patch use."""
    transform: dict[str, Any]
    if content.python_function is not None:
        transform = {"python": {"function": content.python_function,
                                "pyFiles": list(content.py_files)}}
    else:
        transform = {"sql": content.sql}
    source: dict[str, Any] = {"topics": list(content.topics), "format": content.format}
    if content.encoding == "avro" or content.format == "avro":  # `schema`: the reader schema
        pin = content.reader_schema
        source["avro"] = {"readerSchema": {"schema": content.value_schema} if pin is None
                          else {"subject": pin.subject, "version": pin.version}}
    else:
        source["schema"] = content.value_schema
    return {"source": source,
            "transform": transform,
            "sink": {"primaryKey": list(content.primary_key)}}


def reader_schemas_of(content: RevisionContent) -> dict[SubjectVersion, str]:
    """The pinned reader schema a revision's content keeps, by subject and version (empty
    for an inline one): what renders that revision's job, whatever the registry holds now."""
    pin = content.reader_schema
    return {} if pin is None else {pin: content.value_schema}


def with_content(spec: DerivedViewSpec, content: RevisionContent) -> DerivedViewSpec:
    """`spec` with another revision's content: how an older revision's job is rendered
    (a pinned reader schema's text: `reader_schemas_of(content)`).

    Connection details, resources and policies come from the current spec (they
    are not content); the table base and schema are immutable, so they match.
    """
    body = spec.model_dump(mode="json", exclude_none=True)
    fields = spec_fields(content)
    avro = fields["source"].pop("avro", None)
    body["source"].pop("schema", None)
    if avro is None:
        body["source"].pop("avro", None)
    else:  # the registry is a connection detail: the current spec's
        body["source"]["avro"] = {**body["source"].get("avro", {}), **avro}
    body["source"].update(fields["source"])
    body["transform"] = fields["transform"]
    body["sink"].update(fields["sink"])
    return DerivedViewSpec.model_validate(body)


def revision_document(spec: DerivedViewSpec) -> dict[str, Any]:
    """The content fields as a JSON-ready document: the input of the hash."""
    transform: dict[str, Any]
    if spec.transform.sql is not None:
        transform = {"sql": spec.transform.sql.strip()}
    else:
        assert spec.transform.python is not None  # the model guarantees exactly one
        transform = {"python": {"function": spec.transform.python.function,
                                "pyFiles": list(spec.transform.python.py_files)}}
    sink: dict[str, Any] = {"table": spec.sink.alias, "schema": spec.sink.db_schema,
                            "primaryKey": list(spec.sink.primary_key)}
    if spec.sink.kind != "postgres":  # PostgreSQL views keep the revisions they always had
        sink["kind"] = spec.sink.kind
    source: dict[str, Any] = {"topics": sorted(set(spec.source.topics)),
                              "format": spec.source.format}
    pin = pinned_reader(spec.source)
    if pin is None:  # inline reader schemas and DDLs keep their revisions
        source["schema"] = shape_text(spec.source).strip()
    else:
        source["readerSchema"] = {"subject": pin.subject, "version": pin.version}
    if spec.source.avro is not None:  # only then: JSON views keep their revisions
        source["encoding"] = "avro"
    return {
        "scheme": HASH_SCHEME,
        "source": source,
        "transform": transform,
        "sink": sink,
    }


def canonical_json(document: Any) -> str:
    """Sorted keys, no whitespace, UTF-8 as is: one text per document."""
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def revision_of(spec: DerivedViewSpec) -> str:
    """First REVISION_LENGTH hex characters of sha256 over the canonical content document."""
    digest = hashlib.sha256(canonical_json(revision_document(spec)).encode("utf-8")).hexdigest()
    return digest[:REVISION_LENGTH]


def job_settings_of(spec: DerivedViewSpec, trigger_seconds: float = 1.0,
                    replay_executors: int | None = None) -> str:
    """Hash of what a running job uses but the revision does not: `spec.spark` (except
    checkpointBase: a revision keeps its checkpoint), the Kafka connection and the batch
    bound (`source.maxOffsetsPerTrigger`, read by the job only when it starts) and the
    bad-record policy (`source.badRecords`, ditto). Not `source.history`: it decides what may
    serve, and the jobs created from then on (a failed one restarts on the new generation)
    read past records the log deleted; a running job is not restarted for it.

    And the job's micro-batch interval (`trigger_seconds`, from the installation or the
    view's gate: Settings.spark.trigger_of), when it is not 1 s: a gate changed so that the
    interval changes restarts the job once; jobs at 1 s keep the hash they had before the
    interval was part of it.

    And the job's stage (core.job.stages): a job in its replay stage hashes its executors
    (`replay_executors`) besides; a steady one (None) hashes neither them nor
    `spec.spark.replay`, so it keeps the hash jobs had before stages (an operator upgrade
    restarts no job), a change of `spec.spark.replay` restarts only a replaying job, and a
    revision whose stage turns steady is restarted once, from its checkpoint.

    Stamped on each SparkApplication; a different value means the job must be
    recreated to apply it, from the same checkpoint (never a replay).
    """
    document = {
        "spark": spec.spark.model_dump(mode="json", by_alias=True,
                                       exclude={"checkpoint_base", "replay"}),
        "kafka": spec.source.kafka.model_dump(mode="json", by_alias=True),
        "maxOffsetsPerTrigger": spec.source.max_offsets_per_trigger,
    }
    if trigger_seconds != 1.0:
        document["triggerSeconds"] = trigger_seconds
    if spec.source.avro is not None:  # only then: other views keep their hash
        document["registry"] = spec.source.avro.registry.model_dump(mode="json", by_alias=True)
    if spec.source.bad_records != BadRecords():
        # Only when set: views that never set it keep their hash (no restart on upgrade).
        document["badRecords"] = spec.source.bad_records.model_dump(mode="json", by_alias=True,
                                                                    exclude_none=True)
    if replay_executors is not None:
        document["replayExecutors"] = replay_executors
    digest = hashlib.sha256(canonical_json(document).encode("utf-8")).hexdigest()
    return digest[:REVISION_LENGTH]
