"""core.check_sql over the hostile and legitimate checks of tests/hostile_checks.py: every
hostile one refused with its message, every legitimate one accepted."""

from __future__ import annotations

import pytest

from derived_views.api.spec import SqlAssertion
from derived_views.core.check_sql import check_sql_problem
from derived_views.core.checks import rendered_sql
from hostile_checks import HOSTILE, LEGITIMATE, Hostile, Legitimate

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
