"""Which module writes for a configured sink kind: the registry.

The job's plan (parse, transform, the bad-record screen, the checkpoint) is the
same for every sink; only how a batch lands exactly once differs.  A sink is a
module implementing `dvjob.sinks.contract.Sink`, registered in `open_sink`: a new
sink is a new module plus one line here, not edits across the job.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from dvjob.config import JobConfig, flag_setting
from dvjob.errors import ConfigError
from dvjob.sinks.contract import Sink
from dvjob.sinks.schema import TableLayout

if TYPE_CHECKING:
    from dvjob.credentials import Credentials


SINK_KINDS = ("postgres", "opensearch")

BULK_LOAD_CONF = "spark.derivedviews.bulkLoad"
"""Spark configuration that turns the PostgreSQL sink's bulk merge (dvjob.sinks.postgres.bulk) off
(false) or on (true, the default): off only to measure what it gains."""


def bulk_load_setting(value: str | None) -> bool:
    """BULK_LOAD_CONF (unset: on); anything but true or false is refused before any query."""
    return flag_setting(BULK_LOAD_CONF, value, default=True)


def open_sink(config: JobConfig, layout: TableLayout, credentials: Credentials, *,
              before_commit: Callable[[int], None] | None = None, bulk_load: bool = True
              ) -> Sink:
    """The sink the configuration names; the import is lazy so a job loads one client."""
    kind = config.sink.kind
    if kind == "postgres":
        from dvjob.sinks.postgres.sink import PostgresSink, connect_with, describe_target
        app_name = f"dvjob-{config.revision}"
        return PostgresSink(connect=connect_with(app_name, credentials.postgres),
                            schema=config.sink.db_schema, table=config.sink.table,
                            ledger_table=config.sink.ledger_table, revision=config.revision,
                            layout=layout, before_commit=before_commit, app_name=app_name,
                            stage_secret_dir=credentials.stage_dir,
                            owner=config.owner.model_dump() if config.owner else None,
                            target=describe_target(credentials.postgres),
                            bulk_load=bulk_load)
    if kind == "opensearch":
        from dvjob.sinks.opensearch.client import client_from
        from dvjob.sinks.opensearch.sink import OpenSearchSink
        client, url = client_from(credentials.opensearch)
        return OpenSearchSink(client=client, url=url, index=config.sink.table,
                              ledger_index=config.sink.ledger_table, view=config.view,
                              revision=config.revision, layout=layout,
                              before_commit=before_commit,
                              uid=config.owner.uid if config.owner else None)
    raise ConfigError(f"sink.kind {kind!r}: this job writes {', '.join(SINK_KINDS)}")
