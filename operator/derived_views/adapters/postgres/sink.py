"""The PostgreSQL sink as the operator sees it: ledger positions, alias, indexes.

The alias is a VIEW named after the table base; it selects from exactly one
revision's index table.  Switching it is one transaction: readers blocked on
its lock see the new index once it commits, so none gets an error.  What
people attached to the alias survives the switch (grants, owner, options,
dependent views; see `postgres_alias`): CREATE OR REPLACE VIEW when the new
index keeps the old columns, else DROP + CREATE with owner and grants put back,
refused up front when that would break a dependent or cannot restore them.
`switch_blockers` reports the same refusals to the planner before it tries.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from derived_views.adapters.postgres import alias as postgres_alias
from derived_views.adapters.postgres.alias import SwitchRefused
from derived_views.adapters.sink_contract import (
    LEDGER_KEEP_BATCHES,
    RATE_WINDOW_SECONDS,
    AliasConflict,
    SinkUnavailable,
    SwitchDeferred,
    wait_until_level,
)
from derived_views.core.cutover.monotonic import Guard
from derived_views.core.naming import LEDGER_TABLE, progress_table
from derived_views.core.observed import IndexOwner, LedgerPosition, SwitchBlocker
from derived_views.core.ownership import same_view

APPLICATION_NAME = "derived-views-operator"
"""How the operator's sessions show in pg_stat_activity (DBAs count and kill by it)."""
CONNECT_TIMEOUT_SECONDS = 10
STATEMENT_TIMEOUT_MS = 30_000
LOCK_TIMEOUT_MS = 10_000
SESSION_OPTIONS = f"-c statement_timeout={STATEMENT_TIMEOUT_MS} -c lock_timeout={LOCK_TIMEOUT_MS}"
"""Every statement of the operator's sessions ends within bounds: a lock held by a reader or a
hung server fails the pass (it is retried) instead of holding the view's lock and a worker
thread for good; keepalives and tcp_user_timeout end a connection whose peer vanished. The
alias switch sets a shorter lock_timeout of its own."""


@dataclass(frozen=True)
class PgConnection:
    """Connection parameters from the view's sink Secret (never logged)."""

    host: str
    port: int
    database: str
    user: str
    password: str
    sslmode: str = "prefer"
    check_role: str | None = None
    """Optional `checkRole`: a role without write privileges the cutover checks run as."""

    @classmethod
    def from_secret_data(cls, data: Mapping[str, str]) -> PgConnection:
        missing = [k for k in ("host", "database", "user", "password") if not data.get(k)]
        if missing:
            raise ValueError(f"sink secret is missing key(s): {', '.join(missing)}")
        try:
            port = int(data.get("port") or 5432)
        except ValueError:
            raise ValueError(f"sink secret key 'port' is not a number: {data.get('port')!r}") from None
        return cls(host=data["host"], port=port, database=data["database"], user=data["user"],
                   password=data["password"], sslmode=data.get("sslmode") or "prefer",
                   check_role=data.get("checkRole") or None)

    def connect(self, *, autocommit: bool = False,
                connect_timeout: int = CONNECT_TIMEOUT_SECONDS) -> psycopg.Connection[Any]:
        try:
            return psycopg.connect(host=self.host, port=self.port, dbname=self.database,
                                   user=self.user, password=self.password, sslmode=self.sslmode,
                                   connect_timeout=connect_timeout,
                                   options=SESSION_OPTIONS, keepalives=1,
                                   keepalives_idle=10, keepalives_interval=5,
                                   keepalives_count=3, tcp_user_timeout=30_000,
                                   # not the role's default: an encoding such as SJIS sends
                                   # text the server reads otherwise (a backslash in ¥)
                                   client_encoding="UTF8",
                                   application_name=APPLICATION_NAME, autocommit=autocommit)
        except psycopg.OperationalError as exc:
            raise SinkUnavailable(f"cannot connect to {self.host}:{self.port}/{self.database}: "
                                  f"{str(exc).splitlines()[0] if str(exc) else exc!r}") from None


def ledger_positions(conn: psycopg.Connection[Any], schema: str, revisions: Iterable[str],
                     ledger: str = LEDGER_TABLE) -> dict[str, LedgerPosition]:
    """Newest ledger row per revision (with where the revision's replay began, which the job
    writes in every row), with an earlier row for the commit rate.

    The earlier row is the newest one committed at least RATE_WINDOW_SECONDS before the
    newest, or the revision's first row when it is younger than that. Revisions with no
    batch yet are absent.
    """
    wanted = sorted(set(revisions))
    if not wanted or not _relation_exists(conn, schema, ledger):
        return {}
    table = sql.Identifier(schema, ledger)
    # Ledgers written by jobs from before index identities (or history starts) were recorded
    # lack the column.
    present = _columns(conn, schema, ledger, ("index_oid", "history_start"))
    oid = sql.SQL("index_oid" if "index_oid" in present else "NULL::bigint AS index_oid")
    history = sql.SQL("history_start" if "history_start" in present
                      else "NULL::jsonb AS history_start")
    query = sql.SQL(
        "WITH newest AS (SELECT DISTINCT ON (revision) revision, batch_id, end_offsets, "
        "committed_at, {oid}, {history} FROM {table} WHERE revision = ANY(%(wanted)s) "
        "ORDER BY revision, batch_id DESC) "
        "SELECT n.revision, n.batch_id, n.end_offsets, n.committed_at, "
        "e.batch_id, e.end_offsets, e.committed_at, n.index_oid, n.history_start "
        "FROM newest n LEFT JOIN LATERAL ("
        "  SELECT l.batch_id, l.end_offsets, l.committed_at FROM {table} l"
        "  WHERE l.revision = n.revision AND l.batch_id < n.batch_id"
        "  ORDER BY (l.committed_at <= n.committed_at - %(window)s * interval '1 second') DESC,"
        "   CASE WHEN l.committed_at <= n.committed_at - %(window)s * interval '1 second'"
        "   THEN -l.batch_id ELSE l.batch_id END"
        "  LIMIT 1) e ON true"
    ).format(table=table, oid=oid, history=history)
    out: dict[str, LedgerPosition] = {}
    for (revision, batch_id, offsets, committed_at, earlier_id, earlier_offsets,
         earlier_at, index_oid, history_start) in conn.execute(
             query, {"wanted": wanted, "window": RATE_WINDOW_SECONDS}):
        earlier = None if earlier_id is None else LedgerPosition(
            end_offsets=_flat_offsets(earlier_offsets), committed_at=earlier_at,
            batch_id=int(earlier_id))
        out[revision] = LedgerPosition(end_offsets=_flat_offsets(offsets),
                                       committed_at=committed_at, batch_id=int(batch_id),
                                       earlier=earlier,
                                       index_oid=None if index_oid is None else int(index_oid),
                                       history_start=None if history_start is None
                                       else _flat_offsets(history_start))
    return out


def prune_ledger(conn: psycopg.Connection[Any], schema: str, revisions: Iterable[str],
                 ledger: str = LEDGER_TABLE, keep_batches: int = LEDGER_KEEP_BATCHES) -> int:
    """Delete ledger rows of `revisions` that neither resuming nor the rate need; returns
    how many went.

    The job re-runs at most its last batch after a failure and skips it by finding that
    batch's row (the newest); `ledger_positions` reads the newest row and the newest one
    at least RATE_WINDOW_SECONDS older. Kept per revision: everything from that earlier
    row on, and at least the newest `keep_batches`; a revision with no row that old keeps
    all (they are all younger than the window). Done by the operator rather than in the
    job's batch transaction: the rule follows what the operator reads, and it also covers
    revisions whose job is stopped (a retiring index kept for rollback).
    """
    wanted = sorted(set(revisions))
    if not wanted or not _relation_exists(conn, schema, ledger):
        return 0
    table = sql.Identifier(schema, ledger)
    cuts = sql.SQL(
        "WITH newest AS (SELECT DISTINCT ON (revision) revision, batch_id, committed_at "
        "FROM {table} WHERE revision = ANY(%(wanted)s) ORDER BY revision, batch_id DESC), "
        "cut AS (SELECT n.revision, n.batch_id AS newest, ("
        "  SELECT max(l.batch_id) FROM {table} l WHERE l.revision = n.revision"
        "  AND l.batch_id < n.batch_id"
        "  AND l.committed_at <= n.committed_at - %(window)s * interval '1 second') AS earlier "
        "FROM newest n) "
        "SELECT c.revision, LEAST(c.earlier, c.newest - %(keep)s) AS keep_from, ("
        "  SELECT min(l.batch_id) FROM {table} l WHERE l.revision = c.revision"
        "  AND l.batch_id >= LEAST(c.earlier, c.newest - %(keep)s)) AS oldest_kept "
        "FROM cut c WHERE c.earlier IS NOT NULL"
    ).format(table=table)
    # Bad-record counts live in the rows (the job writes them with each batch): what a
    # pruned row counted moves into the oldest kept row, in the same transaction, so the
    # per-revision sum the status shows never shrinks. The newest row (the job's) is
    # never that row: at least `keep_batches` newer ones stay.
    folds_counts = _has_column(conn, schema, ledger, "bad_records")
    deleted = 0
    with conn.transaction():
        for revision, keep_from, oldest_kept in conn.execute(
                cuts, {"wanted": wanted, "keep": keep_batches,
                       "window": RATE_WINDOW_SECONDS}).fetchall():
            if oldest_kept is None:
                continue
            if folds_counts:
                conn.execute(sql.SQL(
                    "UPDATE {table} SET bad_records = bad_records + (SELECT coalesce("
                    "sum(bad_records), 0) FROM {table} WHERE revision = %(r)s AND batch_id "
                    "< %(k)s) WHERE revision = %(r)s AND batch_id = %(o)s").format(table=table),
                    {"r": revision, "k": keep_from, "o": oldest_kept})
            cursor = conn.execute(sql.SQL(
                "DELETE FROM {table} WHERE revision = %(r)s AND batch_id < %(k)s").format(
                table=table), {"r": revision, "k": keep_from})
            deleted += max(cursor.rowcount, 0)
    return deleted


def _has_column(conn: psycopg.Connection[Any], schema: str, table: str, column: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attname = %s "
        "AND NOT attisdropped", (sql.Identifier(schema, table).as_string(conn), column)).fetchone()
    return row is not None


def _columns(conn: psycopg.Connection[Any], schema: str, table: str, columns: Iterable[str]
             ) -> set[str]:
    """Which of `columns` the table has, in one query."""
    rows = conn.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attname = ANY(%s) "
        "AND NOT attisdropped", (sql.Identifier(schema, table).as_string(conn), list(columns))
    ).fetchall()
    return {str(r[0]) for r in rows}


def table_oids(conn: psycopg.Connection[Any], schema: str, names: Iterable[str]) -> dict[str, int]:
    """Which of `names` exist as tables, each with its OID: the identity the job's ledger rows
    record, so a table dropped and re-created under the same name is told apart."""
    rows = conn.execute(
        "SELECT c.relname, c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relkind IN ('r', 'p') AND c.relname = ANY(%s)",
        (schema, sorted(set(names)))).fetchall()
    return {str(r[0]): int(r[1]) for r in rows}


OWNER_KEY = "derivedviews.io/owner"
"""The index table's COMMENT the job writes when it creates the table (spark_templates/README.md):
`{"derivedviews.io/owner": {"namespace": ..., "name": ..., "uid": ...}}`."""


def parse_owner(comment: str | None) -> IndexOwner | None:
    """The owner a table's comment records; None for no comment or one that is not ours
    (a table from before owners were recorded, or someone's note)."""
    try:
        found = json.loads(comment or "")
    except ValueError:
        return None
    owner = found.get(OWNER_KEY) if isinstance(found, dict) else None
    if not isinstance(owner, dict):
        return None
    values = [owner.get(k) for k in ("namespace", "name", "uid")]
    if not all(isinstance(v, str) and v for v in values):
        return None
    return IndexOwner(*(str(v) for v in values))


def index_owners(conn: psycopg.Connection[Any], schema: str, names: Iterable[str]
                 ) -> dict[str, IndexOwner]:
    """The recorded owner of each of `names` that exists and has one, in one query."""
    rows = conn.execute(
        "SELECT c.relname, obj_description(c.oid, 'pg_class') FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relkind IN ('r', 'p') AND c.relname = ANY(%s)",
        (schema, sorted(set(names)))).fetchall()
    found = {str(r[0]): parse_owner(r[1]) for r in rows}
    return {name: owner for name, owner in found.items() if owner is not None}


class IndexOwnedElsewhere(RuntimeError):
    """The index records another view as its owner: not dropped."""


def _flat_offsets(offsets: Mapping[str, Mapping[str, int]]) -> dict[tuple[str, int], int]:
    """The ledger's `{topic: {partition: offset}}` as `{(topic, partition): offset}`."""
    return {(topic, int(p)): int(o) for topic, parts in offsets.items() for p, o in parts.items()}


def _relation_exists(conn: psycopg.Connection[Any], schema: str, name: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relname = %s", (schema, name)).fetchone()
    return row is not None


def existing_tables(conn: psycopg.Connection[Any], schema: str, names: Iterable[str]
                    ) -> dict[str, int]:
    """Which of `names` exist, each with PostgreSQL's estimate of its live rows.

    The estimate (statistics, refreshed by autovacuum/analyze) costs nothing on a big
    index, unlike count(*); it feeds the rows gauge and cutover.minRows, a floor against a
    nearly empty first index, never an exact comparison (checks.rowCount counts).
    """
    rows = conn.execute(
        "SELECT c.relname, GREATEST(COALESCE(s.n_live_tup, 0), c.reltuples::bigint, 0) "
        "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid "
        "WHERE n.nspname = %s AND c.relkind IN ('r', 'p') AND c.relname = ANY(%s)",
        (schema, sorted(set(names)))).fetchall()
    return {str(r[0]): int(r[1]) for r in rows}


def alias_target(conn: psycopg.Connection[Any], schema: str, alias: str) -> str | None:
    """The index table the alias view selects from, or None if there is no alias.

    Read from pg_depend, not information_schema (which hides views of roles the
    operator is not a member of).
    """
    view = postgres_alias.relation(conn, schema, alias, kinds="v")
    if view is None:
        return None
    tables = postgres_alias.tables_read_by(conn, view.oid)
    if len(tables) != 1:
        raise RuntimeError(f"alias {schema}.{alias} reads {len(tables)} tables; expected one")
    return tables[0]


def switch_blockers(conn: psycopg.Connection[Any], schema: str, alias: str,
                    indexes: Iterable[str]) -> dict[str, SwitchBlocker]:
    """Why the alias cannot switch to each of `indexes` now (absent: it can). Changes nothing."""
    out: dict[str, SwitchBlocker] = {}
    for index in sorted(set(indexes)):
        try:
            postgres_alias.plan_switch(conn, schema, alias, index)
        except SwitchRefused as refused:
            out[index] = SwitchBlocker(refused.reason, refused.message)
        except RuntimeError:
            continue  # the index vanished meanwhile: nothing to judge
    return out


def drop_blockers(conn: psycopg.Connection[Any], schema: str, alias: str,
                  indexes: Iterable[str]) -> tuple[str, ...]:
    """Objects of others that DROP VIEW / DROP TABLE (without CASCADE) of the alias and the
    indexes would refuse to drop, as PostgreSQL describes them. Changes nothing."""
    found: set[str] = set()
    own: set[str] = set()
    view = postgres_alias.relation(conn, schema, alias, kinds="v")
    if view is not None:
        row = conn.execute("SELECT pg_describe_object('pg_class'::regclass, %s, 0)",
                           (view.oid,)).fetchone()
        own.add(str(row[0]) if row else "")
        found.update(postgres_alias.dependents(conn, view.oid))
    for index in sorted(set(indexes)):
        table = postgres_alias.relation(conn, schema, index, kinds="rp")
        if table is not None:
            found.update(postgres_alias.dependents(conn, table.oid))
    return tuple(sorted(found - own))


_NAME_ONLY_OWNER = re.compile(r"derivedviews\.io owner=([^/\s;]+)/([^/\s;]+);")
"""The alias's comment as operators before UIDs were recorded wrote it."""
SERVING_KEY = "derivedviews.io/serving"
"""Beside OWNER_KEY in the alias's comment: the index it was switched to, for people."""


def alias_comment(owner: IndexOwner, to_index: str) -> str:
    """The alias VIEW's COMMENT: its owner as an index table records one, and its target."""
    return json.dumps({OWNER_KEY: {"namespace": owner.namespace, "name": owner.name,
                                   "uid": owner.uid}, SERVING_KEY: to_index}, sort_keys=True)


def parse_alias_owner(comment: str | None) -> IndexOwner | None:
    """The owner an alias's comment records; uid "" for a comment from before UIDs were
    recorded (judged by name); None for no comment or one that is not ours."""
    owner = parse_owner(comment)
    if owner is not None:
        return owner
    found = _NAME_ONLY_OWNER.search(comment or "")
    return IndexOwner(found.group(1), found.group(2), "") if found else None


def alias_owner(conn: psycopg.Connection[Any], schema: str, alias: str) -> IndexOwner | None:
    """The DerivedView whose alias this is, from the view's comment.

    None when there is no alias or it predates ownership comments. Two views naming the
    same sink table, or a view and the one of its name it replaced, would otherwise take
    turns switching one alias.
    """
    row = conn.execute("SELECT obj_description(to_regclass(%s), 'pg_class')",
                       (sql.Identifier(schema, alias).as_string(conn),)).fetchone()
    return parse_alias_owner(str(row[0]) if row and row[0] is not None else None)


def switch_alias(conn: psycopg.Connection[Any], schema: str, alias: str, to_index: str,
                 expected_from: str | None, *, owner: IndexOwner, lock_timeout_ms: int = 5000,
                 not_behind: Guard | None = None, ledger: str = LEDGER_TABLE) -> None:
    """Point the alias at `to_index` atomically, if it still points at `expected_from`.

    Idempotent: if the alias already points at `to_index` nothing changes.
    `owner` (namespace, name and UID of the view) is recorded in the alias's comment; an
    alias or index recorded for another view (core.ownership.same_view) is never touched,
    and an alias recorded by name only gets the UID. Grants, owner, options
    and dependents of the alias are kept; SwitchRefused (before any change) says
    why not when they cannot be.

    With `not_behind` (core.cutover.monotonic), the serving index is locked in SHARE mode first:
    readers go on, but its job cannot commit a batch (its rows and its ledger row are one
    transaction) until this one ends, so the ledger heads read next are the ones readers see
    until the alias moves. A candidate behind the serving index raises SwitchDeferred, as
    does a serving job that holds its index past the lock timeout.
    """
    if not owner.uid:  # recorded without one, the alias would go to any view of its name
        raise ValueError(f"switching alias {schema}.{alias} needs its view's uid")
    with conn.transaction():
        conn.execute(sql.SQL("SET LOCAL lock_timeout = {}").format(sql.Literal(f"{lock_timeout_ms}ms")))
        claimed = alias_owner(conn, schema, alias)
        if claimed is not None and not same_view(claimed, owner):
            raise AliasConflict(f"alias {schema}.{alias} belongs to {claimed.describe()}, "
                                f"not to {owner.describe()}")
        recorded = index_owners(conn, schema, [to_index]).get(to_index)
        if recorded is not None and not same_view(recorded, owner):
            raise AliasConflict(f"index {schema}.{to_index} belongs to {recorded.describe()}, "
                                f"not to {owner.describe()}")
        current = alias_target(conn, schema, alias)
        if current == to_index and claimed == owner:
            return
        if current not in (expected_from, to_index):
            raise AliasConflict(f"alias {schema}.{alias} points at {current!r}, "
                                f"expected {expected_from!r}")
        if current != to_index and not_behind is not None and current is not None:
            _hold_and_compare(conn, schema, current, not_behind, ledger)
        if current != to_index:
            plan = postgres_alias.plan_switch(conn, schema, alias, to_index)
            postgres_alias.define(conn, schema, alias, to_index, plan)
        conn.execute(sql.SQL("COMMENT ON VIEW {}.{} IS {}").format(
            sql.Identifier(schema), sql.Identifier(alias),
            sql.Literal(alias_comment(owner, to_index))))


def _hold_and_compare(conn: psycopg.Connection[Any], schema: str, serving: str, guard: Guard,
                      ledger: str) -> None:
    """Wait (nothing held) for the candidate to reach the serving ledger, then lock the
    serving index against its job's commits and wait for the candidate to reach the held
    ledger (`wait_until_level`): each statement of this READ COMMITTED transaction sees
    every batch committed before it, and the candidate's job goes on committing meanwhile."""
    def heads() -> dict[str, LedgerPosition]:
        return ledger_positions(conn, schema, (guard.active, guard.candidate), ledger)

    wait_until_level(guard, heads, held=False)
    try:
        conn.execute(sql.SQL("LOCK TABLE {}.{} IN SHARE MODE").format(
            sql.Identifier(schema), sql.Identifier(serving)))
    except psycopg.errors.LockNotAvailable:
        raise SwitchDeferred(f"the serving index {schema}.{serving} stayed locked by a writer "
                             "past the lock timeout; the switch waits for a later pass") from None
    wait_until_level(guard, heads, held=True)


def drop_alias(conn: psycopg.Connection[Any], schema: str, alias: str) -> None:
    with conn.transaction():
        conn.execute(sql.SQL("DROP VIEW IF EXISTS {}.{}").format(sql.Identifier(schema),
                                                                 sql.Identifier(alias)))


def drop_index(conn: psycopg.Connection[Any], schema: str, index: str, revision: str,
               ledger: str = LEDGER_TABLE, *, owner_uid: str) -> None:
    """Drop a revision's index table, its ledger and progress rows; refuses the alias's
    target, and an index recorded for another view than `owner_uid` (read under the DROP's
    own lock, so no owner can be recorded between the check and the drop)."""
    with conn.transaction():
        table = postgres_alias.relation(conn, schema, index, kinds="rp")
        if table is not None:
            conn.execute(sql.SQL("LOCK TABLE {}.{} IN ACCESS EXCLUSIVE MODE").format(
                sql.Identifier(schema), sql.Identifier(index)))
            row = conn.execute("SELECT obj_description(%s, 'pg_class')", (table.oid,)).fetchone()
            recorded = parse_owner(row[0] if row else None)
            if recorded is not None and recorded.uid != owner_uid:
                raise IndexOwnedElsewhere(
                    f"index {schema}.{index} belongs to {recorded.describe()}, not to the view "
                    f"with uid {owner_uid or '(none given)'}; not dropping it or its ledger rows")
        for view in postgres_alias.views_reading(conn, table.oid) if table else ():
            raise RuntimeError(f"index {schema}.{index} is served by view {view}; not dropping")
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}.{}").format(sql.Identifier(schema),
                                                                  sql.Identifier(index)))
        for table_name in (ledger, progress_table(ledger)):
            if _relation_exists(conn, schema, table_name):
                conn.execute(sql.SQL("DELETE FROM {}.{} WHERE revision = %s").format(
                    sql.Identifier(schema), sql.Identifier(table_name)), (revision,))
