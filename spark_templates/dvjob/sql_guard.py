"""The job's own check of a view's SQL: a query over `events`, nothing that leaves it.

The driver holds the sink's password in its environment, so SQL that reaches
the JVM (`reflect('java.lang.System', 'getenv', 'PGPASSWORD')`), runs a command
(`SELECT TRANSFORM(...) USING 'sh ...'`), loads code (`ADD JAR`), writes
(`INSERT OVERWRITE DIRECTORY`) or reads files (`csv.\\`file:///...\\``) would
hand the view's author the job's credentials. The operator refuses such SQL
before any job starts (core/sql_policy.py, with sqlglot); the job repeats the
check with Spark's own parser, so no gap between the two parsers lets anything
through, and a job started by hand is held to the same rule.

The check walks the unresolved plan Spark's parser returns: every plan node
(children, CTE definitions, subquery plans) and every expression in them
(lambdas and nested subqueries included). As a second wall, the session
forgets the reflection functions and refuses SQL on files.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyspark.sql import SparkSession

from dvjob.errors import ConfigError

JVM_FUNCTIONS = ("reflect", "java_method", "try_reflect")
"""Spark 4.0's CallMethodViaReflection under its names: any static Java method."""
GENERATORS = frozenset({"range", "explode", "explode_outer", "inline", "inline_outer",
                        "posexplode", "posexplode_outer", "stack", "json_tuple",
                        "variant_explode", "variant_explode_outer"})
"""Table-valued functions that read nothing but their arguments."""
RULE = ("a view's SQL may only query `events`: a SELECT (or WITH ... SELECT), without commands, "
        "file relations or functions that reach the JVM, the environment or files")
_PLAN = "org.apache.spark.sql.catalyst.plans.logical."


def harden(spark: SparkSession) -> None:
    """Session settings that hold even if a query got past `check`: no reflection functions,
    no SQL on files."""
    spark.conf.set("spark.sql.runSQLOnFiles", "false")
    jvm: Any = spark._jvm  # py4j: no public API for the session catalog
    registry = spark._jsparkSession.sessionState().functionRegistry()
    for name in JVM_FUNCTIONS:
        registry.dropFunction(jvm.org.apache.spark.sql.catalyst.FunctionIdentifier.apply(name))


def check(spark: SparkSession, sql: str) -> None:
    """Raise ConfigError naming what makes `sql` more than a query over `events`."""
    parser = spark._jsparkSession.sessionState().sqlParser()
    try:
        plan = parser.parsePlan(sql)
    except Exception as exc:  # ParseException: Spark's own words, first line
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ConfigError(f"transform.sql: {first[:500]}") from None
    problem = _problem(spark, plan)
    if problem is not None:
        raise ConfigError(f"transform.sql: {problem}; {RULE}")


def _problem(spark: SparkSession, root: Any) -> str | None:
    jvm: Any = spark._jvm
    forbidden = [jvm.java.lang.Class.forName(_PLAN + name)
                 for name in ("Command", "ParsedStatement", "InsertIntoDir")]
    for node in _plans(root):
        name = _name(node)
        if any(kind.isInstance(node) for kind in forbidden):
            return f"{_words(name)} is a command, not a query"
        if name == "ScriptTransformation":
            return "TRANSFORM ... USING runs a command on the job's pods"
        if name == "UnresolvedRelation":
            parts = [str(p) for p in _seq(node.multipartIdentifier())]
            if len(parts) > 1:
                return f"{'.'.join(parts)} reads a file or a catalog table"
            # A plain unknown name is left to Spark's own TABLE_OR_VIEW_NOT_FOUND: the
            # session's catalog holds nothing but `events`.
        if name == "UnresolvedTableValuedFunction":
            function = ".".join(str(p) for p in _seq(node.name())).lower()
            if function not in GENERATORS:
                return f"table-valued function {function}() is not a generator over its arguments"
        for expression in _expressions(node):
            if _name(expression) == "UnresolvedFunction":
                function = ".".join(str(p) for p in _seq(expression.nameParts())).lower()
                if function.rsplit(".", 1)[-1] in JVM_FUNCTIONS:
                    return f"{function}() reaches the JVM"
    return None


def _plans(root: Any) -> Iterator[Any]:
    """Every plan node: children, CTE definitions and subquery plans (innerChildren)."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(_seq(node.children()))
        stack.extend(_seq(node.innerChildren()))


def _expressions(node: Any) -> Iterator[Any]:
    stack = list(_seq(node.expressions()))
    while stack:
        expression = stack.pop()
        yield expression
        stack.extend(_seq(expression.children()))


def _seq(seq: Any) -> list[Any]:
    """A Scala Seq through py4j, as a list."""
    items, it = [], seq.iterator()
    while it.hasNext():
        items.append(it.next())
    return items


def _name(node: Any) -> str:
    return str(node.getClass().getSimpleName())


def _words(class_name: str) -> str:
    """AddJarsCommand -> ADD JARS: the command as its SQL reads."""
    words, word = [], ""
    for ch in class_name.removesuffix("Command").removesuffix("Statement"):
        if ch.isupper() and word:
            words.append(word)
            word = ""
        word += ch
    words.append(word)
    return " ".join(w.upper() for w in words if w)
