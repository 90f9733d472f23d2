"""The SQL and schema check: every SQL the project ships passes, typical mistakes are refused
with Spark's wording, and nothing Spark accepts is refused (when unsure, the job decides)."""

from __future__ import annotations

import ast
import re
from typing import Any

import pytest
import yaml

from derived_views.api.spec import DerivedViewSpec
from derived_views.core import reasons
from derived_views.core.judges import transform as sql_check
from derived_views.core.judges.spark_ddl import DdlError, parse_schema
from derived_views.core.judges.transform import aggregate_functions, check_spec, check_sql
from derived_views.core.judges.transform_policy import unsafe_sql
from support.paths import REPO

ROOT = REPO
DDL = ("order_id STRING, customer_id STRING, amount DOUBLE, ts TIMESTAMP, "
       "items ARRAY<STRUCT<sku: STRING, qty: INT>>, payload STRUCT<id: STRING, "
       "tags: MAP<STRING, STRING>>")
FIELDS = parse_schema(DDL)

VALID: list[tuple[str, str]] = [
    ("customer_id", "SELECT customer_id, count(*) AS orders, sum(amount) AS revenue "
                    "FROM events GROUP BY customer_id"),
    ("order_id", "SELECT * FROM events"),
    ("order_id", "SELECT ORDER_ID, amount FROM events"),  # Spark names it after the schema
    ("sku", "SELECT item.sku AS sku, sum(item.qty) AS qty FROM events "
            "LATERAL VIEW explode(items) t AS item GROUP BY item.sku"),
    ("order_id", "SELECT order_id, transform(items, x -> x.qty * 2) AS q FROM events"),
    ("order_id", "WITH latest AS (SELECT order_id, max_by(amount, _kafka_offset) AS amount "
                 "FROM events GROUP BY order_id) SELECT order_id, amount FROM latest"),
    ("order_id", "SELECT e.order_id, e.amount FROM events e"),
    ("order_id", "SELECT order_id, row_number() OVER w AS rn FROM events "
                 "WINDOW w AS (PARTITION BY customer_id ORDER BY ts)"),
    ("order_id", "SELECT order_id FROM events QUALIFY row_number() OVER "
                 "(PARTITION BY order_id ORDER BY _kafka_offset DESC) = 1"),
    ("id", "SELECT payload.id AS id, payload.tags['x'] AS x FROM events"),
    ("id", "SELECT id FROM (SELECT payload.* FROM events)"),
    ("order_id", "SELECT order_id, amount * 2 AS twice, twice + 1 AS plus FROM events"),
    ("order_id", "SELECT m.order_id, m.amount FROM (SELECT * FROM events) m"),
    ("order_id", "SELECT order_id, timestampadd(HOUR, 1, ts) AS t, extract(YEAR FROM ts) AS y "
                 "FROM events"),
    ("order_id", "SELECT order_id, current_date AS d, current_timestamp() AS t FROM events"),
    ("k", "SELECT k, v FROM events LATERAL VIEW explode(map('a', 1)) t AS k, v"),
    ("key", "SELECT explode(payload.tags) FROM events"),
    ("c0", "SELECT json_tuple(order_id, 'a', 'b') FROM events"),
    ("order_id", "SELECT * FROM events |> WHERE amount > 1 |> SELECT order_id, amount"),
    ("order_id", "FROM events SELECT order_id"),
    ("order_id", "SELECT order_id, amount FROM events WHERE NOT _kafka_tombstone UNION ALL "
                 "SELECT order_id, amount FROM events WHERE _kafka_tombstone"),
    ("order_id", "SELECT order_id, _kafka_tombstone AS _dv_deleted FROM events;"),
    ("w", "SELECT window.start AS w, count(*) AS n FROM events GROUP BY window(ts, '1 hour')"),
    ("s", "SELECT session_window(ts, '5 minutes') AS s, count(*) AS n FROM events "
          "GROUP BY session_window(ts, '5 minutes')"),
    ("order_id", "SELECT a.order_id, b.amount FROM events a JOIN events b "
                 "ON a.order_id = b.order_id"),
    ("order_id", "SELECT order_id FROM events WHERE order_id IN "
                 "(SELECT order_id FROM events WHERE amount > 10)"),
    ("x", "SELECT named_struct('x', order_id).* FROM events"),
    ("x", "SELECT s.x AS x FROM (SELECT named_struct('x', order_id) AS s FROM events)"),
    ("order_id", "SELECT `order_id`, `amount` FROM `events`"),
    ("order_id", "SELECT order_id, amount FROM EVENTS"),
    ("order_id", "SELECT /*+ REPARTITION(4) */ order_id FROM events DISTRIBUTE BY order_id"),
    ("order_id", "SELECT order_id, max_by(struct(amount, ts), _kafka_offset).* FROM events "
                 "GROUP BY order_id"),
    ("order_id", "SELECT order_id, sum(amount) FILTER (WHERE amount > 0) AS s FROM events "
                 "GROUP BY ALL"),
    ("id", "SELECT id FROM range(10)"),
    ("order_id", "SELECT order_id, aggregate(items, 0, (acc, x) -> acc + x.qty) AS total "
                 "FROM events"),
    ("order_id", "SELECT order_id, from_json(order_id, 'a INT').a AS a FROM events"),
    ("a", "SELECT * FROM (SELECT order_id, amount FROM events) "
          "PIVOT (sum(amount) FOR order_id IN ('a' AS a))"),
    ("order_id", "SELECT order_id, amount::string AS s, try_cast(amount AS INT) AS i "
                 "FROM events"),
    ("order_id", "SELECT order_id FROM events WHERE ts > now() - INTERVAL 1 DAY "
                 "AND order_id RLIKE '^a' AND amount <=> NULL"),
    ("order_id", "SELECT order_id, variant_get(parse_json(order_id), '$.price', 'double') AS p "
                 "FROM events"),
    ("order_id", "SELECT order_id, amount FROM events LEFT ANTI JOIN events e2 USING (order_id)"),
    ("order_id", "SELECT order_id, percentile_cont(0.5) WITHIN GROUP (ORDER BY amount) AS p "
                 "FROM events GROUP BY order_id"),
    ("order_id", "SELECT order_id FROM events GROUP BY GROUPING SETS ((order_id), ())"),
    ("order_id", "SELECT order_id, filter(items, i -> i.qty > 0) AS f FROM events"),
    ("order_id", "SELECT order_id, items[0].sku AS s, payload.tags.x AS t FROM events"),
    ("id", "SELECT * FROM VALUES (1, 'a'), (2, 'b') AS t(id, name)"),
    ("n", "WITH RECURSIVE r AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM r WHERE n < 3) "
          "SELECT n FROM r"),
    ("order_id", "SELECT order_id, amount FROM events UNPIVOT (val FOR name IN (amount))"),
    ("order_id", "SELECT order_id, stack(2, 'a', 1, 'b', 2) FROM events"),
    ("the_amount", "SELECT order_id, `amount` AS `the_amount` FROM events"),
    ("order_id", "SELECT order_id, CASE amount WHEN 1 THEN 'one' ELSE 'other' END AS c "
                 "FROM events"),
    ("order_id", "SELECT order_id FROM events e WHERE e._kafka_offset >= 0"),
]

INVALID: list[tuple[str, str, str]] = [
    ("order_id", "SELEC order_id FROM events",
     "[PARSE_SYNTAX_ERROR] Syntax error at or near 'FROM' (line 1, column 19)"),
    ("order_id", "SELECT order_id FROM events WHERE",
     "Syntax error at or near 'WHERE' (line 1, column 33): incomplete WHERE"),
    ("order_id", "SELECT order_id FROM events GROUP order_id", "at or near 'order_id'"),
    ("order_id", "SELECT order_id FROM (SELECT order_id FROM events", "Expecting )"),
    ("order_id", "SELECT order_id, count(* AS n FROM events", "at or near 'AS'"),
    ("order_id", "SELECT custmer_id AS order_id FROM events",
     "[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or function parameter with name "
     "`custmer_id` cannot be resolved. Did you mean one of the following? [`customer_id`,"),
    ("order_id", "SELECT order_id, amout FROM events", "`amout` cannot be resolved"),
    ("order_id", "SELECT order_id FROM events WHERE amont > 1", "`amont` cannot be resolved"),
    ("order_id", "SELECT order_id, sum(amount) AS s FROM events GROUP BY customerid, order_id",
     "`customerid` cannot be resolved"),
    ("order_id", "SELECT e.order_id, e.amonut FROM events e", "`e.amonut` cannot be resolved"),
    ("order_id", "SELECT order_id, _kafka_ofset AS o FROM events",
     "Did you mean one of the following? [`_kafka_offset`"),
    ("order_id", "SELECT order_id FROM orders",
     "[TABLE_OR_VIEW_NOT_FOUND] The table or view `orders` cannot be found"),
    ("order_id", "WITH t AS (SELECT order_id FROM events) SELECT order_id FROM t2",
     "`t2` cannot be found"),
    ("customer_id", "SELECT order_id, amount FROM events",
     "sink.primaryKey: customer_id not in the transform's output columns (order_id, amount)"),
    ("Customer_ID", "SELECT customer_id, count(*) AS n FROM events GROUP BY customer_id",
     "Customer_ID not in the transform's output columns (customer_id, n); names are "
     "case-sensitive"),
    ("order_id", "SELECT * EXCEPT (order_id) FROM events",
     "order_id not in the transform's output columns"),
    ("order_id", "SELECT customer_id, sum(amount) FROM events GROUP BY customer_id",
     "order_id not in the transform's output columns (customer_id)"),
    ("order_id", "SELECT order_id FROM events; SELECT 1", "one query only"),
    ("order_id", "DROP TABLE events", "a DROP statement is not a query"),
]


@pytest.mark.parametrize(("key", "sql"), VALID)
def test_valid_spark_sql_is_never_refused(key: str, sql: str) -> None:
    assert check_sql(sql, FIELDS, "json", (key,)) is None
    assert unsafe_sql(sql) is None  # every function it calls is on the allowlist


def test_the_variant_path_sqlglot_cannot_read_is_refused_with_the_spelling_it_can() -> None:
    spec = _spec("order_id STRING, v VARIANT", "SELECT order_id, v:price::double AS p FROM events")
    refusal = check_spec(spec)
    assert refusal is not None and refusal.reason == "InvalidTransform"
    assert "variant_get(v, '$.a.b', 'string')" in refusal.message


@pytest.mark.parametrize(("key", "sql", "expected"), INVALID)
def test_mistakes_are_refused_in_sparks_words(key: str, sql: str, expected: str) -> None:
    problem = check_sql(sql, FIELDS, "json", (key,))
    assert problem is not None and expected in problem, problem


def test_debezium_columns_exist_only_for_debezium() -> None:
    sql = "SELECT order_id, _debezium_deleted AS _dv_deleted FROM events"
    assert check_sql(sql, FIELDS, "debezium", ("order_id",)) is None
    problem = check_sql(sql, FIELDS, "json", ("order_id",))
    assert problem is not None and "`_debezium_deleted` cannot be resolved" in problem


def test_the_metadata_columns_are_the_jobs() -> None:
    parse = pytest.importorskip("dvjob.source.parse")
    assert sql_check.KAFKA_COLUMNS == parse.KAFKA_COLUMNS
    assert sql_check.DEBEZIUM_COLUMNS == parse.DEBEZIUM_COLUMNS


@pytest.mark.parametrize("ddl", [
    "order_id STRING, amount DOUBLE",
    "a ARRAY<STRUCT<x: INT, y STRING>>, b MAP<STRING, INT>",
    "a DECIMAL(10,2) NOT NULL COMMENT 'the amount', b dec(3)",
    "`weird name` INT, `back``tick` STRING",
    "a TIMESTAMP_NTZ, b VARIANT, c INTERVAL DAY TO SECOND, d INTERVAL YEAR",
    "a BYTE, b SHORT, c LONG, d REAL, f VOID, g BINARY, h CHAR(3), i VARCHAR(4), j bigint",
    "STRUCT<a: INT, b: STRING>",
    "a string collate UTF8_LCASE, timestamp TIMESTAMP",
    "größe INT, naïve STRING",
])
def test_spark_ddl_is_accepted(ddl: str) -> None:
    parse_schema(ddl)


@pytest.mark.parametrize(("ddl", "expected"), [
    ("order_id STRNG", '[UNSUPPORTED_DATATYPE] Unsupported data type "STRNG" (position 10)'),
    ("a INT b INT", "Syntax error at or near 'b'"),
    ("a ARRAY<INT", "Syntax error at or near end of input"),
    ("a", "must list one or more 'name TYPE' fields"),
    ("a, b INT", "field 'a' has no type"),
    ("STRING", "must list one or more 'name TYPE' fields"),
    ("ARRAY<INT>", "must list one or more 'name TYPE' fields"),
    ("a MAP<STRING>", "expected ','"),
    ("a INT; DROP", "Syntax error at or near ';'"),
    ("_kafka_offset BIGINT", "names starting with '_kafka_' or '_debezium_' are reserved"),
    ("a STRUCT<b: STRNG>", 'Unsupported data type "STRNG"'),
    # Spark's DDL of a type takes no expression: DataType.fromDDL refuses these too
    ("a INT DEFAULT 1", "a view's schema takes no DEFAULT expression"),
    ("a INT GENERATED ALWAYS AS (1)", "takes no GENERATED expression"),
    ("a STRING NOT NULL COLLATE UTF8_LCASE", "Syntax error at or near 'COLLATE'"),
    ("a INT,", "Syntax error at or near end of input"),
    # nothing names a class: a user-defined type, Spark's JSON form of a type
    ("a org.example.PointUDT", "Syntax error at or near '.'"),
    ('{"type":"struct","fields":[{"name":"p","type":{"type":"udt","class":"x.Y"}}]}',
     "Syntax error at or near '{'"),
    ("a PointUDT", 'Unsupported data type "POINTUDT"'),
])
def test_bad_ddl_is_refused(ddl: str, expected: str) -> None:
    with pytest.raises(DdlError) as refused:
        parse_schema(ddl)
    assert expected in str(refused.value)


def _spec(schema: str, sql: str | None, key: str = "order_id") -> DerivedViewSpec:
    transform: dict[str, Any] = ({"sql": sql} if sql is not None
                                 else {"python": {"function": "views.orders:build"}})
    return DerivedViewSpec.model_validate({
        "source": {"kafka": {"bootstrapServers": "kafka:9092"}, "topics": ["orders"],
                   "schema": schema},
        "transform": transform,
        "sink": {"postgres": {"secretRef": {"name": "db"}, "table": "orders"},
                 "primaryKey": [key]}})


def test_check_spec_names_the_reason() -> None:
    bad_schema = check_spec(_spec("order_id STRNG", "SELECT * FROM events"))
    assert bad_schema is not None and bad_schema.reason == reasons.INVALID_SCHEMA
    assert bad_schema.message.startswith("source.schema: cannot parse 'order_id STRNG': ")
    bad_sql = check_spec(_spec("order_id STRING", "SELECT ordr_id FROM events"))
    assert bad_sql is not None and bad_sql.reason == reasons.INVALID_TRANSFORM
    assert check_spec(_spec("order_id STRING", "SELECT * FROM events")) is None


def test_python_transforms_are_not_checked() -> None:
    assert check_spec(_spec("order_id STRING", None, key="anything")) is None


# Every SQL the project ships (tutorial, docs, tests) ----------------------------------------

def _documents() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted([*ROOT.glob("docs/**/*.yaml"), *ROOT.glob("tests/**/*.yaml"),
                        *ROOT.glob("gitops/**/*.yaml")]):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == "DerivedView":
                found.append((str(path.relative_to(ROOT)), doc["spec"]))
    return found


DELIBERATELY_INVALID = {"admission_catalogue.py", "hostile_transforms.py"}
"""Sources whose SQL examples are wrong on purpose (the catalogue of refusals)."""


def _sql_literals() -> list[tuple[str, str]]:
    """String values of "sql" keys and sql= arguments in the test and doc sources."""
    found = []
    paths = [*ROOT.glob("tests/**/*.py"), *ROOT.glob("stack/dvstack/*.py"),
             *ROOT.glob("benchmarks/*.py")]
    for path in sorted(paths):
        if path.name in DELIBERATELY_INVALID:
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            values: list[ast.expr] = []
            if isinstance(node, ast.Dict):
                values = [v for k, v in zip(node.keys, node.values, strict=True)
                          if isinstance(k, ast.Constant) and k.value == "sql"]
            elif (isinstance(node, ast.keyword) and node.arg == "sql") or (
                    isinstance(node, ast.Assign) and any(
                        isinstance(t, ast.Name) and t.id.startswith("SQL")
                        for t in node.targets)):
                values = [node.value]
            for value in values:
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    found.append((f"{path.relative_to(ROOT)}:{value.lineno}", value.value))
    return found


SHIPPED_INVALID = {"SELECT no_such_column FROM events"}
"""SQL the tests use on purpose to make a job fail (they bypass this check)."""


def test_every_shipped_manifest_passes() -> None:
    documents = _documents()
    assert len(documents) >= 2  # the tutorial's two revisions at least
    for where, spec in documents:
        assert check_spec(DerivedViewSpec.model_validate(spec)) is None, where


def test_every_sql_in_the_sources_parses() -> None:
    literals = _sql_literals()
    assert len(literals) >= 20
    for where, sql in literals:
        check_sql_of_a_cutover = re.search(r"\{[a-z]+\}", sql)  # PostgreSQL, placeholders
        if (sql.strip() and sql not in SHIPPED_INVALID and "SELECT" in sql.upper()
                and not check_sql_of_a_cutover):
            assert check_sql(sql, None, "json", ()) is None, where


def test_aggregate_functions_lists_what_the_sql_aggregates() -> None:
    sql = ("SELECT k, sum(x) AS s, count(*) AS c, max_by(v, _kafka_offset) AS m, sum(y) AS t "
           "FROM events GROUP BY k")
    assert aggregate_functions(sql) == ["sum", "count", "max_by"]
    assert aggregate_functions("SELECT * FROM events") == []
    assert aggregate_functions("SELEC") == []


def _literal_specs() -> list[tuple[str, dict[str, Any]]]:
    """Whole view specs written as literals in the sources (source, transform and sink)."""
    found = []
    for path in sorted(ROOT.glob("tests/**/*.py")):
        if path.name in DELIBERATELY_INVALID:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Dict):
                continue
            keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
            if not {"source", "transform", "sink"} <= keys:
                continue
            try:
                spec = ast.literal_eval(node)
                DerivedViewSpec.model_validate(spec)
            except ValueError:
                continue  # built from variables, or invalid on purpose (the spec's tests)
            found.append((f"{path.relative_to(ROOT)}:{node.lineno}", spec))
    return found


def test_every_literal_spec_in_the_tests_passes() -> None:
    specs = _literal_specs()
    assert len(specs) >= 5
    for where, spec in specs:
        refusal = check_spec(DerivedViewSpec.model_validate(spec))
        assert refusal is None, (where, refusal)


DEBEZIUM_SCHEMA = "id STRING, customer_id STRING, amount DOUBLE"


@pytest.mark.parametrize(("sql", "what"), [
    ("SELECT customer_id, sum(amount) AS total FROM events GROUP BY customer_id", "GROUP BY"),
    ("SELECT DISTINCT id, customer_id FROM events", "DISTINCT"),
    ("SELECT 'all' AS id, count(*) AS n FROM events", "count()"),
    ("SELECT id, max_by(amount, _kafka_offset) AS amount FROM events GROUP BY id", "GROUP BY"),
])
def test_aggregates_over_a_changelog_are_refused_before_the_job(sql: str, what: str) -> None:
    problem = check_sql(sql, parse_schema(DEBEZIUM_SCHEMA), "debezium", ("id",) if "id" in
                        sql.split("FROM")[0] else ("customer_id",))
    assert problem is not None and f"refused ({what})" in problem, problem
    assert "Write a projection that mirrors the table" in problem


@pytest.mark.parametrize("sql", [
    "SELECT id, amount, _debezium_deleted AS _dv_deleted FROM events",
    "SELECT id, amount, sum(amount) OVER (PARTITION BY customer_id) AS running FROM events",
])
def test_row_to_row_transforms_over_a_changelog_pass(sql: str) -> None:
    assert check_sql(sql, parse_schema(DEBEZIUM_SCHEMA), "debezium", ("id",)) is None


def test_the_same_aggregate_over_json_passes() -> None:
    sql = "SELECT customer_id, sum(amount) AS total FROM events GROUP BY customer_id"
    assert check_sql(sql, parse_schema(DEBEZIUM_SCHEMA), "json", ("customer_id",)) is None


def test_the_operator_and_the_job_say_the_same_fix() -> None:
    from derived_views.core.judges.transform import DEBEZIUM_AGGREGATE_FIX
    from dvjob.source.changelog import DEBEZIUM_AGGREGATE_FIX as JOB_FIX

    assert DEBEZIUM_AGGREGATE_FIX == JOB_FIX
