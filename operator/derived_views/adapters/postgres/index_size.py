"""How much room a revision's index table takes in PostgreSQL, read for `dv plan`."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from derived_views.adapters.postgres.sink import PgConnection
from derived_views.adapters.sink_contract import SinkUnavailable


def table_bytes(conn: psycopg.Connection[Any], schema: str, table: str) -> int | None:
    """`pg_total_relation_size` of the table (its heap, TOAST and indexes); None when there is
    no such table. Found through the catalog, so no name is parsed as SQL."""
    row = conn.execute(
        "SELECT pg_total_relation_size(c.oid) FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relname = %s AND c.relkind = 'r'", (schema, table)).fetchone()
    return None if row is None else int(row[0])


def read_table_bytes(creds: PgConnection, schema: str, table: str, timeout_seconds: int
                     ) -> int | None:
    """`table_bytes` on a connection of its own, connecting and querying within
    `timeout_seconds` each; SinkUnavailable when the database does not answer."""
    with creds.connect(autocommit=True, connect_timeout=timeout_seconds) as conn:
        try:
            conn.execute(sql.SQL("SET statement_timeout = {}").format(
                sql.Literal(f"{timeout_seconds * 1000}ms")))
            return table_bytes(conn, schema, table)
        except psycopg.Error as exc:
            raise SinkUnavailable(f"reading the size of {schema}.{table} in "
                                  f"{creds.host}:{creds.port}/{creds.database} failed: "
                                  f"{str(exc).splitlines()[0] if str(exc) else exc!r}") from None
