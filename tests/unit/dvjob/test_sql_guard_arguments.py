"""Types and options Spark reads while it analyses a query: judged before, by both layers.

`from_json`, `from_csv`, `variant_get` and `try_variant_get` read a type from a
string while Spark analyses the query, inside `spark.sql()`: as DDL, else as
JSON, where a type `"udt"` names a class Spark 4.0 loads and instantiates (a
`java.util.Timer` starts a thread in the driver). Their options, and those of
`to_json`, `to_csv` and `schema_of_*`, are read then too (`compression` loads a
class by name). The job's guard judges these arguments on the parsed plan, the
operator on sqlglot's, and a probe over the whole allowlist shows no other
function reads a type from its arguments.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from pyspark.sql import SparkSession

from derived_views.core.judges.transform_policy import schema_text_problem, unsafe_sql
from dvjob.errors import ConfigError
from dvjob.sql import guard as sql_guard
from dvjob.sql.allowlist import FUNCTIONS, OPTION_KEYS, SCHEMA_ARGUMENTS
from support.corpora.hostile_transforms import (
    HOSTILE,
    SCHEMA_ARGS,
    UDT,
    UDT_DEEP,
    UDT_STRUCT,
    struct_of,
)

INT_A = struct_of('"integer"')
LEGITIMATE: list[tuple[str, str, Any]] = [
    ("from_json with DDL", "SELECT from_json('{\"a\": 1}', 'a INT').a AS v FROM events", 1),
    ("from_json with a JSON schema",
     f"SELECT from_json('{{\"a\": 2}}', '{INT_A}').a AS v FROM events", 2),
    ("from_json with options",
     "SELECT from_json('{a: 3}', 'a INT', map('allowUnquotedFieldNames', 'true', "
     "'mode', 'FAILFAST')).a AS v FROM events", 3),
    ("from_csv with a separator",
     "SELECT from_csv('1;4', 'a INT, b INT', map('sep', ';')).b AS v FROM events", 4),
    ("to_json with options",
     "SELECT to_json(named_struct('d', date'2024-05-01'), map('dateFormat', 'dd/MM/yyyy')) "
     "AS v FROM events", '{"d":"01/05/2024"}'),
    ("to_csv", "SELECT to_csv(named_struct('a', 1, 'b', 2), map('sep', '|')) AS v FROM events",
     "1|2"),
    ("schema_of_json", "SELECT schema_of_json('{\"a\": 1}', map('prefersDecimal', 'true')) "
                       "AS v FROM events", "STRUCT<a: BIGINT>"),
    ("schema_of_csv", "SELECT schema_of_csv('1,abc') AS v FROM events",
     "STRUCT<_c0: INT, _c1: STRING>"),
    ("variant_get", "SELECT variant_get(parse_json('{\"a\": 5}'), '$.a', 'int') AS v "
                    "FROM events", 5),
    ("try_variant_get to a struct",
     "SELECT try_variant_get(parse_json('{\"a\": 6}'), '$', 'struct<a: int>').a AS v "
     "FROM events", 6),
]
SCHEMA_TEXTS: list[tuple[str, bool]] = [
    ("a INT", True), ("INT", True), ("a INT, b STRING", True), ("array<int>", True),
    ("map<string, array<struct<x: int>>>", True), ("struct<a: int, b: array<string>>", True),
    ("a STRUCT<b: INT> NOT NULL COMMENT 'x', c DECIMAL(10, 2)", True),
    ("decimal(10,2)", True), ("timestamp_ntz", True), (INT_A, True),
    (struct_of('{"type":"array","elementType":{"type":"map","keyType":"string",'
               '"valueType":"decimal(10,2)","valueContainsNull":true},"containsNull":false}'),
     True),
    ('{"type":"struct","fields":[{"name":"a","type":"long","nullable":false,'
     '"metadata":{"comment":"{udt}"}}]}', True),
    (UDT, False), (UDT_STRUCT, False), (UDT_DEEP, False),
    (struct_of('{"type":"udt","pyClass":"m.T","serializedClass":"x","sqlType":"string"}'),
     False),
    (struct_of('{"type":"UDT","class":"java.util.Timer","pyClass":null,"sqlType":"string"}'),
     False),
    ('{"type":"struct","type":"udt","fields":[]}', False),
    (INT_A + " trailing", False), (INT_A.replace('"integer"', "NaN"), False),
    (struct_of('"java.util.Timer"'), False),
    ('{"type":"struct","fields":[{"name":"a","type":"integer","class":"x"}]}', False),
    ("a java.util.Timer", False), ("java.util.Timer", False), ('"string"', False),
    ("", False), ("a INT,", False), ("a INT\x00", False),
]
"""(schema text, allowed by both layers)."""


def timers_made(spark: SparkSession) -> int:
    """How many java.util.Timer the driver's JVM has constructed (the serial its threads are
    named by). Not its live threads: an idle Timer may be collected, and its thread end,
    before a test looks (one CI run saw none). Spark opens java.util to reflection."""
    field = spark._jvm.java.lang.Class.forName("java.util.Timer").getDeclaredField(
        "nextSerialNumber")
    field.setAccessible(True)
    return int(field.get(None))  # an AtomicInteger, which py4j hands over as a number


def test_spark_itself_instantiates_a_class_a_json_schema_names(
        spark: SparkSession, events: None) -> None:
    """Why the rule exists: past no guard, Spark 4.0 constructs the class while analysing."""
    before = timers_made(spark)
    with contextlib.suppress(Exception):  # no data type: analysis fails, after constructing it
        spark.sql(f"SELECT from_json(order_id, '{UDT_STRUCT}') AS x FROM events")
    assert timers_made(spark) > before


@pytest.mark.parametrize("hostile", [h for h in HOSTILE if h.cls == SCHEMA_ARGS],
                         ids=[h.what for h in HOSTILE if h.cls == SCHEMA_ARGS])
def test_the_guard_refuses_before_spark_reads_the_argument(
        spark: SparkSession, events: None, hostile: Any) -> None:
    before = timers_made(spark)
    with pytest.raises(ConfigError) as refused:
        sql_guard.query(spark, hostile.text)
    assert hostile.job in str(refused.value)
    assert timers_made(spark) == before


@pytest.mark.parametrize(("what", "sql", "value"), LEGITIMATE, ids=[w for w, _, _ in LEGITIMATE])
def test_legitimate_types_and_options_pass_and_work(
        spark: SparkSession, events: None, what: str, sql: str, value: Any) -> None:
    assert sql_guard.query(spark, sql).collect()[0].v == value, what
    assert unsafe_sql(sql) is None, what


@pytest.mark.parametrize(("text", "allowed"), SCHEMA_TEXTS, ids=[t[:40] for t, _ in SCHEMA_TEXTS])
def test_the_job_and_the_operator_read_a_type_alike(
        spark: SparkSession, events: None, text: str, allowed: bool) -> None:
    """The job reads DDL with Spark's parser and JSON strictly; the operator reads both
    without Spark. They allow and refuse the same texts."""
    by_job, by_operator = sql_guard.schema_problem(spark._jvm, text), schema_text_problem(text)
    assert (by_job is None, by_operator is None) == (allowed, allowed), (by_job, by_operator)


def test_sparks_ddl_parser_constructs_no_class(spark: SparkSession, events: None) -> None:
    """What the job hands to Spark's DDL parser (no `{`) cannot name a class: the parser
    maps keywords to built-in types and refuses the rest, constructing nothing."""
    before = timers_made(spark)
    for text in ("a java.util.Timer", "java.util.Timer", "a udt", "struct<a: java.util.Timer>",
                 UDT.replace("{", "(").replace("}", ")")):
        with pytest.raises(Exception, match=r"PARSE_SYNTAX_ERROR|UNSUPPORTED_DATATYPE"):
            spark._jvm.org.apache.spark.sql.types.DataType.fromDDL(text)
    assert timers_made(spark) == before


def test_the_option_keys_are_sparks_and_name_no_class(spark: SparkSession, events: None) -> None:
    catalyst = spark._jvm.org.apache.spark.sql.catalyst
    declared = {
        "json": str(catalyst.json.JSONOptions.getAllOptions().mkString("\n")),
        "csv": str(catalyst.csv.CSVOptions.getAllOptions().mkString("\n")),
    }
    for family, keys in OPTION_KEYS.items():
        assert keys <= {k.lower() for k in declared[family].split("\n")}, family
        assert not keys & {"compression", "codec", "encoding", "charset"}, family


def test_no_other_allowlisted_function_reads_a_type_from_its_arguments(
        spark: SparkSession, events: None) -> None:
    """The derivation of SCHEMA_ARGUMENTS, tried: every other allowlisted function is built
    by Spark's registry from one, two and three string literals naming a class (as analysis
    builds it) and asked its data type; no Timer is constructed."""
    jvm = spark._jvm
    registry = spark._jsparkSession.sessionState().functionRegistry()
    literal = getattr(getattr(jvm.org.apache.spark.sql.catalyst.expressions, "Literal$"),
                      "MODULE$").apply(UDT)
    arguments = []
    for count in (1, 2, 3):
        items = jvm.java.util.ArrayList()
        for _ in range(count):
            items.add(literal)
        arguments.append(jvm.org.apache.spark.api.python.PythonUtils.toSeq(items))
    before, built = timers_made(spark), 0
    for name in sorted(FUNCTIONS - set(SCHEMA_ARGUMENTS)):
        identifier = jvm.org.apache.spark.sql.catalyst.FunctionIdentifier.apply(name)
        for seq in arguments:
            try:
                expression = registry.lookupFunction(identifier, seq)
                built += 1
                expression.dataType()
            except Exception:  # wrong arity or types: Spark refuses, after reading nothing
                continue
        assert timers_made(spark) == before, name
    assert built > 300  # most functions were built with string arguments
