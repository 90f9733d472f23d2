"""The PostgreSQL sink: each micro-batch's rows and its ledger row in ONE transaction.

Spark's foreachBatch is at-least-once: after a failure it re-runs the last
uncommitted batch with the same id and range.  The ledger row, keyed by
(revision, batch_id) and committed atomically with the batch's effects, turns
that into exactly-once effects: a batch whose row exists is skipped.  The row
also records the batch's exclusive end offsets, which is where the operator
reads lag from (committed in the index, not merely read by Spark), and where
the revision's replay began (`history_start`, the same in every row).

Per batch: check that the index table is the one the ledger's batches went to
(see dvjob.integrity; each ledger row records its OID), claim the ledger row
(INSERT ... ON CONFLICT DO NOTHING, so a concurrent duplicate waits on the row
lock and then sees the claim), COPY the
rows into a temporary table, DELETE the keys whose last row is flagged deleted,
upsert the others, record the counts.  Within a batch the last row of a key
wins (rows arrive in Kafka order per partition).  A staged batch at least as
large as an index no reader sees yet merges in bulk instead (dvjob.sinks.postgres.bulk).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from dvjob.batch_progress import Progress
from dvjob.errors import JobError
from dvjob.integrity import LedgerHead, check_index
from dvjob.offsets import EndOffsets
from dvjob.sinks.contract import (
    FAIL_ON_NULL_KEY,
    BadRecordHandler,
    BatchOutcome,
    FrameRows,
    IndexOwnedElsewhereError,
    LedgerMismatchError,
)
from dvjob.sinks.postgres import bulk as pg_bulk
from dvjob.sinks.postgres import stage as pg_stage
from dvjob.sinks.postgres.stage import PartitionCopier
from dvjob.sinks.schema import DELETED_COLUMN, SinkColumn, TableLayout

BATCH_TABLE = "_dv_batch"
ORDINAL_COLUMN = "_dv_ord"
STAGE_PREFIX = "_dv_stage_"
"""Staging tables of large batches (dvjob.sinks.postgres.stage): `_dv_stage_<revision digest>_<token>`."""
SHARED_DDL_LOCK_TIMEOUT = "5s"
"""How long the start-up waits for a lock on the shared ledger (a long reader of it blocks
ALTER TABLE) before failing with a clear error; the job is restarted and tries again."""
SHARED_DDL_ATTEMPTS = 5
"""CREATE ... IF NOT EXISTS of the shared schema, ledger and function races a twin job's
identical CREATE (a unique violation): retried, the second attempt sees the first's object."""
INDEX_LOCK_MODE = "SHARE ROW EXCLUSIVE"
"""The start-up's lock on its own index table: it conflicts with itself and with writes, and
only the table's owner and roles that may write it can take it (LOCK TABLE in this mode needs
UPDATE, DELETE or TRUNCATE; a conflicting ROW EXCLUSIVE needs INSERT). A role that may only
read the index (a reader, the check role) gets ACCESS SHARE on it, which conflicts with
nothing the start-up takes there; an advisory key, which any role of the database could take,
stalled starts."""
INDEX_LOCK_ATTEMPTS = 5
"""A start-up that loses a race over its index table (a twin job creating it first, the
operator dropping it while the start-up waited for the lock, a deadlock with a twin's batch)
starts over and judges the table it then finds."""
OWNER_KEY = "derivedviews.io/owner"
"""The index table's COMMENT: `{"derivedviews.io/owner": {"namespace", "name", "uid"}}`, the
view that created it (the operator reads it back: adapters/postgres/sink.py)."""

Connect = Callable[[], psycopg.Connection[Any]]


class IndexTableMismatchError(JobError):
    """The index table exists with other columns than this revision produces."""


def owner_comment(namespace: str, name: str, uid: str) -> str:
    """The COMMENT recording the view that owns an index table (canonical JSON)."""
    return json.dumps({OWNER_KEY: {"namespace": namespace, "name": name, "uid": uid}},
                      sort_keys=True, separators=(",", ":"))


def parse_owner(comment: str | None) -> dict[str, str] | None:
    """The owner a comment records, or None (no comment, or not ours: a table from before
    owners were recorded, or a comment someone else wrote)."""
    try:
        found = json.loads(comment or "")
    except ValueError:
        return None
    owner = found.get(OWNER_KEY) if isinstance(found, dict) else None
    if not isinstance(owner, dict) or not all(
            isinstance(owner.get(k), str) and owner.get(k) for k in ("namespace", "name", "uid")):
        return None
    return {k: str(owner[k]) for k in ("namespace", "name", "uid")}


def describe_owner(owner: dict[str, str]) -> str:
    return f"DerivedView {owner['namespace']}/{owner['name']} (uid {owner['uid']})"


def _qualified(schema: str, table: str) -> sql.Identifier:
    return sql.Identifier(schema, table)


def _idents(names: Iterable[str]) -> sql.Composed:
    return sql.SQL(", ").join(sql.Identifier(n) for n in names)


def ledger_ddl(schema: str, ledger_table: str) -> sql.Composed:
    return sql.SQL(
        "CREATE TABLE IF NOT EXISTS {} ("
        "revision text NOT NULL, batch_id bigint NOT NULL, end_offsets jsonb NOT NULL, "
        "rows_upserted bigint NOT NULL, rows_deleted bigint NOT NULL, "
        "committed_at timestamptz NOT NULL DEFAULT now(), index_oid bigint, "
        "history_start jsonb, PRIMARY KEY (revision, batch_id))"
    ).format(_qualified(schema, ledger_table))


def progress_table(ledger_table: str) -> str:
    """The table beside the ledger where each revision's running batch reports how far it has
    read (dvjob.batch_progress): one row per revision, overwritten, outside any batch."""
    return f"{ledger_table[:54]}_progress"


def progress_ddl(schema: str, ledger_table: str) -> sql.Composed:
    return sql.SQL(
        "CREATE TABLE IF NOT EXISTS {} ("
        "revision text PRIMARY KEY, batch_id bigint NOT NULL, records_read bigint NOT NULL, "
        "end_offsets jsonb NOT NULL, started_at timestamptz NOT NULL, "
        "reported_at timestamptz NOT NULL)").format(
            _qualified(schema, progress_table(ledger_table)))


def report_progress_statement(schema: str, ledger_table: str) -> sql.Composed:
    return sql.SQL(
        "INSERT INTO {} (revision, batch_id, records_read, end_offsets, started_at, reported_at) "
        "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (revision) DO UPDATE SET "
        "batch_id = EXCLUDED.batch_id, records_read = EXCLUDED.records_read, "
        "end_offsets = EXCLUDED.end_offsets, started_at = EXCLUDED.started_at, "
        "reported_at = EXCLUDED.reported_at").format(
            _qualified(schema, progress_table(ledger_table)))


def bad_records_column_ddl(schema: str, ledger_table: str) -> sql.Composed:
    """Records of the batch left out by the bad-record policy: in the batch's own ledger row,
    committed with its rows, so the count is exactly-once too.  Added to ledgers that predate
    it (existing rows count 0: the jobs that wrote them could not skip)."""
    return sql.SQL("ALTER TABLE {} ADD COLUMN IF NOT EXISTS bad_records bigint NOT NULL "
                   "DEFAULT 0").format(_qualified(schema, ledger_table))


def record_bad_statement(schema: str, ledger_table: str) -> sql.Composed:
    return sql.SQL("UPDATE {} SET bad_records = %s WHERE revision = %s AND batch_id = %s").format(
        _qualified(schema, ledger_table))


def history_start_column_ddl(schema: str, ledger_table: str) -> sql.Composed:
    """Where the revision's replay began (dvjob.offsets.read_history_start), in every batch's
    row: the operator reads the newest row, and pruning keeps it.  Ledgers that predate it
    gain it (NULL: not recorded by the job that wrote the row)."""
    return sql.SQL("ALTER TABLE {} ADD COLUMN IF NOT EXISTS history_start jsonb").format(
        _qualified(schema, ledger_table))


def ledger_upgrade_ddl(schema: str, ledger_table: str) -> sql.Composed:
    """Ledgers created before index identities were recorded gain the column (NULL rows)."""
    return sql.SQL("ALTER TABLE {} ADD COLUMN IF NOT EXISTS index_oid bigint").format(
        _qualified(schema, ledger_table))


REFUSE_TRUNCATE_FUNCTION = "_dv_refuse_truncate"
REFUSE_TRUNCATE_TRIGGER = "dv_refuse_truncate"


def refuse_truncate_ddl(schema: str, table: str) -> tuple[sql.Composed, sql.Composed]:
    """TRUNCATE keeps a table's OID, so the ledger could not tell it happened: refuse it."""
    function = sql.Identifier(schema, REFUSE_TRUNCATE_FUNCTION)
    return (
        sql.SQL("CREATE OR REPLACE FUNCTION {}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                "RAISE EXCEPTION 'derived views: %.% is the index of a revision whose ledger "
                "counts the batches it holds; TRUNCATE would empty it silently', "
                "TG_TABLE_SCHEMA, TG_TABLE_NAME USING HINT = 'to rebuild the revision, drop "
                "the table together with its ledger rows (or change the view''s content)'; "
                "END $$").format(function),
        sql.SQL("CREATE TRIGGER {} BEFORE TRUNCATE ON {} FOR EACH STATEMENT "
                "EXECUTE FUNCTION {}()").format(sql.Identifier(REFUSE_TRUNCATE_TRIGGER),
                                                _qualified(schema, table), function),
    )


def ledger_head_statement(schema: str, ledger_table: str) -> sql.Composed:
    return sql.SQL("SELECT batch_id, index_oid FROM {} WHERE revision = %s "
                   "ORDER BY batch_id DESC LIMIT 1").format(_qualified(schema, ledger_table))


def _ledger_head(cur: psycopg.Cursor[Any], schema: str, ledger_table: str,
                 revision: str) -> LedgerHead:
    cur.execute(ledger_head_statement(schema, ledger_table), (revision,))
    found = cur.fetchone()
    if found is None:
        return LedgerHead(newest_batch=None, index_oid=None)
    return LedgerHead(newest_batch=int(found[0]),
                      index_oid=None if found[1] is None else int(found[1]))


def _table_oid(cur: psycopg.Cursor[Any], schema: str, table: str) -> int | None:
    cur.execute("SELECT to_regclass(%s)::oid", (_qualified(schema, table).as_string(cur),))
    found = cur.fetchone()
    return None if found is None or found[0] is None else int(found[0])


def index_ddl(schema: str, table: str, layout: TableLayout) -> sql.Composed:
    columns = [sql.SQL("{} {}").format(sql.Identifier(c.name), sql.SQL(c.pg_type))
               for c in layout.columns]
    return sql.SQL("CREATE TABLE IF NOT EXISTS {} ({}, PRIMARY KEY ({}))").format(
        _qualified(schema, table), sql.SQL(", ").join(columns), _idents(layout.primary_key))


def _batch_columns(layout: TableLayout) -> sql.Composed:
    """A batch's columns: the layout's (no constraints), the delete flag, the ordinal."""
    columns = [sql.SQL("{} {}").format(sql.Identifier(c.name), sql.SQL(c.pg_type))
               for c in layout.columns]
    return sql.SQL("{}, {} boolean NOT NULL, {} bigint NOT NULL").format(
        sql.SQL(", ").join(columns), sql.Identifier(DELETED_COLUMN),
        sql.Identifier(ORDINAL_COLUMN))


def batch_table_ddl(layout: TableLayout) -> sql.Composed:
    """A temporary table for one batch's rows, in arrival order; dropped at commit."""
    return sql.SQL("CREATE TEMPORARY TABLE {} ({}) ON COMMIT DROP").format(
        sql.Identifier(BATCH_TABLE), _batch_columns(layout))


def stage_prefix(revision: str) -> str:
    """The staging tables of one revision start with this (a digest: revisions may be long)."""
    return f"{STAGE_PREFIX}{hashlib.sha256(revision.encode()).hexdigest()[:12]}_"


def stage_table_ddl(schema: str, table: str, layout: TableLayout) -> sql.Composed:
    """A staging table the executors fill (dvjob.sinks.postgres.stage): UNLOGGED, as nothing in it needs
    to survive a crash; the merge checks it holds every row written."""
    return sql.SQL("CREATE UNLOGGED TABLE {} ({})").format(_qualified(schema, table),
                                                           _batch_columns(layout))


def projected_text(column: SinkColumn) -> sql.Composable:
    """A staged column as the sink projection had it, so the bad-record policy sees a row with
    a NULL key the same whichever way its batch was written: timestamps as ISO text with an
    offset, nested values as JSON text."""
    name = sql.Identifier(column.name)
    if column.transport == "timestamp_text":
        return sql.SQL("to_char({} AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') || '+00:00'"
                       ).format(name)
    if column.transport == "json_text":
        return sql.SQL("{}::text").format(name)
    return name


def null_key_condition(layout: TableLayout) -> sql.Composed:
    return sql.SQL(" OR ").join(sql.SQL("{} IS NULL").format(sql.Identifier(k))
                                for k in layout.primary_key)


def copy_statement(layout: TableLayout) -> sql.Composed:
    return sql.SQL("COPY {} ({}, {}, {}) FROM STDIN").format(
        sql.Identifier(BATCH_TABLE), _idents(layout.column_names),
        sql.Identifier(DELETED_COLUMN), sql.Identifier(ORDINAL_COLUMN))


def _last_rows(layout: TableLayout, columns: Sequence[str], batch: sql.Composable
               ) -> sql.Composed:
    """Each key's last row of the batch (highest ordinal): the only one that counts."""
    return sql.SQL("SELECT DISTINCT ON ({key}) {cols} FROM {batch} ORDER BY {key}, {ord} DESC"
                   ).format(key=_idents(layout.primary_key), cols=_idents(columns),
                            batch=batch, ord=sql.Identifier(ORDINAL_COLUMN))


def delete_statement(schema: str, table: str, layout: TableLayout,
                     batch: sql.Composable | None = None) -> sql.Composed:
    match = sql.SQL(" AND ").join(
        sql.SQL("t.{k} = l.{k}").format(k=sql.Identifier(k)) for k in layout.primary_key)
    return sql.SQL("DELETE FROM {target} AS t USING ({last}) AS l WHERE l.{deleted} AND {match}"
                   ).format(target=_qualified(schema, table),
                            last=_last_rows(layout, [*layout.primary_key, DELETED_COLUMN],
                                            batch or sql.Identifier(BATCH_TABLE)),
                            deleted=sql.Identifier(DELETED_COLUMN), match=match)


def insert_statement(schema: str, table: str, layout: TableLayout,
                     batch: sql.Composable | None = None) -> sql.Composed:
    """Each key's last row of the batch that is not a delete, into the index."""
    return sql.SQL("INSERT INTO {target} ({cols}) SELECT {cols} FROM ({last}) AS l "
                   "WHERE NOT l.{deleted}").format(
        target=_qualified(schema, table), cols=_idents(layout.column_names),
        last=_last_rows(layout, [*layout.column_names, DELETED_COLUMN],
                        batch or sql.Identifier(BATCH_TABLE)),
        deleted=sql.Identifier(DELETED_COLUMN))


def upsert_statement(schema: str, table: str, layout: TableLayout,
                     batch: sql.Composable | None = None) -> sql.Composed:
    others = [n for n in layout.column_names if n not in layout.primary_key]
    action: sql.Composable
    if others:
        action = sql.SQL("DO UPDATE SET {}").format(sql.SQL(", ").join(
            sql.SQL("{c} = EXCLUDED.{c}").format(c=sql.Identifier(n)) for n in others))
    else:
        action = sql.SQL("DO NOTHING")
    return sql.SQL("{insert} ON CONFLICT ({key}) {action}").format(
        insert=insert_statement(schema, table, layout, batch),
        key=_idents(layout.primary_key), action=action)


MERGE_WORK_MEM = "64MB"
MERGE_WORK_MEM_STATEMENT = (
    "SELECT set_config('work_mem', '" + MERGE_WORK_MEM + "', true) "
    "WHERE pg_size_bytes(current_setting('work_mem')) < pg_size_bytes('" + MERGE_WORK_MEM + "')")
"""For the batch's transaction only, unless the server gives more: each key's last row is
found by sorting the batch, and PostgreSQL's default 4MB sorts a 250k-row batch on disk."""


def claim_statement(schema: str, ledger_table: str) -> sql.Composed:
    return sql.SQL("INSERT INTO {} (revision, batch_id, end_offsets, rows_upserted, rows_deleted, "
                   "index_oid, history_start) VALUES (%s, %s, %s, 0, 0, %s, %s) "
                   "ON CONFLICT (revision, batch_id) DO NOTHING"
                   ).format(_qualified(schema, ledger_table))


def recorded_offsets_statement(schema: str, ledger_table: str) -> sql.Composed:
    return sql.SQL("SELECT end_offsets FROM {} WHERE revision = %s AND batch_id = %s").format(
        _qualified(schema, ledger_table))


def finish_statement(schema: str, ledger_table: str) -> sql.Composed:
    # clock_timestamp(): the moment just before commit, not the (maybe long) batch's start.
    return sql.SQL("UPDATE {} SET rows_upserted = %s, rows_deleted = %s, "
                   "committed_at = clock_timestamp() "
                   "WHERE revision = %s AND batch_id = %s").format(
        _qualified(schema, ledger_table))


class PostgresSink:
    """Writes batches of one revision into its index table, exactly once per batch id
    (dvjob.sinks.registry.Sink)."""

    def __init__(self, *, connect: Connect, schema: str, table: str, ledger_table: str,
                 revision: str, layout: TableLayout,
                 before_commit: Callable[[int], None] | None = None,
                 app_name: str = "dvjob", stage_conninfo: str = "", stage_secret_dir: str = "",
                 owner: dict[str, str] | None = None, target: str = "",
                 bulk_load: bool = True) -> None:
        self._connect = connect
        # A staged batch at least as large as the unserved index loads without its primary
        # key, rebuilt after (dvjob.sinks.postgres.bulk); off only to measure what that gains.
        self.bulk_load = bulk_load
        # The view this job writes for ({namespace, name, uid}); None only for a configuration
        # from before owners were recorded (it may write only into an index with no owner).
        self.owner = owner
        # How the executors connect to stage a large batch: "" is libpq's PG* environment,
        # which the operator sets from the sink Secret for them as for the driver.
        self.stage_conninfo = stage_conninfo
        # Where the executors find the mounted sink Secret ("": that environment instead).
        self.stage_secret_dir = stage_secret_dir
        self.target = target or describe_target({})  # where `connect` goes, for the log
        self.app_name = app_name
        self._before_commit = before_commit  # a failpoint (dvjob.failpoints); None in use
        self.schema = schema
        self.table = table
        self.ledger_table = ledger_table
        self.revision = revision
        self.layout = layout

    def describe(self) -> str:
        return (f"{self.schema}.{self.table} (ledger {self.schema}.{self.ledger_table}) at "
                f"{self.target}")

    def prepare(self) -> None:
        """Create the schema, ledger and index table if missing; check an existing index.

        An index table the ledger says held batches is never re-created: IndexLostError.
        An index table recorded as another view's is refused before anything is written
        (IndexOwnedElsewhereError); one this job creates records its owner in the same
        transaction.
        """
        self._prepare_shared()
        for attempt in range(INDEX_LOCK_ATTEMPTS):
            try:
                existing = self._prepare_index()
                break
            except (psycopg.errors.UniqueViolation, psycopg.errors.DuplicateTable,
                    psycopg.errors.UndefinedTable, psycopg.errors.DeadlockDetected):
                if attempt == INDEX_LOCK_ATTEMPTS - 1:
                    raise
        expected = sorted(self.layout.column_names)
        if existing != expected:
            raise IndexTableMismatchError(
                f"index table {self.schema}.{self.table} exists with columns {existing}, but this "
                f"revision writes {expected}; drop it or use another table name")

    def _prepare_index(self) -> list[str]:
        """One attempt, in one transaction under the index table's lock; its columns."""
        with self._connect() as conn, conn.transaction(), conn.cursor() as cur:
            self._lock_index(cur)
            live_oid = _table_oid(cur, self.schema, self.table)
            recorded = self._check_owner(cur, live_oid)
            check_index(f"{self.schema}.{self.table}", self.revision,
                        _ledger_head(cur, self.schema, self.ledger_table, self.revision),
                        live_oid)
            self._drop_stale_stages(cur)
            if recorded is None and self.owner is not None:
                # A new table, or one from before owners were recorded that the operator
                # judged this view's (it started this job for it): record the owner.
                cur.execute(sql.SQL("COMMENT ON TABLE {} IS {}").format(
                    _qualified(self.schema, self.table), sql.Literal(owner_comment(
                        self.owner["namespace"], self.owner["name"], self.owner["uid"]))))
            _function, trigger = refuse_truncate_ddl(self.schema, self.table)
            cur.execute("SELECT 1 FROM pg_trigger WHERE tgrelid = to_regclass(%s) AND tgname = %s",
                        (_qualified(self.schema, self.table).as_string(cur),
                         REFUSE_TRUNCATE_TRIGGER))
            if cur.fetchone() is None:  # (CREATE OR REPLACE TRIGGER needs PostgreSQL 14)
                cur.execute(trigger)
            cur.execute("SELECT column_name FROM information_schema.columns "
                        "WHERE table_schema = %s AND table_name = %s", (self.schema, self.table))
            return sorted(str(row[0]) for row in cur.fetchall())

    def _lock_index(self, cur: psycopg.Cursor[Any]) -> None:
        """Lock the index table (INDEX_LOCK_MODE), creating it first when there is none yet.

        A table created here is seen by nobody else, and locked by nobody else, until this
        transaction commits; a twin's concurrent CREATE waits for it and then fails with a
        unique violation, and its next attempt waits for this lock. The ledger is read before
        the table is looked for: a batch's row commits only into an existing table, so batches
        recorded while the table is missing mean it was lost (IndexLostError), never created.
        LOCK TABLE names the table: if the operator drops it while this waits, the lock ends
        in `does not exist` and the next attempt creates it afresh (the drop took its ledger
        rows in the same transaction)."""
        head = _ledger_head(cur, self.schema, self.ledger_table, self.revision)
        if _table_oid(cur, self.schema, self.table) is None:
            check_index(f"{self.schema}.{self.table}", self.revision, head, None)
            cur.execute(index_ddl(self.schema, self.table, self.layout))
        cur.execute(sql.SQL("LOCK TABLE {} IN " + INDEX_LOCK_MODE + " MODE").format(
            _qualified(self.schema, self.table)))

    def _check_owner(self, cur: psycopg.Cursor[Any], live_oid: int | None
                     ) -> dict[str, str] | None:
        """The existing table's recorded owner, when it is this job's view; another view's
        (another UID), or any owner for a job that cannot say whose it is, is refused."""
        if live_oid is None:
            return None
        cur.execute("SELECT obj_description(%s, 'pg_class')", (live_oid,))
        found = cur.fetchone()
        recorded = parse_owner(None if found is None else found[0])
        if recorded is None:
            return None
        if self.owner is None or recorded["uid"] != self.owner["uid"]:
            mine = ("this job's configuration names no owner (rendered by an older operator)"
                    if self.owner is None else f"this job runs for {describe_owner(self.owner)}")
            raise IndexOwnedElsewhereError(
                f"index table {self.schema}.{self.table} belongs to {describe_owner(recorded)}, "
                f"but {mine}: refusing to write into it, nothing was written; two views of "
                "the same content and table cannot share an index: give this view another "
                "sink table")
        return recorded

    def _prepare_shared(self) -> None:
        """The schema, the ledger (and its later columns) and the TRUNCATE-refusing function,
        shared by every index of the schema: created without a lock (a twin's identical
        CREATE is a unique violation, retried) and altered only when a column is missing,
        under a short lock_timeout so a reader holding the ledger cannot stall the start."""
        for attempt in range(SHARED_DDL_ATTEMPTS):
            try:
                with self._connect() as conn, conn.transaction(), conn.cursor() as cur:
                    cur.execute(sql.SQL("SET LOCAL lock_timeout = {}").format(
                        sql.Literal(SHARED_DDL_LOCK_TIMEOUT)))
                    cur.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (self.schema,))
                    if cur.fetchone() is None:
                        cur.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(
                            sql.Identifier(self.schema)))
                    if _table_oid(cur, self.schema, self.ledger_table) is None:
                        cur.execute(ledger_ddl(self.schema, self.ledger_table))
                    cur.execute("SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s)"
                                " AND NOT attisdropped",
                                (_qualified(self.schema, self.ledger_table).as_string(cur),))
                    columns = {str(row[0]) for row in cur.fetchall()}
                    if "bad_records" not in columns:
                        cur.execute(bad_records_column_ddl(self.schema, self.ledger_table))
                    if "index_oid" not in columns:
                        cur.execute(ledger_upgrade_ddl(self.schema, self.ledger_table))
                    if "history_start" not in columns:
                        cur.execute(history_start_column_ddl(self.schema, self.ledger_table))
                    if _table_oid(cur, self.schema, progress_table(self.ledger_table)) is None:
                        cur.execute(progress_ddl(self.schema, self.ledger_table))
                    cur.execute("SELECT to_regprocedure(%s)", (
                        f"{_qualified(self.schema, REFUSE_TRUNCATE_FUNCTION).as_string(cur)}()",))
                    found = cur.fetchone()
                    if found is None or found[0] is None:  # another role's is not replaceable
                        cur.execute(refuse_truncate_ddl(self.schema, self.table)[0])
                return
            except (psycopg.errors.UniqueViolation, psycopg.errors.DuplicateObject,
                    psycopg.errors.DuplicateTable, psycopg.errors.DuplicateSchema,
                    psycopg.errors.DuplicateFunction):
                if attempt == SHARED_DDL_ATTEMPTS - 1:
                    raise
            except psycopg.errors.LockNotAvailable:
                raise JobError(
                    f"could not lock the ledger {self.schema}.{self.ledger_table} within "
                    f"{SHARED_DDL_LOCK_TIMEOUT} to add a missing column: a session holds it "
                    "(see pg_locks); the job is restarted and tries again") from None

    def _drop_stale_stages(self, cur: psycopg.Cursor[Any]) -> None:
        """Staging tables an earlier run of this revision left behind (it stopped mid-batch)."""
        cur.execute("SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = "
                    "c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r' AND "
                    "starts_with(c.relname, %s)", (self.schema, stage_prefix(self.revision)))
        for (name,) in cur.fetchall():
            cur.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(_qualified(self.schema, name)))

    def committed_batches(self) -> int:
        """How many batches the ledger holds for this revision (after prepare)."""
        with self._connect() as conn, conn.cursor() as cur:
            cur.execute(sql.SQL("SELECT count(*) FROM {} WHERE revision = %s").format(
                _qualified(self.schema, self.ledger_table)), (self.revision,))
            found = cur.fetchone()
        return int(found[0]) if found else 0

    def report_progress(self, progress: Progress) -> None:
        """The running batch's progress (dvjob.batch_progress), on a connection of its own:
        the batch's own may be in the middle of its transaction."""
        with self._connect() as conn:
            conn.execute(report_progress_statement(self.schema, self.ledger_table), (
                self.revision, progress.batch_id, progress.records_read,
                Jsonb(progress.end_offsets), progress.started_at, progress.reported_at))

    def write_batch(self, batch_id: int, rows: Iterable[Sequence[Any]],
                    end_offsets: EndOffsets, bad: BadRecordHandler = FAIL_ON_NULL_KEY, *,
                    history_start: EndOffsets | None = None) -> BatchOutcome:
        """Apply one batch, or skip it if the ledger already has it.

        `rows` are the layout's columns in order followed by the delete flag;
        it is consumed only when the batch is not skipped.  Any exception rolls
        back everything, ledger row included.  `bad` (the bad-record policy)
        decides about rows with a NULL key and settles the batch's left-out
        records before the commit; without it a NULL key fails the batch.
        A large batch's rows (`FrameRows.parallel`) are staged by the executors
        first (dvjob.sinks.postgres.stage) and merged by the same transaction.  The ledger row records
        `history_start` (None: NULL).
        """
        if not (isinstance(rows, FrameRows) and rows.parallel) or self._has_batch(batch_id):
            return self._apply(batch_id, rows, None, end_offsets, bad, history_start)
        stage = f"{stage_prefix(self.revision)}{uuid.uuid4().hex[:8]}"
        with self._connect() as conn:
            conn.execute(stage_table_ddl(self.schema, stage, self.layout))
        try:
            copier = PartitionCopier(schema=self.schema, table=stage,
                                     columns=self.layout.column_names, deleted=DELETED_COLUMN,
                                     ordinal=ORDINAL_COLUMN, application_name=self.app_name,
                                     conninfo=self.stage_conninfo,
                                     secret_dir=self.stage_secret_dir)
            from pyspark import cloudpickle  # the executors may not have the dvjob package
            cloudpickle.register_pickle_by_value(pg_stage)  # type: ignore[no-untyped-call]
            from dvjob.sinks.postgres.copy_text import copy_text_lines
            lines = copy_text_lines(rows.frame)
            if rows.one_task:
                lines = lines.coalesce(1)  # no shuffle: the partitions, in order, in one task
            started = time.monotonic()
            written = lines.rdd.mapPartitionsWithIndex(copier).collect()
            staged_s = time.monotonic() - started
            outcome = self._apply(batch_id, (), (stage, sum(n for _, n in written)),
                                  end_offsets, bad, history_start)
            return replace(outcome, seconds={"stage_seconds": round(staged_s, 3),
                                             **outcome.seconds})
        finally:
            with self._connect() as conn:
                conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(
                    _qualified(self.schema, stage)))

    def _has_batch(self, batch_id: int) -> bool:
        with self._connect() as conn:
            found = conn.execute(recorded_offsets_statement(self.schema, self.ledger_table),
                                 (self.revision, batch_id)).fetchone()
        return found is not None

    def _apply(self, batch_id: int, rows: Iterable[Sequence[Any]], staged: tuple[str, int] | None,
               end_offsets: EndOffsets, bad: BadRecordHandler,
               history_start: EndOffsets | None = None) -> BatchOutcome:
        """The batch's transaction: rows from `rows`, or from the staging table `staged`
        (name, rows the executors wrote)."""
        started = time.monotonic()
        with self._connect() as conn, conn.transaction(), conn.cursor() as cur:
            live_oid = _table_oid(cur, self.schema, self.table)
            check_index(f"{self.schema}.{self.table}", self.revision,
                        _ledger_head(cur, self.schema, self.ledger_table, self.revision), live_oid)
            cur.execute(claim_statement(self.schema, self.ledger_table),
                        (self.revision, batch_id, Jsonb(end_offsets), live_oid,
                         None if history_start is None else Jsonb(history_start)))
            if cur.rowcount == 0:
                cur.execute(recorded_offsets_statement(self.schema, self.ledger_table),
                            (self.revision, batch_id))
                found = cur.fetchone()
                recorded = found[0] if found else None
                if recorded != end_offsets:
                    raise LedgerMismatchError(
                        f"batch {batch_id} of revision {self.revision} is in the ledger with end "
                        f"offsets {recorded}, but the checkpoint now says {end_offsets}: the "
                        "checkpoint does not belong to this index (was it reset?); drop the "
                        "index table and this revision's ledger rows, or restore the checkpoint")
                return BatchOutcome(batch_id, True, 0, 0, end_offsets)
            source: sql.Composable
            if staged is None:
                cur.execute(batch_table_ddl(self.layout))
                self._copy_rows(cur, batch_id, rows, bad)
                source = sql.Identifier(BATCH_TABLE)
            else:
                source = self._take_stage(cur, batch_id, *staged, bad)
            left_out = bad.settle(batch_id, end_offsets) if bad is not None else 0
            if left_out:
                cur.execute(record_bad_statement(self.schema, self.ledger_table),
                            (left_out, self.revision, batch_id))
            cur.execute(MERGE_WORK_MEM_STATEMENT)
            target = _qualified(self.schema, self.table)
            bulk = (pg_bulk.claim(cur, target, live_oid, staged[1])
                    if staged is not None and self.bulk_load and live_oid is not None else None)
            seconds: dict[str, float] = {}
            merged = time.monotonic()
            deleted = 0
            if self._any_deleted(cur, source):
                cur.execute(delete_statement(self.schema, self.table, self.layout, source))
                deleted = max(cur.rowcount, 0)
            if bulk is not None:
                upserted = pg_bulk.merge(
                    cur, target, self.layout, bulk, source,
                    insert_statement(self.schema, self.table, self.layout, source))
                seconds["bulk_merge_seconds"] = round(time.monotonic() - merged, 3)
            else:
                cur.execute(upsert_statement(self.schema, self.table, self.layout, source))
                upserted = max(cur.rowcount, 0)
            cur.execute(finish_statement(self.schema, self.ledger_table),
                        (upserted, deleted, self.revision, batch_id))
            if self._before_commit is not None:
                self._before_commit(batch_id)
        return BatchOutcome(batch_id, False, upserted, deleted, end_offsets, left_out,
                            {**seconds,
                             "transaction_seconds": round(time.monotonic() - started, 3)})

    def _copy_rows(self, cur: psycopg.Cursor[Any], batch_id: int,
                   rows: Iterable[Sequence[Any]], bad: BadRecordHandler) -> None:
        width = len(self.layout.columns) + 1
        keys = self.layout.key_positions
        with cur.copy(copy_statement(self.layout)) as copy:
            for ordinal, row in enumerate(rows):
                if len(row) != width:
                    raise JobError(f"batch {batch_id}: row has {len(row)} values, expected {width}")
                null = next((p for p in keys if row[p] is None), None)
                if null is not None:
                    self._null_key(batch_id, null, row, bad)
                    continue
                copy.write_row((*row[:-1], bool(row[-1]), ordinal))

    def _any_deleted(self, cur: psycopg.Cursor[Any], source: sql.Composable) -> bool:
        """Whether any row of the batch is a delete: when none is (always, without a delete
        flag), the DELETE and its pass over the batch's last rows are skipped."""
        if not self.layout.has_delete_flag:
            return False
        cur.execute(sql.SQL("SELECT EXISTS (SELECT 1 FROM {} WHERE {})").format(
            source, sql.Identifier(DELETED_COLUMN)))
        found = cur.fetchone()
        return bool(found and found[0])

    def _null_key(self, batch_id: int, position: int, row: Sequence[Any],
                  bad: BadRecordHandler) -> None:
        bad.null_key(batch_id, self.layout.column_names[position], row)

    def _take_stage(self, cur: psycopg.Cursor[Any], batch_id: int, stage: str, written: int,
                    bad: BadRecordHandler) -> sql.Composable:
        """The staging table, checked complete, its rows with a NULL key handed to the policy
        (in batch order) and removed."""
        target = _qualified(self.schema, stage)
        cur.execute(sql.SQL("SELECT count(*) FROM {}").format(target))
        found = cur.fetchone()
        held = int(found[0]) if found else 0
        if held != written:
            raise JobError(
                f"batch {batch_id}: staging table {self.schema}.{stage} holds {held} rows but "
                f"the executors wrote {written} (a database restart empties UNLOGGED tables); "
                "the batch was not applied and is retried from the checkpoint")
        nulls = null_key_condition(self.layout)
        cur.execute(sql.SQL("SELECT {}, {} FROM {} WHERE {} ORDER BY {}").format(
            sql.SQL(", ").join(projected_text(c) for c in self.layout.columns),
            sql.Identifier(DELETED_COLUMN), target, nulls, sql.Identifier(ORDINAL_COLUMN)))
        null_rows = cur.fetchall()
        for row in null_rows:
            self._null_key(batch_id, next(p for p in self.layout.key_positions if row[p] is None),
                           row, bad)
        if null_rows:
            cur.execute(sql.SQL("DELETE FROM {} WHERE {}").format(target, nulls))
        return target


def connect_with(application_name: str, keywords: Mapping[str, str]) -> Connect:
    """Connections by these libpq keywords (the mounted sink Secret's), and by libpq's PG*
    environment for what they leave out (all of it, for manifests from before mounts)."""
    name = {} if os.environ.get("PGAPPNAME") else {"application_name": application_name}
    conninfo = psycopg.conninfo.make_conninfo("", **name, **keywords)

    def connect() -> psycopg.Connection[Any]:
        return psycopg.connect(conninfo)
    return connect


def describe_target(keywords: Mapping[str, str]) -> str:
    """Where the connection goes, for a log line (never the password)."""
    shown = ("host", "port", "dbname", "user", "sslmode")
    parts = [f"{name}={keywords[name]}" for name in shown if keywords.get(name)]
    parts += [f"{name.lower()}={os.environ[name]}" for name in
              ("PGHOST", "PGPORT", "PGDATABASE", "PGUSER", "PGSSLMODE")
              if os.environ.get(name) and not keywords]
    return " ".join(parts) or "libpq defaults"
