"""The Spark job's `--config-json`: the contract in spark_templates/README.md.

Built from the revision's effective spec (see `revision.with_content`), so a
job recreated for an older revision runs that revision's logic, and checked
against the revision it is labelled with.
"""

from __future__ import annotations

import json
from typing import Any

from derived_views.api.spec import DerivedViewSpec
from derived_views.core import naming
from derived_views.core.judges.source_schema import (
    NONE_KNOWN,
    ReaderSchemas,
    events_ddl,
    shape_text,
)
from derived_views.core.revision import revision_of
from derived_views.core.settings import MIN_TRIGGER_SECONDS


def job_config(*, namespace: str, view: str, spec: DerivedViewSpec, revision: str,
               checkpoint_location: str, uid: str, ledger_table: str = naming.LEDGER_TABLE,
               secrets: dict[str, str | None] | None = None,
               trigger_seconds: float = MIN_TRIGGER_SECONDS,
               reader_schemas: ReaderSchemas = NONE_KNOWN) -> dict[str, Any]:
    """The job's configuration document (camelCase keys, in the contract's order).

    `owner` (the view's namespace, name and metadata.uid) is recorded on the index the job
    creates, and an index recorded for another view is refused by the job at start.
    `secrets` names the Secrets mounted for the job by role (sink, kafka, checkpoint): the
    job then reads its credentials from their files and nowhere else. `trigger_seconds` is
    the micro-batch interval (Settings.spark.trigger_of): not content, so no revision of its
    own; a job whose interval changes is restarted from its checkpoint (job_settings_of). `reader_schemas` holds the text of a reader schema
    the spec pins in the registry (ReaderSchemaUnknown without it: no job is rendered)."""
    if not uid:
        raise ValueError("uid (the view's metadata.uid) is required: the job records it as "
                         "the owner of the index it creates")
    if revision_of(spec) != revision:
        raise ValueError(f"the spec's content is revision {revision_of(spec)}, not {revision}")
    transform: dict[str, Any]
    if spec.transform.sql is not None:
        transform = {"sql": spec.transform.sql}
    else:
        assert spec.transform.python is not None  # the model guarantees exactly one
        transform = {"python": spec.transform.python.function}
    sink: dict[str, Any] = {
        "kind": spec.sink.kind,
        "table": naming.index_table(spec.sink.alias, revision),
        "schema": spec.sink.db_schema,
        "primaryKey": list(spec.sink.primary_key),
        "ledgerTable": ledger_table,
    }
    if not spec.sink.db_schema:  # OpenSearch has none
        del sink["schema"]
    document: dict[str, Any] = {
        "view": f"{namespace}/{view}",
        "owner": {"namespace": namespace, "name": view, "uid": uid},
        "revision": revision,
        "source": {
            "bootstrapServers": spec.source.kafka.bootstrap_servers,
            "topics": list(spec.source.topics),
            "format": spec.source.format,
            "schema": events_ddl(spec.source, reader_schemas),
            "maxOffsetsPerTrigger": spec.source.max_offsets_per_trigger,
            # Spark stops the job on records deleted before it read them (failOnDataLoss):
            # under `complete` that is the history rule's own verdict; `fromLogStart`
            # accepts the loss, so a job created under it reads on from where the log
            # starts (a running job keeps its setting: core.revision.job_settings_of).
            "kafkaOptions": ({"failOnDataLoss": "false"}
                             if spec.source.history == "fromLogStart" else {}),
            "badRecords": spec.source.bad_records.model_dump(mode="json", by_alias=True,
                                                             exclude_none=True),
        },
        "transform": transform,
        "sink": sink,
        "checkpointLocation": checkpoint_location,
        # a whole number stays one: the manifests of the default interval read as before
        "trigger": {"processingTimeSeconds": int(trigger_seconds) if float(trigger_seconds).is_integer()
                    else trigger_seconds},
    }
    if spec.source.avro is not None:
        document["source"]["avro"] = {"readerSchema": shape_text(spec.source, reader_schemas)}
    if secrets is not None:
        document["secrets"] = {role: name for role, name in secrets.items() if name}
    return document


def job_config_json(config: dict[str, Any]) -> str:
    """Compact JSON, the single argument after `--config-json`."""
    return json.dumps(config, separators=(",", ":"), ensure_ascii=False)
