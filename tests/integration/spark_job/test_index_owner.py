"""Who owns an index, against a real PostgreSQL: the job records its view on the index table
it creates and refuses, before writing anything, an index recorded for another view; its
start-up lock is the index's own, so nobody stalls every job of a database with one key."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from psycopg import sql

from dvjob.errors import ConfigError
from dvjob.sinks.contract import IndexOwnedElsewhereError
from dvjob.sinks.postgres.sink import (
    Connect,
    PostgresSink,
)
from dvjob.sinks.schema import SinkColumn, TableLayout

pytestmark = pytest.mark.integration

REVISION = "3f9c1a2b4d"
TABLE = f"orders__{REVISION}"
ORDERS = TableLayout(columns=(SinkColumn("order_id", "text"), SinkColumn("amount", "numeric")),
                     primary_key=("order_id",), has_delete_flag=False)
SHOP = {"namespace": "shop", "name": "orders", "uid": "uid-shop"}
BILLING = {"namespace": "billing", "name": "orders", "uid": "uid-billing"}
OLD_DATABASE_WIDE_KEY = 0x64765F6A6F62
"""The one key every job of a database took at start before locks were per index."""


@pytest.fixture
def connect(stack: Any) -> Connect:
    dsn: str = stack.pg_dsn

    def connect() -> psycopg.Connection[Any]:
        # A bound on every statement: a start-up that waits on a lock fails the test.
        return psycopg.connect(dsn, options="-c statement_timeout=15000")
    return connect


def sink(connect: Connect, schema: str, owner: dict[str, str] | None,
         table: str = TABLE, revision: str = REVISION) -> PostgresSink:
    return PostgresSink(connect=connect, schema=schema, table=table, ledger_table="dv_ledger",
                        revision=revision, layout=ORDERS, owner=owner)


def recorded_owner(connect: Connect, schema: str, table: str = TABLE) -> Any:
    with connect() as conn:
        row = conn.execute("SELECT obj_description(to_regclass(%s), 'pg_class')",
                           (sql.Identifier(schema, table).as_string(conn),)).fetchone()
    return None if row is None or row[0] is None else json.loads(row[0])


def rows(connect: Connect, schema: str, statement: str) -> list[tuple[Any, ...]]:
    with connect() as conn:
        return conn.execute(sql.SQL(statement).format(schema=sql.Identifier(schema))).fetchall()


def test_the_job_records_its_view_on_the_index_it_creates(connect: Connect, schema: str) -> None:
    job = sink(connect, schema, SHOP)
    job.prepare()
    assert recorded_owner(connect, schema) == {"derivedviews.io/owner": SHOP}
    job.write_batch(0, [("o1", Decimal("2"), False)], {"orders": {"0": 1}})
    job.prepare()  # a restart of the same view's job resumes into it
    assert recorded_owner(connect, schema) == {"derivedviews.io/owner": SHOP}


def test_another_view_s_job_is_refused_at_start_and_writes_nothing(
        connect: Connect, schema: str) -> None:
    first = sink(connect, schema, SHOP)
    first.prepare()
    first.write_batch(0, [("o1", Decimal("2"), False)], {"orders": {"0": 1}})
    ledger_before = rows(connect, schema, "SELECT * FROM {schema}.dv_ledger ORDER BY batch_id")
    second = sink(connect, schema, BILLING)
    with pytest.raises(IndexOwnedElsewhereError) as refused:
        second.prepare()
    assert isinstance(refused.value, ConfigError)
    message = str(refused.value)
    assert f"{schema}.{TABLE}" in message
    assert "DerivedView shop/orders (uid uid-shop)" in message
    assert "DerivedView billing/orders (uid uid-billing)" in message
    assert "nothing was written" in message
    assert rows(connect, schema, f'SELECT * FROM {{schema}}."{TABLE}"') == [("o1", Decimal("2"))]
    assert rows(connect, schema, "SELECT * FROM {schema}.dv_ledger ORDER BY batch_id"
                ) == ledger_before
    assert recorded_owner(connect, schema) == {"derivedviews.io/owner": SHOP}


def test_a_job_that_names_no_owner_refuses_an_owned_index(connect: Connect, schema: str) -> None:
    sink(connect, schema, SHOP).prepare()
    with pytest.raises(IndexOwnedElsewhereError, match="names no owner"):
        sink(connect, schema, None).prepare()


def test_an_index_from_before_owners_is_adopted_by_the_job_started_for_it(
        connect: Connect, schema: str) -> None:
    legacy = sink(connect, schema, None)  # a job rendered by an older operator
    legacy.prepare()
    legacy.write_batch(0, [("o1", Decimal("2"), False)], {"orders": {"0": 1}})
    assert recorded_owner(connect, schema) is None
    sink(connect, schema, SHOP).prepare()
    assert recorded_owner(connect, schema) == {"derivedviews.io/owner": SHOP}
    assert rows(connect, schema, f'SELECT * FROM {{schema}}."{TABLE}"') == [("o1", Decimal("2"))]


def test_a_reader_holding_the_ledger_does_not_stall_a_new_index_s_start(
        stack: Any, connect: Connect, schema: str) -> None:
    """Adding a ledger column needs an exclusive lock; when every column is there the
    start-up takes none, so a long reader of the ledger delays nobody."""
    sink(connect, schema, SHOP).prepare()
    with psycopg.connect(stack.pg_dsn) as reader:  # a transaction left open
        reader.execute(sql.SQL("SELECT count(*) FROM {}.dv_ledger").format(
            sql.Identifier(schema))).fetchone()
        sink(connect, schema, BILLING, table="payments__bbbbbbbbbb",
             revision="bbbbbbbbbb").prepare()
        reader.rollback()
