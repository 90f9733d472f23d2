"""SQL restricted to a query: what passes and what is refused, in Spark's and PostgreSQL's SQL."""

from __future__ import annotations

import pytest

from derived_views.core.judges import transform_policy as sql_policy
from derived_views.core.judges.transform_policy import unsafe_sql
from support.corpora.hostile_transforms import POSITIONS

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


OFF_THE_ALLOWLIST = ["xpath_string", "input_file_name", "from_avro", "reflect", "from_xml",
                     "schema_of_avro", "to_protobuf", "+"]
"""A sample of Spark's registry off the allowlist (the job's tests try all of it)."""


@pytest.mark.parametrize(("where", "template"), POSITIONS, ids=[p[0] for p in POSITIONS])
def test_functions_off_the_allowlist_are_refused_in_every_position(
        where: str, template: str) -> None:
    """Where sqlglot reads the clause, by the function's name; where it cannot (a pipe SET,
    TABLESAMPLE ... ROWS) or the text is ambiguous (a call in a hint), as unreadable: never
    let through."""
    for name in OFF_THE_ALLOWLIST:
        message = unsafe_sql(template.format(f=f"`{name}`(order_id)"))
        assert message is not None, (where, name)
        assert (f"{name}()" in message or "cannot be read" in message
                or "the hint" in message), (where, name, message)


UDT = '{"type":"udt","class":"java.util.Timer","pyClass":null,"sqlType":"string"}'


@pytest.mark.parametrize(("sql", "words"), [
    (f"SELECT from_json(order_id, '{UDT}') AS x FROM events", 'user-defined type ("udt")'),
    (f"SELECT FROM_CSV(order_id, '{UDT}') AS x FROM events", 'user-defined type ("udt")'),
    (f"SELECT variant_get(parse_json(order_id), '$', '{UDT}') AS x FROM events",
     "variant_get()'s type"),
    (f"SELECT * FROM events WINDOW w AS (ORDER BY from_json(order_id, '{UDT}'))", "udt"),
    ("SELECT from_json(order_id, 'a\\u0020INT') AS x FROM events",
     "written without backslash escapes"),
    ("SELECT from_json(order_id, 'a ' 'INT') AS x FROM events", "must be a string literal"),
    ("SELECT from_json(order_id, lower('A INT')) AS x FROM events", "must be a string literal"),
    ("SELECT from_csv(order_id) AS x FROM events", "must be a string literal"),
    ("SELECT from_csv(order_id, 'a INT', map('mode', 'x'), 1) AS x FROM events",
     "takes at most 3 arguments"),
    ("SELECT from_json(order_id) AS x FROM events", "cannot be read"),
    ("SELECT from_json(order_id, 'a INT', map('compression', 'x.Y')) AS x FROM events",
     "option 'compression' is not one a view may set"),
    ("SELECT from_json(order_id, 'a INT', map('compr\\ession', 'x.Y')) AS x FROM events",
     "options must be map("),
    ("SELECT from_json(order_id, 'a INT', map('mode')) AS x FROM events", "cannot be read"),
    ("SELECT from_csv(order_id, 'a INT', map('sep', ';', 'mode', upper('x'))) AS x "
     "FROM events", "options must be map("),
    ("SELECT from_json(order_id, 'a INT', map_from_arrays(array('a'), array('b'))) AS x "
     "FROM events", "options must be map("),
    ("SELECT to_json(named_struct('a', 1), map('ENCODING', 'x')) AS x FROM events",
     "option 'ENCODING'"),
    ("SELECT schema_of_json('{}', map('compression', 'x')) AS x FROM events",
     "schema_of_json()'s option"),
    ("SELECT from_json(order_id, 'a java.util.Timer') AS x FROM events",
     "is not DDL the check reads"),
])
def test_types_and_options_spark_reads_while_analysing_are_judged(sql: str, words: str) -> None:
    message = unsafe_sql(sql)
    assert message is not None and words in message, message


@pytest.mark.parametrize("sql", [
    "SELECT from_json(order_id, 'a INT, b ARRAY<STRUCT<c: STRING>>').a AS a FROM events",
    "SELECT from_json(order_id, '{\"type\":\"struct\",\"fields\":[{\"name\":\"a\","
    "\"type\":\"integer\",\"nullable\":true,\"metadata\":{}}]}').a AS a FROM events",
    "SELECT from_csv(order_id, 'a INT', map('sep', '\\t', 'mode', 'PERMISSIVE')).a AS a "
    "FROM events",
    "SELECT to_json(named_struct('a', amount), map('timestampFormat', 'yyyy')) AS j FROM events",
    "SELECT variant_get(parse_json(order_id), '$.a', 'decimal(10, 2)') AS p FROM events",
    "SELECT schema_of_csv('1,2') AS s FROM events",
])
def test_plain_types_and_options_pass(sql: str) -> None:
    assert unsafe_sql(sql) is None


@pytest.mark.parametrize(("text", "readable"), [
    ("a INT", True), ("INT", True), ("array<int>", True), ("map<string, int>", True),
    ("struct<a: int, `b c`: array<string>>", True), ("decimal(10, 2)", True),
    ("a INT NOT NULL COMMENT 'x', b STRING COLLATE UTF8_LCASE", True),
    ("interval day to second", True), ("a varchar(3)", True),
    ("a java.util.Timer", False), ("a INT,", False), ("", False), ("array<int", False),
    ("a INT DEFAULT 1", False), ("a INT GENERATED ALWAYS AS (1)", False), ("udt", False),
    ("struct<" * 70 + "a: int" + ">" * 70, False),
])
def test_the_operators_ddl_reader(text: str, readable: bool) -> None:
    assert (sql_policy.ddl_problem(text) is None) == readable
