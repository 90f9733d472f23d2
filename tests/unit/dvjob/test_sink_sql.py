"""The SQL the PostgreSQL sink sends, built without a database."""

from __future__ import annotations

from psycopg import sql

from dvjob.sinks.postgres.sink import (
    batch_table_ddl,
    claim_statement,
    copy_statement,
    delete_statement,
    finish_statement,
    index_ddl,
    ledger_ddl,
    recorded_offsets_statement,
    upsert_statement,
)
from dvjob.sinks.schema import SinkColumn, TableLayout

ORDERS = TableLayout(
    columns=(SinkColumn("customer_id", "text"), SinkColumn("orders", "bigint"),
             SinkColumn("revenue", "double precision")),
    primary_key=("customer_id",), has_delete_flag=False)
KEY_ONLY = TableLayout(columns=(SinkColumn("shop", "text"), SinkColumn("day", "date")),
                       primary_key=("shop", "day"), has_delete_flag=True)


def text(statement: sql.Composable) -> str:
    return statement.as_string(None)


def test_ledger_table() -> None:
    assert text(ledger_ddl("public", "dv_ledger")) == (
        'CREATE TABLE IF NOT EXISTS "public"."dv_ledger" (revision text NOT NULL, '
        "batch_id bigint NOT NULL, end_offsets jsonb NOT NULL, rows_upserted bigint NOT NULL, "
        "rows_deleted bigint NOT NULL, committed_at timestamptz NOT NULL DEFAULT now(), "
        "index_oid bigint, history_start jsonb, PRIMARY KEY (revision, batch_id))")


def test_index_table() -> None:
    assert text(index_ddl("views", "orders_by_customer__3f9c", ORDERS)) == (
        'CREATE TABLE IF NOT EXISTS "views"."orders_by_customer__3f9c" ("customer_id" text, '
        '"orders" bigint, "revenue" double precision, PRIMARY KEY ("customer_id"))')


def test_identifiers_are_quoted() -> None:
    odd = TableLayout(columns=(SinkColumn('Customer "Id"', "text"),), primary_key=('Customer "Id"',),
                      has_delete_flag=False)
    assert text(index_ddl("My Schema", "t; DROP TABLE x", odd)) == (
        'CREATE TABLE IF NOT EXISTS "My Schema"."t; DROP TABLE x" ("Customer ""Id""" text, '
        'PRIMARY KEY ("Customer ""Id"""))')


def test_batch_table_and_copy() -> None:
    assert text(batch_table_ddl(ORDERS)) == (
        'CREATE TEMPORARY TABLE "_dv_batch" ("customer_id" text, "orders" bigint, '
        '"revenue" double precision, "_dv_deleted" boolean NOT NULL, "_dv_ord" bigint NOT NULL) '
        "ON COMMIT DROP")
    assert text(copy_statement(ORDERS)) == (
        'COPY "_dv_batch" ("customer_id", "orders", "revenue", "_dv_deleted", "_dv_ord") FROM STDIN')


def test_upsert_takes_each_key_s_last_row() -> None:
    assert text(upsert_statement("public", "t", ORDERS)) == (
        'INSERT INTO "public"."t" ("customer_id", "orders", "revenue") '
        'SELECT "customer_id", "orders", "revenue" FROM ('
        'SELECT DISTINCT ON ("customer_id") "customer_id", "orders", "revenue", "_dv_deleted" '
        'FROM "_dv_batch" ORDER BY "customer_id", "_dv_ord" DESC) AS l '
        'WHERE NOT l."_dv_deleted" '
        'ON CONFLICT ("customer_id") DO UPDATE SET "orders" = EXCLUDED."orders", '
        '"revenue" = EXCLUDED."revenue"')


def test_upsert_of_a_key_only_table_does_nothing_on_conflict() -> None:
    assert text(upsert_statement("s", "t", KEY_ONLY)) == (
        'INSERT INTO "s"."t" ("shop", "day") SELECT "shop", "day" FROM ('
        'SELECT DISTINCT ON ("shop", "day") "shop", "day", "_dv_deleted" '
        'FROM "_dv_batch" ORDER BY "shop", "day", "_dv_ord" DESC) AS l '
        'WHERE NOT l."_dv_deleted" ON CONFLICT ("shop", "day") DO NOTHING')


def test_delete_uses_each_key_s_last_row() -> None:
    assert text(delete_statement("s", "t", KEY_ONLY)) == (
        'DELETE FROM "s"."t" AS t USING ('
        'SELECT DISTINCT ON ("shop", "day") "shop", "day", "_dv_deleted" '
        'FROM "_dv_batch" ORDER BY "shop", "day", "_dv_ord" DESC) AS l '
        'WHERE l."_dv_deleted" AND t."shop" = l."shop" AND t."day" = l."day"')


def test_ledger_statements() -> None:
    assert text(claim_statement("public", "dv_ledger")) == (
        'INSERT INTO "public"."dv_ledger" (revision, batch_id, end_offsets, rows_upserted, '
        "rows_deleted, index_oid, history_start) VALUES (%s, %s, %s, 0, 0, %s, %s) "
        "ON CONFLICT (revision, batch_id) DO NOTHING")
    assert text(recorded_offsets_statement("public", "dv_ledger")) == (
        'SELECT end_offsets FROM "public"."dv_ledger" WHERE revision = %s AND batch_id = %s')
    assert text(finish_statement("public", "dv_ledger")) == (
        'UPDATE "public"."dv_ledger" SET rows_upserted = %s, rows_deleted = %s, '
        "committed_at = clock_timestamp() WHERE revision = %s AND batch_id = %s")
