"""The operator's verdict on every hostile transform of the corpus, and on the legitimate ones.

The corpus (tests/hostile_transforms.py) is shared with the job's test and the
e2e test; here each hostile transform must be refused by check_spec, the
operator's whole judgement of a spec, with the expected reason and words, and
each legitimate one allowed. The lexer's own rules and the bounds on work are
tested on their own below.
"""

from __future__ import annotations

import time

import pytest
from pydantic import ValidationError

from derived_views.api.spec import DerivedViewSpec
from derived_views.core.judges import spark_allowlist
from derived_views.core.judges import transform_policy as sql_policy
from derived_views.core.judges.spark_ddl import parse_schema
from derived_views.core.judges.spark_lexer import SqlTextError, lex
from derived_views.core.judges.transform import MESSAGE_CHARS, check_spec, check_sql
from derived_views.core.judges.transform_policy import unsafe_sql
from support.corpora.hostile_transforms import HOSTILE, LEGITIMATE, SCHEMA, Hostile


def spec(sql: str) -> DerivedViewSpec:
    return DerivedViewSpec.model_validate({
        "source": {"kafka": {"bootstrapServers": "kafka:9092"}, "topics": ["orders"],
                   "schema": SCHEMA},
        "transform": {"sql": sql},
        "sink": {"postgres": {"secretRef": {"name": "db"}, "table": "orders"},
                 "primaryKey": ["order_id"]}})


def test_the_corpus_is_large_and_covers_every_class() -> None:
    assert len(HOSTILE) >= 60 and len(LEGITIMATE) >= 15
    assert len({h.cls for h in HOSTILE}) == 11
    assert len({h.what for h in HOSTILE}) == len(HOSTILE)


@pytest.mark.parametrize("hostile", HOSTILE, ids=[h.what for h in HOSTILE])
def test_every_hostile_transform_is_refused_by_the_operator(hostile: Hostile) -> None:
    if hostile.layer == "admission":  # the API's schema refuses it; the check would too
        with pytest.raises(ValidationError, match=hostile.operator):
            spec(hostile.text)
        message = unsafe_sql(hostile.text)
        assert message is not None and hostile.operator in message
        return
    refusal = check_spec(spec(hostile.text))
    assert refusal is not None, hostile.what
    assert (refusal.reason, hostile.operator in refusal.message) == (hostile.reason, True), (
        refusal)
    assert refusal.message.startswith("transform.sql: ")
    assert len(refusal.message) <= MESSAGE_CHARS


@pytest.mark.parametrize(("what", "sql"), LEGITIMATE, ids=[w for w, _ in LEGITIMATE])
def test_every_legitimate_transform_is_allowed_by_the_operator(what: str, sql: str) -> None:
    assert unsafe_sql(sql) is None
    assert check_sql(sql, parse_schema(SCHEMA), "json", ()) is None


def test_the_operator_and_the_job_allow_the_same_functions() -> None:
    from dvjob.sql import allowlist as sql_allowlist

    assert spark_allowlist.FUNCTIONS == sql_allowlist.FUNCTIONS
    assert spark_allowlist.REFUSED_FUNCTIONS == sql_allowlist.REFUSED_FUNCTIONS
    assert spark_allowlist.TABLE_FUNCTIONS == sql_allowlist.TABLE_FUNCTIONS
    assert spark_allowlist.SCHEMA_ARGUMENTS == sql_allowlist.SCHEMA_ARGUMENTS
    assert spark_allowlist.OPTIONS_ARGUMENTS == sql_allowlist.OPTIONS_ARGUMENTS
    assert spark_allowlist.MOST_ARGUMENTS == sql_allowlist.MOST_ARGUMENTS
    assert spark_allowlist.OPTION_KEYS == sql_allowlist.OPTION_KEYS
    assert not {"reflect", "java_method", "try_reflect"} & spark_allowlist.FUNCTIONS
    assert set(spark_allowlist.SCHEMA_ARGUMENTS) | set(spark_allowlist.OPTIONS_ARGUMENTS) == set(
        spark_allowlist.MOST_ARGUMENTS)


JSON_TYPES = [
    '"integer"', '"decimal(10,2)"', '"interval day to second"',
    '{"type":"struct","fields":[{"name":"a","type":"integer","nullable":true,"metadata":{}}]}',
    '{"type":"array","elementType":"string","containsNull":true}',
    '{"type":"map","keyType":"string","valueType":{"type":"array","elementType":"long",'
    '"containsNull":false},"valueContainsNull":true}',
    '{"type":"struct","fields":[{"name":"a","type":"integer"}]}',
    '{"type":"udt","class":"java.util.Timer","pyClass":null,"sqlType":"string"}',
    '{"type":"struct","fields":[{"name":"a","type":{"type":"udt","class":"x.Y","pyClass":null,'
    '"sqlType":"string"},"nullable":true,"metadata":{}}]}',
    '{"type":"array","elementType":{"type":"map","keyType":"string","valueType":{"type":"udt",'
    '"class":"x.Y","pyClass":null,"sqlType":"string"},"valueContainsNull":true},'
    '"containsNull":true}',
    '{"type":"struct","fields":[],"class":"x.Y"}', '{"type":"struct","type":"struct","fields":[]}',
    '{"type":"array","elementType":"string","containsNull":1}', '{"type":"struct"}',
    '{"type":"struct","fields":[{"name":"a","type":NaN}]}', '{"type":"struct","fields":[]} x',
    '"java.util.Timer"', "[1]", "{" * 100 + "}" * 100,
    '{"type":"struct","fields":[' + '{"name":"a","type":{"type":"struct","fields":[' * 70
    + '{"name":"b","type":"integer"}' + "]}}" * 70 + "]}",
]


@pytest.mark.parametrize("text", JSON_TYPES, ids=[t[:50] for t in JSON_TYPES])
def test_the_operator_and_the_job_read_json_types_alike(text: str) -> None:
    """Two copies of one strict reader (the operator ships no job code): the same verdicts
    and words on every shape, udt or not, deep or not."""
    from dvjob.sql import guard as sql_guard

    assert sql_policy.json_type_problem(text) == sql_guard.json_type_problem(text)


def test_comments_are_blanked_as_spark_drops_them_keeping_positions() -> None:
    sql = "SELECT a -- x\n, b /* y\n z */ FROM events"
    lexed = lex(sql)
    assert len(lexed.text) == len(sql) and lexed.text.count("\n") == 2
    assert "x" not in lexed.text and "z" not in lexed.text
    assert lexed.words == ("SELECT", "A", "B", "FROM", "EVENTS")


def test_strings_keep_their_extent_and_raw_strings_become_plain() -> None:
    assert lex("SELECT 'a -- b' AS s").text == "SELECT 'a -- b' AS s"
    assert lex('SELECT "it\'s"').text == "SELECT 'it\\'s'"
    assert lex("SELECT R'\\d'").text == "SELECT '\\\\d'"
    assert lex("SELECT 'a\\' -- b' AS s").words == ("SELECT", "AS", "S")


@pytest.mark.parametrize(("sql", "words"), [
    ("SELECT 1 -- a\\\n, 2", "ends in a backslash"),
    ("SELECT 1 /* a /* b */ */", "inside the comment"),
    ("SELECT 1 /* a", "is not closed"),
    ("SELECT 'a", "is not closed"),
    ("SELECT `a", "is not closed"),
    ("SELECT '${x}'", "`${`"),
    ("SELECT 1\x00", "control character"),
    ("SELECT é", "outside quotes"),
    ("EXECUTE  IMMEDIATE 'x'", "EXECUTE IMMEDIATE"),
])
def test_text_spark_and_sqlglot_could_read_differently_is_refused(sql: str, words: str) -> None:
    with pytest.raises(SqlTextError, match=words.replace("$", r"\$")):
        lex(sql)


def test_execute_immediate_inside_a_string_is_only_a_string() -> None:
    assert lex("SELECT 'EXECUTE IMMEDIATE' AS s").words == ("SELECT", "AS", "S")


def test_giant_names_cost_little_and_are_cut_in_the_message() -> None:
    started = time.perf_counter()
    refusal = check_spec(spec("SELECT " + "b" * 60000 + " FROM events"))
    assert time.perf_counter() - started < 2.0
    assert refusal is not None and len(refusal.message) <= MESSAGE_CHARS
    assert "b" * 129 not in refusal.message


def test_judging_is_cached_per_text() -> None:
    sql = "SELECT order_id, " + ", ".join(f"amount AS a{i}" for i in range(500)) + " FROM events"
    check_spec(spec(sql))
    started = time.perf_counter()
    for _ in range(100):
        check_spec(spec(sql))
    assert time.perf_counter() - started < 0.5
