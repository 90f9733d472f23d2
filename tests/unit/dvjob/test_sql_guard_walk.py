"""The job's guard walks every expression Spark's plans hold, in every clause a query has.

Each function of Spark's own registry that is off the allowlist is called in
every clause position (SELECT list, WHERE, GROUP BY, HAVING, ORDER BY, window
PARTITION/ORDER BY, a named WINDOW clause, lambdas, subqueries in SELECT, WHERE
and FROM, CTEs, the pipe operators, LATERAL VIEW, TABLESAMPLE, hints, ...): the
guard refuses each before Spark analyses anything. Every position is first shown
to be a query the guard and Spark accept with an allowlisted function, so the
refusal is the function's. The walk itself is held to reach at least what
Spark's own accessors (children, innerChildren, expressions) reach.
"""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import SparkSession

from dvjob.errors import ConfigError
from dvjob.sql import guard as sql_guard
from dvjob.sql import tree as sql_tree
from dvjob.sql.allowlist import FUNCTIONS, REFUSED_EXPRESSIONS, TABLE_FUNCTIONS
from support.corpora.hostile_transforms import ALLOWED, FILLERS, LEGITIMATE, POSITIONS

HINT_RULE = "a hint's parameters may only be column names and numbers"


def _registry_names(spark: SparkSession) -> set[str]:
    ids = spark._jsparkSession.sessionState().functionRegistry().listFunction()
    return {str(ids.apply(i).funcName()) for i in range(ids.size())}


@pytest.fixture(scope="module")
def forbidden(spark: SparkSession, events: None) -> list[str]:
    """Every function of Spark's registry off the allowlist (the reflection functions, which
    the hardened session has dropped, among them), operators called by name too."""
    names = sorted(_registry_names(spark) - FUNCTIONS | set(sql_guard.JVM_FUNCTIONS))
    assert len(names) >= 40 and {"xpath_string", "input_file_name", "from_avro"} <= set(names)
    return names


def refusal(spark: SparkSession, sql: str) -> str | None:
    try:
        sql_guard.check(spark, sql)
    except ConfigError as exc:
        return str(exc)
    return None


@pytest.mark.parametrize(("where", "template"), POSITIONS, ids=[p[0] for p in POSITIONS])
def test_each_position_is_a_query_the_guard_and_spark_accept(
        spark: SparkSession, events: None, where: str, template: str) -> None:
    sql_guard.query(spark, template.format(f=FILLERS.get(where, ALLOWED)))


@pytest.mark.parametrize(("where", "template"), POSITIONS, ids=[p[0] for p in POSITIONS])
def test_every_registry_function_off_the_allowlist_is_refused_in_every_position(
        spark: SparkSession, forbidden: list[str], where: str, template: str) -> None:
    """The full cross product: each function, back-quoted (operators have names too), in
    each position; refused by the parsed plan's walk, before any analysis."""
    for name in forbidden:
        message = refusal(spark, template.format(f=f"`{name}`(order_id)"))
        expected = HINT_RULE if where == "hint" else f"{name}()"
        assert message is not None and expected in message, (where, name, message)


def test_every_allowlisted_registry_function_passes_the_parsed_walk(
        spark: SparkSession, events: None) -> None:
    """No false refusal by name: each allowlisted function, called in the SELECT list (with
    a schema where it reads one), passes the walk of the parsed plan."""
    schema_calls = {"from_json": "from_json(order_id, 'a INT')",
                    "from_csv": "from_csv(order_id, 'a INT')",
                    "variant_get": "variant_get(parse_json(order_id), '$', 'int')",
                    "try_variant_get": "try_variant_get(parse_json(order_id), '$', 'int')"}
    registry = _registry_names(spark)
    assert registry >= FUNCTIONS  # the allowlist names nothing Spark 4.0 lacks
    for name in sorted(FUNCTIONS):
        call = schema_calls.get(name, f"`{name}`(order_id)")
        assert refusal(spark, f"SELECT {call} AS x FROM events") is None, name
    for name in sorted(TABLE_FUNCTIONS - {"range"}):
        assert refusal(spark, f"SELECT * FROM {name}(array(1))") is None, name


def _identities(spark: SparkSession, nodes: Any) -> set[int]:
    identity = spark._jvm.java.lang.System.identityHashCode
    return {int(identity(node)) for node in nodes}


def _parsed(spark: SparkSession, sql: str) -> Any:
    return spark._jsparkSession.sessionState().sqlParser().parsePlan(sql)


WALKED = [template.format(f=FILLERS.get(where, ALLOWED)) for where, template in POSITIONS] + [
    sql for _, sql in LEGITIMATE]


def test_the_field_walk_reaches_all_that_sparks_accessors_reach(
        spark: SparkSession, events: None) -> None:
    """On parsed plans, every node children/innerChildren/expressions reach is reached by
    the walk over constructor arguments; on analysed plans, the accessor walk the guard uses
    reaches every node above the view `events`."""
    for sql in WALKED:
        plan = _parsed(spark, sql)
        walked = _identities(spark, (n.obj for n in sql_tree.parsed_nodes(spark._jvm, plan)))
        assert _identities(spark, sql_tree.accessor_nodes(spark._jvm, plan)) <= walked, sql
        analysed = spark.sql(sql)._jdf.queryExecution().analyzed()
        walked = _identities(spark, (n.obj for n in sql_tree.analysed_nodes(spark._jvm,
                                                                              analysed)))
        reached = _identities(spark, sql_tree.accessor_nodes(spark._jvm, analysed, "View"))
        assert reached <= walked, sql


@pytest.mark.parametrize("where", ["named WINDOW clause", "pipe |> SET"])
def test_the_field_walk_finds_what_the_accessors_miss(
        spark: SparkSession, events: None, where: str) -> None:
    """The two places of the issue: Spark's accessors do not reach a named window's
    definition nor a pipe SET's replacement in the parsed plan; the field walk does."""
    sql = dict(POSITIONS)[where].format(f="xpath_string(order_id, '/a')")
    plan = _parsed(spark, sql)

    def functions(nodes: Any) -> set[str]:
        return {str(node.nameParts().apply(0)) for node in nodes
                if str(node.nodeName()) == "UnresolvedFunction"}

    assert "xpath_string" not in functions(sql_tree.accessor_nodes(spark._jvm, plan))
    assert "xpath_string" in functions(
        n.obj for n in sql_tree.parsed_nodes(spark._jvm, plan))


def test_every_refused_function_is_refused_by_class_after_analysis(
        spark: SparkSession, events: None) -> None:
    """REFUSED_EXPRESSIONS, by which the analysed plan is judged, holds the class of every
    registry function off the allowlist (named by a word; operators are syntax), except a
    class an allowlisted function shares."""
    registry = spark._jsparkSession.sessionState().functionRegistry()
    identifier = spark._jvm.org.apache.spark.sql.catalyst.FunctionIdentifier.apply

    def simple_class(name: str) -> str:
        return str(registry.lookupFunction(identifier(name)).get().getClassName()).rsplit(
            ".", 1)[-1]

    allowed = {simple_class(name) for name in FUNCTIONS}
    off = {simple_class(name) for name in _registry_names(spark) - FUNCTIONS
           if name.replace("_", "").isalnum()}
    assert off - allowed <= REFUSED_EXPRESSIONS, sorted(off - allowed - REFUSED_EXPRESSIONS)


def test_the_analysed_plan_is_judged_by_class(spark: SparkSession, events: None) -> None:
    """Behind the parsed walk, the analysed one: a refused class anywhere an analysed plan
    holds an expression is refused (here past a check of the parsed plan, by hand)."""
    frame = spark.sql("SELECT order_id, row_number() OVER w AS n FROM events "
                      "WINDOW w AS (ORDER BY input_file_name())")
    with pytest.raises(ConfigError, match=r"input_file_name\(\) \(Spark.s InputFileName\)"):
        sql_guard.check_analyzed(frame)
