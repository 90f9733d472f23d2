"""A large batch into a small index, the way a database loader does it: without the primary
key while the rows go in, then the key built once, inside the batch's own transaction.

Why: the usual merge (INSERT ... ON CONFLICT) looks up and inserts every row in the primary
key's B-tree and writes each change to it into the WAL. When the batch holds at least as
many rows as the index, as in a replay's first batches, building the key afterwards (one
sort) costs less than maintaining it row by row, and the rows themselves are one sequential
insert. Exactly-once is untouched: the ledger row, the rows and the rebuilt key commit or
roll back together; a failure leaves the index and its key as they were.

Only an index that no reader can see takes this path: it holds an ACCESS EXCLUSIVE lock for
the merge, so it is refused for a table any view reads (the alias) and for one a foreign key
references (the key cannot be dropped under it).
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from dvjob.sinks.schema import TableLayout

BULK_MAINTENANCE_WORK_MEM = "256MB"
BULK_SAVEPOINT = "dv_bulk_load"


def _one(cur: psycopg.Cursor[Any]) -> Any:
    found = cur.fetchone()
    return found[0] if found else None


def _ours_alone(cur: psycopg.Cursor[Any], oid: int) -> bool:
    """No view reads the table, no foreign key references it, and this role may alter it."""
    cur.execute("SELECT pg_has_role(c.relowner, 'MEMBER') "
                "AND NOT EXISTS (SELECT 1 FROM pg_depend d JOIN pg_rewrite r ON r.oid = d.objid "
                "WHERE d.classid = 'pg_rewrite'::regclass AND d.refobjid = c.oid "
                "AND r.ev_class <> c.oid) "
                "AND NOT EXISTS (SELECT 1 FROM pg_constraint f WHERE f.confrelid = c.oid) "
                "FROM pg_class c WHERE c.oid = %s", (oid,))
    return bool(_one(cur))


def claim(cur: psycopg.Cursor[Any], target: sql.Composable, oid: int, staged_rows: int
          ) -> str | None:
    """The primary key's name when the batch should load in bulk, with the table locked for
    it; None (and no lock kept) when it should merge row by row: the table is seen by a
    reader, is not this role's to alter, has no primary key, or holds more rows than the
    batch."""
    if staged_rows <= 0 or not _ours_alone(cur, oid):
        return None  # decided before any lock: a served index is never locked out
    cur.execute(sql.SQL("SAVEPOINT {}").format(sql.Identifier(BULK_SAVEPOINT)))
    cur.execute(sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(target))
    cur.execute("SELECT conname FROM pg_constraint WHERE conrelid = %s AND contype = 'p'", (oid,))
    key = _one(cur)
    cur.execute(sql.SQL("SELECT count(*) FROM (SELECT 1 FROM {} LIMIT %s) AS held").format(target),
                (staged_rows + 1,))
    held = int(_one(cur) or 0)
    if key is None or held > staged_rows or not _ours_alone(cur, oid):  # (a switch got in first)
        cur.execute(sql.SQL("ROLLBACK TO SAVEPOINT {}").format(sql.Identifier(BULK_SAVEPOINT)))
        return None  # releases the lock taken since the savepoint
    cur.execute(sql.SQL("RELEASE SAVEPOINT {}").format(sql.Identifier(BULK_SAVEPOINT)))
    return str(key)


def merge(cur: psycopg.Cursor[Any], target: sql.Composable, layout: TableLayout, key: str,
          source: sql.Composable, insert: sql.Composed) -> int:
    """The batch into the claimed table with its primary key `key` dropped and rebuilt,
    after its deletes (sink_postgres.delete_statement, as for the row-by-row merge): the
    keys `source` (the batch's rows, NULL keys removed) replaces go, then `insert` (each
    key's last row) runs; the rows it inserted, as the upsert counts them."""
    match = sql.SQL(" AND ").join(sql.SQL("s.{k} = t.{k}").format(k=sql.Identifier(k))
                                  for k in layout.primary_key)
    cur.execute(sql.SQL("ALTER TABLE {} DROP CONSTRAINT {}").format(target, sql.Identifier(key)))
    cur.execute(sql.SQL("SELECT EXISTS (SELECT 1 FROM {})").format(target))
    if _one(cur):  # a semi-join on the batch's rows, no sort of the batch
        cur.execute(sql.SQL("DELETE FROM {} AS t WHERE EXISTS (SELECT 1 FROM {} AS s WHERE {})"
                            ).format(target, source, match))
    cur.execute(insert)
    upserted = max(cur.rowcount, 0)
    cur.execute("SELECT set_config('maintenance_work_mem', %s, true) WHERE "
                "pg_size_bytes(current_setting('maintenance_work_mem')) < pg_size_bytes(%s)",
                (BULK_MAINTENANCE_WORK_MEM, BULK_MAINTENANCE_WORK_MEM))
    cur.execute(sql.SQL("ALTER TABLE {} ADD CONSTRAINT {} PRIMARY KEY ({})").format(
        target, sql.Identifier(key), sql.SQL(", ").join(
            sql.Identifier(k) for k in layout.primary_key)))
    return upserted
