"""SQL restricted to a query: what passes and what is refused, in Spark's and PostgreSQL's SQL."""

from __future__ import annotations

import pytest

from derived_views.core.sql_policy import unsafe_sql

QUERIES = [
    "SELECT customer_id, count(*) AS orders FROM events GROUP BY customer_id",
    "WITH latest AS (SELECT *, row_number() OVER (PARTITION BY order_id ORDER BY _kafka_offset "
    "DESC) AS n FROM events) SELECT order_id, amount FROM latest WHERE n = 1",
    "SELECT e.order_id, t.c FROM events e LATERAL VIEW explode(array(1, 2)) t AS c",
    "SELECT order_id FROM events UNION ALL SELECT order_id FROM events",
    "SELECT * FROM VALUES (1, 2) AS t(a, b)",
    "SELECT id FROM range(10)",
    "SELECT order_id, transform(array(amount), x -> x * 2) AS doubled FROM events",
    "SELECT customer_id FROM orders",  # a plain unknown table: the SQL check's, in Spark's words
]


@pytest.mark.parametrize("sql", QUERIES)
def test_queries_over_events_pass(sql: str) -> None:
    assert unsafe_sql(sql) is None


@pytest.mark.parametrize(("sql", "words"), [
    ("SELECT REFLECT('java.lang.System', 'getenv', 'HOME') AS h FROM events", "reflect()"),
    ("SELECT `try_reflect`('a', 'b') AS h FROM events", "try_reflect()"),
    ("SELECT * FROM events WHERE order_id IN (SELECT java_method('a', 'b'))", "java_method()"),
    ("SET spark.sql.ansi.enabled=false", "SET spark.sql.ansi.enabled is a command"),
    ("CACHE TABLE events", "CACHE TABLE is a command"),
    ("CREATE TEMPORARY FUNCTION f AS 'x.Y' USING JAR 'https://a/b.jar'", "CREATE TEMPORARY"),
    ("SELECT 1 AS x FROM events; ADD FILE /etc/passwd", "ADD FILE"),
    ("SELECT * FROM parquet.`s3a://bucket/x`", "parquet.`s3a://bucket/x` reads a file"),
    ("SELECT * FROM spark_catalog.default.secrets", "reads a file or a catalog table"),
])
def test_spark_escapes_are_refused_naming_what(sql: str, words: str) -> None:
    message = unsafe_sql(sql)
    assert message is not None and words in message
    assert "a view's SQL may only query `events`" in message
