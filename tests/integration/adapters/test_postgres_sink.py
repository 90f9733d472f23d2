"""The operator's PostgreSQL adapter against real PostgreSQL: ledger, alias switch, drop."""

from __future__ import annotations

import datetime as dt
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from derived_views.adapters import postgres_sink as pg


@pytest.fixture()
def schema(stack: Any) -> Iterator[str]:
    name = f"it_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(stack.pg_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"')
    yield name
    with psycopg.connect(stack.pg_dsn, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA "{name}" CASCADE')


@pytest.fixture()
def conn(stack: Any) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(stack.pg_dsn, autocommit=True) as c:
        yield c


def _ledger(conn: psycopg.Connection[Any], schema: str) -> None:
    conn.execute(f'CREATE TABLE "{schema}".dv_ledger (revision text, batch_id bigint, '
                 "end_offsets jsonb, rows_upserted bigint DEFAULT 0, rows_deleted bigint DEFAULT 0, "
                 "committed_at timestamptz DEFAULT now(), PRIMARY KEY (revision, batch_id))")


def test_ledger_positions_take_the_newest_batch_per_revision(conn: Any, schema: str) -> None:
    assert pg.ledger_positions(conn, schema, ["a"]) == {}  # no ledger table yet
    _ledger(conn, schema)
    conn.execute(f'INSERT INTO "{schema}".dv_ledger (revision, batch_id, end_offsets, committed_at) '
                 "VALUES ('a', 0, '{\"t\": {\"0\": 5, \"1\": 7}}', '2026-01-01T00:00:00Z'), "
                 "('a', 1, '{\"t\": {\"0\": 9, \"1\": 7}}', '2026-01-01T00:00:05Z'), "
                 "('b', 0, '{\"t\": {\"0\": 1}}', '2026-01-01T00:00:01Z')")
    got = pg.ledger_positions(conn, schema, ["a", "b", "c"])
    assert set(got) == {"a", "b"}
    assert got["a"].batch_id == 1
    assert got["a"].end_offsets == {("t", 0): 9, ("t", 1): 7}
    assert got["a"].committed_at == dt.datetime(2026, 1, 1, 0, 0, 5, tzinfo=dt.UTC)
    assert got["b"].end_offsets == {("t", 0): 1}


def test_switch_alias_is_guarded_and_idempotent(conn: Any, schema: str) -> None:
    conn.execute(f'CREATE TABLE "{schema}".v__r1 (k text PRIMARY KEY, n int)')
    conn.execute(f'CREATE TABLE "{schema}".v__r2 (k text PRIMARY KEY, n int, extra text)')
    conn.execute(f"INSERT INTO \"{schema}\".v__r1 VALUES ('a', 1)")
    conn.execute(f"INSERT INTO \"{schema}\".v__r2 VALUES ('a', 2, 'x')")
    assert pg.alias_target(conn, schema, "v") is None
    with pytest.raises(RuntimeError, match="does not exist"):
        pg.switch_alias(conn, schema, "v", "v__missing", None, owner="ns/a")
    pg.switch_alias(conn, schema, "v", "v__r1", None, owner="ns/a")
    assert pg.alias_target(conn, schema, "v") == "v__r1"
    assert conn.execute(f'SELECT n FROM "{schema}".v').fetchall() == [(1,)]
    with pytest.raises(pg.AliasConflict):
        pg.switch_alias(conn, schema, "v", "v__r2", "v__other", owner="ns/a")
    pg.switch_alias(conn, schema, "v", "v__r2", "v__r1", owner="ns/a")  # new columns are fine
    pg.switch_alias(conn, schema, "v", "v__r2", "v__r1", owner="ns/a")  # already there: no-op
    assert conn.execute(f'SELECT n, extra FROM "{schema}".v').fetchall() == [(2, "x")]
    with pytest.raises(RuntimeError, match="served by view"):
        pg.drop_index(conn, schema, "v__r2", "r2")
    pg.drop_index(conn, schema, "v__r1", "r1")
    assert set(pg.existing_tables(conn, schema, ["v__r1", "v__r2"])) == {"v__r2"}


def test_readers_see_no_error_while_the_alias_switches(stack: Any, conn: Any, schema: str) -> None:
    for rev in ("r1", "r2"):
        conn.execute(f'CREATE TABLE "{schema}"."v__{rev}" (k int PRIMARY KEY, rev text)')
        conn.execute(f"INSERT INTO \"{schema}\".\"v__{rev}\" SELECT g, '{rev}' FROM generate_series(1, 1000) g")
    pg.switch_alias(conn, schema, "v", "v__r1", None, owner="ns/a")
    errors: list[str] = []
    stalls: list[float] = []
    seen: set[str] = set()
    stop = threading.Event()

    def reader() -> None:
        with psycopg.connect(stack.pg_dsn, autocommit=True) as rc:
            while not stop.is_set():
                t = time.perf_counter()
                try:
                    rows = rc.execute(f'SELECT rev, count(*) FROM "{schema}".v GROUP BY rev').fetchall()
                    if len(rows) != 1 or rows[0][1] != 1000:
                        errors.append(f"inconsistent read {rows}")
                    seen.add(rows[0][0])
                except psycopg.Error as exc:
                    errors.append(repr(exc))
                stalls.append(time.perf_counter() - t)

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for th in threads:
        th.start()
    current = "v__r1"
    for _ in range(40):
        target = "v__r2" if current == "v__r1" else "v__r1"
        with psycopg.connect(stack.pg_dsn, autocommit=True) as sc:
            pg.switch_alias(sc, schema, "v", target, current, owner="ns/a")
        current = target
    stop.set()
    for th in threads:
        th.join(timeout=30)
    assert errors == []
    assert seen == {"r1", "r2"}
    assert len(stalls) > 40


def test_existing_tables_report_the_row_estimate_after_analyze(conn: Any, schema: str) -> None:
    conn.execute(f'CREATE TABLE "{schema}"."est__r1" (k int PRIMARY KEY)')
    conn.execute(f'INSERT INTO "{schema}"."est__r1" SELECT g FROM generate_series(1, 1234) g')
    conn.execute(f'ANALYZE "{schema}"."est__r1"')
    assert pg.existing_tables(conn, schema, ["est__r1", "est__r2"]) == {"est__r1": 1234}


def test_an_alias_owned_by_another_view_is_never_switched(conn: Any, schema: str) -> None:
    for rev in ("r1", "r2"):
        conn.execute(f'CREATE TABLE "{schema}"."own__{rev}" (k int)')
    assert pg.alias_owner(conn, schema, "own") is None  # no alias yet
    pg.switch_alias(conn, schema, "own", "own__r1", None, owner="shop/orders")
    assert pg.alias_owner(conn, schema, "own") == "shop/orders"
    with pytest.raises(pg.AliasConflict, match="belongs to DerivedView shop/orders"):
        pg.switch_alias(conn, schema, "own", "own__r2", "own__r1", owner="billing/orders")
    assert pg.alias_target(conn, schema, "own") == "own__r1"
    conn.execute(f'COMMENT ON VIEW "{schema}"."own" IS \'made by hand\'')
    assert pg.alias_owner(conn, schema, "own") is None  # unmarked: the next switch claims it
    pg.switch_alias(conn, schema, "own", "own__r1", "own__r1", owner="billing/orders")
    assert pg.alias_owner(conn, schema, "own") == "billing/orders"
