"""How far each revision's running batch has read, from the table beside the ledger.

The job's driver overwrites its revision's row every few seconds while a batch runs
(spark_templates/dvjob/batch_progress.py); nothing there is committed index data, so it only
feeds the lag's `batchRead` and ETA. Ledgers from jobs before progress was reported have no
such table: no revision reports then.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import psycopg
from psycopg import sql

from derived_views.core.naming import LEDGER_TABLE, progress_table
from derived_views.core.observed import RunningBatch


def running_batches(conn: psycopg.Connection[Any], schema: str, revisions: Iterable[str],
                    ledger: str = LEDGER_TABLE) -> dict[str, RunningBatch]:
    """The last progress report per revision (revisions that never reported are absent)."""
    wanted = sorted(set(revisions))
    table = progress_table(ledger)
    if not wanted or conn.execute("SELECT to_regclass(%s)", (
            sql.Identifier(schema, table).as_string(conn),)).fetchone() in (None, (None,)):
        return {}
    rows = conn.execute(sql.SQL(
        "SELECT revision, batch_id, records_read, end_offsets, started_at, reported_at "
        "FROM {} WHERE revision = ANY(%s)").format(sql.Identifier(schema, table)),
        (wanted,)).fetchall()
    out: dict[str, RunningBatch] = {}
    for revision, batch_id, read, offsets, started, reported in rows:
        ends = _end_offsets(offsets)
        if ends is not None:
            out[str(revision)] = RunningBatch(
                batch_id=int(batch_id), records_read=int(read), end_offsets=ends,
                started_at=started, reported_at=reported)  # timestamptz: aware
    return out


def _end_offsets(raw: Any) -> dict[tuple[str, int], int] | None:
    """`{topic: {partition: offset}}` as `{(topic, partition): offset}`; None when the job's
    report is not of that shape (it is ignored, not a failed pass)."""
    try:
        return {(str(topic), int(p)): int(o) for topic, parts in raw.items()
                for p, o in parts.items()}
    except (AttributeError, TypeError, ValueError):
        return None
