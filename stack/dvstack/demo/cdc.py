"""`make demo-cdc`: a legacy database's changes become a derived view, and it migrates live.

A "system of record" database on the stack's PostgreSQL takes a workload of inserts,
updates and deletes the whole time; Debezium (Kafka Connect on the stack) captures the
table into a Kafka topic; DerivedView v1 (`format: debezium`) mirrors the table, then v2
(a new SQL) replays the same topic beside it while a reader queries the alias, and readers
switch. After each step the demo compares the index with the table itself. The stack stays
up (`make stack-down`).

`DEMO_FORMAT=avro make demo-cdc` runs it in Avro end to end: the connector writes keys and
values through Apicurio's Avro converter into the stack's schema registry, and the view
reads them with `format: debezium` and a reader schema of the table's row.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

from kubernetes.client.exceptions import ApiException

from dvstack.demo.orders import G, P, V, Watch, gone, migrate, ready, stack_up, start_operator
from dvstack.services.debezium import (
    AVRO_ROW_SCHEMA,
    MIRROR_COLUMNS,
    MIRROR_SQL,
    ROW_SCHEMA,
    V2_COLUMNS,
    V2_SQL,
    Rows,
    SourceDatabase,
    TableWorkload,
    mirrored,
    settle,
    v2_of,
)
from dvstack.testing import replay
from dvstack.testing.waiting import TimedOut

_NAMESPACE = "demo-cdc"
_VIEW = "accounts"
_RATE = 50  # source-table changes/s during the whole demo


def _view(bootstrap: str, topic: str, table: str, avro: bool = False) -> dict[str, Any]:
    values: dict[str, Any] = {"schema": ROW_SCHEMA}
    if avro:
        values = {"avro": {"registry": {"secretRef": {"name": "registry"}},
                           "readerSchema": {"schema": AVRO_ROW_SCHEMA}}}
    return {"apiVersion": f"{G}/{V}", "kind": "DerivedView",
            "metadata": {"name": _VIEW, "namespace": _NAMESPACE},
            "spec": {"source": {"kafka": {"bootstrapServers": bootstrap}, "topics": [topic],
                                "format": "debezium", **values},
                     "transform": {"sql": MIRROR_SQL},
                     "sink": {"postgres": {"secretRef": {"name": "views-db"}, "table": table},
                              "primaryKey": ["id"]},
                     "cutover": {"retainPreviousSeconds": 0},
                     "deletionPolicy": "Delete"}}


def compare(dsn: str, table: str, workload: TableWorkload, source: SourceDatabase,
            columns: list[str], expected_of: Callable[[Rows], Rows]) -> None:
    """Pause the workload until the index equals the table (as the demo computes the view
    from it), and print the comparison."""
    try:
        seen = settle(workload, source, dsn, table, columns, expected_of)
    except TimedOut as exc:
        sys.exit(str(exc))
    ops = seen["operations"]
    print(f"   workload paused: the table has {seen['rows']:,} rows, the index equals it "
          f"(0 rows differ; {ops['insert']:,} inserts, {ops['update']:,} updates, "
          f"{ops['delete']:,} deletes so far)")


def run_cdc_demo() -> None:
    seed_rows = int(os.environ.get("DEMO_ROWS", "5000"))
    encoding = os.environ.get("DEMO_FORMAT", "json")
    if encoding not in ("json", "avro"):
        sys.exit(f"DEMO_FORMAT={encoding!r}: json (the default) or avro")
    avro = encoding == "avro"
    settings, info, core, custom = stack_up()
    run = uuid.uuid4().hex[:8]
    source = SourceDatabase(run, info["pg_dsn"], info["pg"], info["kafka_connect"])
    table = f"accounts_{run}"
    bootstrap = info["kafka_bootstrap"]

    print(f"\n1. system of record: database {source.database}, table accounts with "
          f"{seed_rows:,} rows; a workload changes it {_RATE}/s for the whole demo")
    source.create(seed_rows)
    workload: TableWorkload | None = None
    operator = None
    try:
        registry = str(info["schema_registry_url"])
        source.capture(avro_registry_url=registry if avro else None)
        print(f"   Debezium (Kafka Connect {info['kafka_connect']}) snapshots the table and "
              f"streams its changes into topic {source.topic}"
              + (f", keys and values in Avro through the schema registry {registry}"
                 if avro else " as JSON"))
        workload = TableWorkload(source.dsn, rate=_RATE).start()
        replay.ensure_namespace_and_sink_secret(core, _NAMESPACE, "views-db", info["pg"])
        replay.ensure_checkpoint_secret(core, _NAMESPACE, info["s3"])
        if avro:
            replay.ensure_registry_secret(core, _NAMESPACE, registry)
        operator = start_operator(settings, info, run)
        print(f"   operator started (pid {operator.pid}; log "
              f"{settings.logs_dir}/operator-demo.log)")
        try:
            custom.delete_namespaced_custom_object(G, V, _NAMESPACE, P, _VIEW)
        except ApiException as exc:
            if exc.status != 404:
                raise
        watch = Watch(custom, _NAMESPACE, _VIEW)
        watch.until(lambda _s: gone(custom, _NAMESPACE, _VIEW),
                    "an earlier demo's view to be deleted")

        print(f"\n2. kubectl apply DerivedView {_NAMESPACE}/{_VIEW} v1 (format: debezium"
              + (", avro" if avro else "") + f"): {MIRROR_SQL}")
        custom.create_namespaced_custom_object(G, V, _NAMESPACE, P,
                                               _view(bootstrap, source.topic, table, avro))
        applied = time.monotonic()
        status = watch.until(lambda s: ready(s) and s.get("active"), "v1 to serve")
        v1 = status["active"]["revision"]
        print(f"   v1 = revision {v1} serves through the alias \"{table}\" "
              f"({time.monotonic() - applied:.0f}s after the apply)")
        compare(info["pg_dsn"], table, workload, source, MIRROR_COLUMNS, mirrored)

        migrate(custom, watch, info["pg_dsn"], table, V2_SQL, v1, step=3)
        compare(info["pg_dsn"], table, workload, source, V2_COLUMNS, v2_of)

        custom.delete_namespaced_custom_object(G, V, _NAMESPACE, P, _VIEW)
        watch.until(lambda _s: gone(custom, _NAMESPACE, _VIEW), "the view to be deleted")
        print("\n4. view deleted (deletionPolicy Delete dropped its alias and indexes); the "
              "connector, its replication slot and the source database are removed next; the "
              "stack is still up (make stack-down stops it)")
    finally:
        if workload is not None:
            workload.stop()
        if operator is not None:
            operator.terminate()
            operator.wait(timeout=60)
        source.drop()
        replay.delete_topic(bootstrap, source.topic)


if __name__ == "__main__":
    run_cdc_demo()
