"""The operator reads each revision's recorded index identity and the live tables' OIDs."""

from __future__ import annotations

from typing import Any

import psycopg

from derived_views.adapters.postgres import sink as pg


def _oid(conn: psycopg.Connection[Any], schema: str, table: str) -> int:
    row = conn.execute("SELECT %s::regclass::oid", (f'"{schema}"."{table}"',)).fetchone()
    assert row is not None
    return int(row[0])


def test_the_newest_batch_names_its_table_and_a_recreated_table_has_another_oid(
        conn: psycopg.Connection[Any], schema: str) -> None:
    conn.execute(f'CREATE TABLE "{schema}".v__a (k text PRIMARY KEY)')
    first = _oid(conn, schema, "v__a")
    conn.execute(f'CREATE TABLE "{schema}".dv_ledger (revision text, batch_id bigint, '
                 "end_offsets jsonb, rows_upserted bigint DEFAULT 0, rows_deleted bigint "
                 "DEFAULT 0, committed_at timestamptz DEFAULT now(), index_oid bigint, "
                 "PRIMARY KEY (revision, batch_id))")
    conn.execute(f'INSERT INTO "{schema}".dv_ledger (revision, batch_id, end_offsets, index_oid) '
                 "VALUES ('a', 0, '{\"t\": {\"0\": 5}}', %s), ('a', 1, '{\"t\": {\"0\": 9}}', %s), "
                 "('b', 0, '{\"t\": {\"0\": 1}}', NULL)", (first - 1, first))
    got = pg.ledger_positions(conn, schema, ["a", "b"])
    assert got["a"].index_oid == first  # the newest batch's, not the first's
    assert got["b"].index_oid is None
    assert pg.table_oids(conn, schema, ["v__a", "v__b"]) == {"v__a": first}

    conn.execute(f'DROP TABLE "{schema}".v__a')
    assert pg.table_oids(conn, schema, ["v__a"]) == {}
    conn.execute(f'CREATE TABLE "{schema}".v__a (k text PRIMARY KEY)')
    again = pg.table_oids(conn, schema, ["v__a"])["v__a"]
    assert again != first
