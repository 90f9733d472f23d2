"""The PostgreSQL sink as the operator sees it: ledger positions, alias, indexes.

The alias is a VIEW named after the table base; it selects from exactly one
revision's index table.  Switching it is one transaction (DROP + CREATE VIEW,
since a new revision may have other columns): readers blocked on the lock
re-resolve the name and see the new index, so none gets an error.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from derived_views.core.observed import LedgerPosition

LEDGER_TABLE = "dv_ledger"


class SinkUnavailable(Exception):
    """The sink database cannot be reached (message carries no credentials)."""


@dataclass(frozen=True)
class PgConnection:
    """Connection parameters from the view's sink Secret (never logged)."""

    host: str
    port: int
    database: str
    user: str
    password: str
    sslmode: str = "prefer"

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
                   password=data["password"], sslmode=data.get("sslmode") or "prefer")

    def connect(self, *, autocommit: bool = False) -> psycopg.Connection[Any]:
        try:
            return psycopg.connect(host=self.host, port=self.port, dbname=self.database,
                                   user=self.user, password=self.password, sslmode=self.sslmode,
                                   connect_timeout=10, autocommit=autocommit)
        except psycopg.OperationalError as exc:
            raise SinkUnavailable(f"cannot connect to {self.host}:{self.port}/{self.database}: "
                                  f"{str(exc).splitlines()[0] if str(exc) else exc!r}") from None


RATE_WINDOW_SECONDS = 30
"""How far back the earlier ledger row is taken from, to measure a revision's commit rate."""


def ledger_positions(conn: psycopg.Connection[Any], schema: str, revisions: Iterable[str],
                     ledger: str = LEDGER_TABLE) -> dict[str, LedgerPosition]:
    """Newest ledger row per revision, with an earlier row for the commit rate.

    The earlier row is the newest one committed at least RATE_WINDOW_SECONDS before the
    newest, or the revision's first row when it is younger than that. Revisions with no
    batch yet are absent.
    """
    wanted = sorted(set(revisions))
    if not wanted or not _relation_exists(conn, schema, ledger):
        return {}
    table = sql.Identifier(schema, ledger)
    query = sql.SQL(
        "WITH newest AS (SELECT DISTINCT ON (revision) revision, batch_id, end_offsets, "
        "committed_at FROM {table} WHERE revision = ANY(%(wanted)s) "
        "ORDER BY revision, batch_id DESC) "
        "SELECT n.revision, n.batch_id, n.end_offsets, n.committed_at, "
        "e.batch_id, e.end_offsets, e.committed_at FROM newest n LEFT JOIN LATERAL ("
        "  SELECT l.batch_id, l.end_offsets, l.committed_at FROM {table} l"
        "  WHERE l.revision = n.revision AND l.batch_id < n.batch_id"
        "  ORDER BY (l.committed_at <= n.committed_at - %(window)s * interval '1 second') DESC,"
        "   CASE WHEN l.committed_at <= n.committed_at - %(window)s * interval '1 second'"
        "   THEN -l.batch_id ELSE l.batch_id END"
        "  LIMIT 1) e ON true"
    ).format(table=table)
    out: dict[str, LedgerPosition] = {}
    for (revision, batch_id, offsets, committed_at, earlier_id, earlier_offsets,
         earlier_at) in conn.execute(query, {"wanted": wanted, "window": RATE_WINDOW_SECONDS}):
        earlier = None if earlier_id is None else LedgerPosition(
            end_offsets=_flat_offsets(earlier_offsets), committed_at=earlier_at,
            batch_id=int(earlier_id))
        out[revision] = LedgerPosition(end_offsets=_flat_offsets(offsets),
                                       committed_at=committed_at, batch_id=int(batch_id),
                                       earlier=earlier)
    return out


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
    index, unlike count(*); it feeds the rows gauge, never a decision.
    """
    rows = conn.execute(
        "SELECT c.relname, GREATEST(COALESCE(s.n_live_tup, 0), c.reltuples::bigint, 0) "
        "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid "
        "WHERE n.nspname = %s AND c.relkind IN ('r', 'p') AND c.relname = ANY(%s)",
        (schema, sorted(set(names)))).fetchall()
    return {str(r[0]): int(r[1]) for r in rows}


def alias_target(conn: psycopg.Connection[Any], schema: str, alias: str) -> str | None:
    """The index table the alias view selects from, or None if there is no alias."""
    rows = conn.execute(
        "SELECT table_name FROM information_schema.view_table_usage "
        "WHERE view_schema = %s AND view_name = %s", (schema, alias)).fetchall()
    if not rows:
        return None
    if len(rows) > 1:
        raise RuntimeError(f"alias {schema}.{alias} reads {len(rows)} tables; expected one")
    return str(rows[0][0])


class AliasConflict(Exception):
    """The alias no longer points where the caller believed: someone else moved it."""


_OWNER = re.compile(r"derivedviews\.io owner=(\S+?);")


def alias_owner(conn: psycopg.Connection[Any], schema: str, alias: str) -> str | None:
    """`namespace/name` of the DerivedView whose alias this is (from the view's comment).

    None when there is no alias or it predates ownership comments. Two views
    naming the same sink table would otherwise take turns switching one alias.
    """
    row = conn.execute("SELECT obj_description(to_regclass(%s), 'pg_class')",
                       (sql.Identifier(schema, alias).as_string(conn),)).fetchone()
    found = _OWNER.search(str(row[0] or "")) if row else None
    return found.group(1) if found else None


def switch_alias(conn: psycopg.Connection[Any], schema: str, alias: str, to_index: str,
                 expected_from: str | None, *, owner: str, lock_timeout_ms: int = 5000) -> None:
    """Point the alias at `to_index` atomically, if it still points at `expected_from`.

    Idempotent: if the alias already points at `to_index` nothing changes.
    `owner` (`namespace/name` of the view) is recorded in the alias's comment;
    an alias recorded for another view is never touched.
    """
    with conn.transaction():
        conn.execute(sql.SQL("SET LOCAL lock_timeout = {}").format(sql.Literal(f"{lock_timeout_ms}ms")))
        claimed = alias_owner(conn, schema, alias)
        if claimed not in (None, owner):
            raise AliasConflict(f"alias {schema}.{alias} belongs to DerivedView {claimed}")
        current = alias_target(conn, schema, alias)
        if current == to_index and claimed == owner:
            return
        if current not in (expected_from, to_index):
            raise AliasConflict(f"alias {schema}.{alias} points at {current!r}, "
                                f"expected {expected_from!r}")
        if not existing_tables(conn, schema, [to_index]):
            raise RuntimeError(f"index {schema}.{to_index} does not exist; refusing to switch")
        if current != to_index:
            if current is not None:
                conn.execute(sql.SQL("DROP VIEW {}.{}").format(sql.Identifier(schema),
                                                              sql.Identifier(alias)))
            conn.execute(sql.SQL("CREATE VIEW {}.{} AS SELECT * FROM {}.{}").format(
                sql.Identifier(schema), sql.Identifier(alias), sql.Identifier(schema),
                sql.Identifier(to_index)))
        conn.execute(sql.SQL("COMMENT ON VIEW {}.{} IS {}").format(
            sql.Identifier(schema), sql.Identifier(alias),
            sql.Literal(f"derivedviews.io owner={owner}; serving index {to_index}")))


def drop_alias(conn: psycopg.Connection[Any], schema: str, alias: str) -> None:
    with conn.transaction():
        conn.execute(sql.SQL("DROP VIEW IF EXISTS {}.{}").format(sql.Identifier(schema),
                                                                 sql.Identifier(alias)))


def drop_index(conn: psycopg.Connection[Any], schema: str, index: str, revision: str,
               ledger: str = LEDGER_TABLE) -> None:
    """Drop a revision's index table and its ledger rows; refuses the alias's target."""
    with conn.transaction():
        for view in conn.execute(
                "SELECT view_name FROM information_schema.view_table_usage "
                "WHERE table_schema = %s AND table_name = %s", (schema, index)).fetchall():
            raise RuntimeError(f"index {schema}.{index} is served by view {view[0]}; not dropping")
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}.{}").format(sql.Identifier(schema),
                                                                  sql.Identifier(index)))
        if _relation_exists(conn, schema, ledger):
            conn.execute(sql.SQL("DELETE FROM {}.{} WHERE revision = %s").format(
                sql.Identifier(schema), sql.Identifier(ledger)), (revision,))
