"""How many records each revision left out under its bad-record policy, from the ledger.

The job writes each batch's count into that batch's ledger row, in the batch's
transaction (see spark_templates/dvjob/source/bad_records.py), so the sum is exact:
a replayed batch is never counted twice.  Ledgers written before the column
existed have none: every revision then counts 0.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import psycopg
from psycopg import sql

from derived_views.core.naming import LEDGER_TABLE

COLUMN = "bad_records"


def bad_record_counts(conn: psycopg.Connection[Any], schema: str, revisions: Iterable[str],
                      ledger: str = LEDGER_TABLE) -> dict[str, int]:
    """Records left out per revision (revisions with no ledger row are absent)."""
    wanted = sorted(set(revisions))
    if not wanted:
        return {}
    has_column = conn.execute(
        "SELECT 1 FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relname = %s AND a.attname = %s AND NOT a.attisdropped",
        (schema, ledger, COLUMN)).fetchone()
    if has_column is None:
        return {}
    rows = conn.execute(sql.SQL(
        "SELECT revision, sum({column}) FROM {table} WHERE revision = ANY(%s) GROUP BY revision"
    ).format(column=sql.Identifier(COLUMN), table=sql.Identifier(schema, ledger)),
        (wanted,)).fetchall()
    return {str(r[0]): int(r[1] or 0) for r in rows}
