"""core.judges.assertion_sql over the hostile and legitimate checks of tests/hostile_checks.py: every
hostile one refused with its message, every legitimate one accepted; what it refuses as too
large, and how it delimits the one statement the adapter wraps."""

from __future__ import annotations

import pytest

from derived_views.api.spec import SqlAssertion
from derived_views.core.cutover.checks import rendered_sql
from derived_views.core.judges.assertion_sql import (
    ALLOWED_FUNCTIONS,
    SIZED,
    check_sql_problem,
    statement_text,
)
from support.corpora.hostile_checks import (
    HOSTILE,
    LEGITIMATE,
    MISREAD,
    Hostile,
    Legitimate,
    Misread,
)

SCHEMA, INDEX, ACTIVE = "team_a", "orders__cand000001", "orders__actv000001"
TABLES = frozenset({(SCHEMA, INDEX), (SCHEMA, ACTIVE)})


def problem(sql: str) -> str | None:
    assertion = SqlAssertion(name="check", sql=sql)
    return check_sql_problem(rendered_sql(assertion, SCHEMA, INDEX, ACTIVE), TABLES)


def test_the_corpus_is_large_and_covers_the_classes() -> None:
    assert len(HOSTILE) >= 40 and len(LEGITIMATE) >= 10
    assert len({h.cls for h in HOSTILE}) >= 20


@pytest.mark.parametrize("hostile", HOSTILE, ids=lambda h: f"{h.cls}: {h.sql[:60]}")
def test_hostile_checks_are_refused(hostile: Hostile) -> None:
    why = problem(hostile.sql)
    assert why is not None, hostile.sql
    assert hostile.expected in why


@pytest.mark.parametrize("legit", LEGITIMATE, ids=lambda c: c.what)
def test_legitimate_checks_pass(legit: Legitimate) -> None:
    assert problem(legit.sql) is None


def test_only_the_views_own_tables_of_its_schema() -> None:
    # the same table names in another schema, or another view's index in the same schema
    assert problem('SELECT 1 FROM {index}, "other"."orders__actv000001"') is not None
    assert problem('SELECT 1 FROM {index}, "team_a"."orders__zzzz000001"') is not None
    assert problem('SELECT 1 FROM {index}, "team_a"."orders__actv000001"') is None
    # unqualified, the index name resolves through search_path: refused
    assert "table orders__actv000001 is not allowed" in (
        problem("SELECT 1 FROM {index}, orders__actv000001") or "")


def test_a_cte_name_is_visible_only_where_postgres_sees_it() -> None:
    # a later sibling and nested queries see it
    assert problem("WITH a AS (SELECT 1 FROM {index}), b AS (SELECT * FROM a) "
                   "SELECT * FROM b WHERE EXISTS (SELECT 1 FROM a)") is None
    # an earlier sibling does not (it would read a table of that name)
    assert "table b is not allowed" in (
        problem("WITH a AS (SELECT * FROM b), b AS (SELECT 1 FROM {index}) SELECT * FROM a")
        or "")


def test_a_parse_error_is_postgres_own_message() -> None:
    why = problem("SELECT FROM {index} WHERE AND")
    assert why is not None and why.startswith('PostgreSQL cannot parse it: syntax error at or '
                                              'near "AND"')


def test_deep_nesting_fails_closed() -> None:
    def nested(depth: int) -> str | None:
        sql = "SELECT " + "(SELECT " * depth + "1" + ")" * depth + f' FROM "{SCHEMA}"."{INDEX}"'
        return check_sql_problem(sql, TABLES)

    assert nested(100) is None
    assert nested(1000) == "it nests too deeply to be checked; simplify the query"
    assert (nested(5000) or "").startswith("PostgreSQL cannot parse it: memory exhausted")


def test_verdicts_are_cached_per_text() -> None:
    sql = "SELECT count(*) = 0 FROM {index} WHERE balance < 0"
    before = check_sql_problem.cache_info().hits
    problem(sql)
    problem(sql)
    assert check_sql_problem.cache_info().hits == before + 1


def test_nothing_that_builds_a_large_value_from_a_small_text_is_allowed() -> None:
    """The allowlist holds no function whose result is as large as a number it is given or
    grows with every row it reads; format() is allowed only without widths."""
    assert not SIZED.keys() & ALLOWED_FUNCTIONS
    for name in ("repeat", "lpad", "rpad", "generate_series", "string_agg", "array_agg",
                 "json_agg", "jsonb_agg", "json_object_agg", "jsonb_object_agg"):
        assert name in SIZED, name
    assert "format" in ALLOWED_FUNCTIONS
    for fmt in ("%s", "%1$s", "%-s", "%I", "%L", "%%", "c-%s and %2$-s, 100%%", "no specifier"):
        assert problem(f"SELECT format('{fmt}', customer_id) FROM {{index}}") is None, fmt
    for fmt in ("%5s", "%*s", "%-5s", "%1$5s", "%*1$s", "%d", "%", "%%%"):
        assert problem(f"SELECT format('{fmt}', 1) FROM {{index}}") is not None, fmt
    assert problem("SELECT 'x'::char(1000), 'x'::character varying(100000) FROM {index}") is None
    assert problem("SELECT CAST('x' AS character(1001)) FROM {index}") is not None


@pytest.mark.parametrize("misread", MISREAD, ids=lambda m: m.what)
def test_texts_a_session_could_misread_are_accepted(misread: Misread) -> None:
    """They pass the policy: what keeps them harmless is the adapter pinning the settings
    (tests/integration/adapters/test_postgres_checks.py)."""
    assert problem(misread.sql) is None


def test_the_statement_is_delimited_as_postgres_delimits_it() -> None:
    assert statement_text("SELECT 1;  -- done\n") == "SELECT 1"
    assert statement_text("/* é */ SELECT 'ü' ;") == "SELECT 'ü' "
    assert statement_text("SELECT 1 -- no semicolon") == "SELECT 1 -- no semicolon"
    assert statement_text("SELECT ';' AS \";\"; ") == "SELECT ';' AS \";\""
    assert statement_text("SELECT 1; SELECT 2") is None
    assert statement_text("-- nothing") is None
    assert statement_text("SELECT (") is None
