"""The PostgreSQL sink's samples for the job's integration tests: one orders table layout,
and how the tests build a sink and read its tables back."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from psycopg import sql

from dvjob.sinks.postgres.sink import Connect, PostgresSink
from dvjob.sinks.schema import SinkColumn, TableLayout

REVISION = "3f9c1a2b4d5e"
TABLE = "orders__3f9c1a2b4d5e"
ORDERS = TableLayout(
    columns=(SinkColumn("order_id", "text"), SinkColumn("customer_id", "text"),
             SinkColumn("amount", "numeric(10,2)")),
    primary_key=("order_id",), has_delete_flag=True)
Row = tuple[Any, ...]


def make_sink(connect: Connect, schema: str, layout: TableLayout = ORDERS,
              table: str = TABLE) -> PostgresSink:
    sink = PostgresSink(connect=connect, schema=schema, table=table, ledger_table="dv_ledger",
                        revision=REVISION, layout=layout,
                        stage_conninfo=getattr(connect, "dsn", ""))
    sink.prepare()
    return sink


def query(connect: Connect, statement: sql.Composed | str, *params: Any) -> list[Row]:
    with connect() as conn:
        return [tuple(r) for r in conn.execute(statement, params or None).fetchall()]


def index_rows(connect: Connect, schema: str, table: str = TABLE) -> list[Row]:
    return query(connect, sql.SQL("SELECT * FROM {} ORDER BY 1").format(
        sql.Identifier(schema, table)))


def ledger_rows(connect: Connect, schema: str) -> list[Row]:
    return query(connect, sql.SQL(
        "SELECT revision, batch_id, end_offsets, rows_upserted, rows_deleted "
        "FROM {} ORDER BY batch_id").format(sql.Identifier(schema, "dv_ledger")))


def order(order_id: str, customer: str | None, amount: str | None, deleted: bool = False) -> Row:
    return (order_id, customer, None if amount is None else Decimal(amount), deleted)
