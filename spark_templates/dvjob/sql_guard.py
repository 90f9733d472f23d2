"""The job's own check of a view's SQL: a query over `events`, by Spark's own reading.

The driver holds the sink's password in its environment, so SQL that reaches
the JVM (`reflect('java.lang.System', 'getenv', 'PGPASSWORD')`), runs a command
(`SELECT TRANSFORM(...) USING 'sh ...'`), runs a string as SQL (`EXECUTE
IMMEDIATE`), loads code (`ADD JAR`), writes (`INSERT OVERWRITE DIRECTORY`) or
reads files (`csv.\\`file:///...\\``) would hand the view's author the job's
credentials. The operator refuses such SQL before any job starts
(core/sql_policy.py, with sqlglot and a lexer that follows Spark's); this check
is the authority, because it judges what Spark itself parsed and analysed, and a
job started by hand is held to the same rule.

It is an allowlist (dvjob/sql_allowlist.py): every node of the parsed plan
(children, CTE definitions, subquery plans) must be a query node, every
function a listed built-in, and after analysis every node again, with the view
`events` the only relation. As a second wall, the session substitutes no
`${...}` variables, forgets the reflection functions and refuses SQL on files.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from dvjob.errors import ConfigError
from dvjob.sql_allowlist import (
    FUNCTIONS,
    PLAN_NODES,
    REFUSED_EXPRESSIONS,
    REFUSED_FUNCTIONS,
    TABLE_FUNCTIONS,
)

JVM_FUNCTIONS = ("reflect", "java_method", "try_reflect")
"""Spark 4.0's CallMethodViaReflection under its names: any static Java method."""
EVENTS_VIEW = "events"
HINT_VALUES = frozenset({"Literal", "UnresolvedAttribute"})
MAX_SQL_CHARS = 65536
MAX_DEPTH = 64
"""Nesting (plan or expression) deeper than any view needs: beyond it the query is refused
before Spark's own recursion is tried."""
RULE = ("a view's SQL may only query `events`: a SELECT (or WITH ... SELECT), without commands, "
        "file relations or functions that reach the JVM, the environment or files")
NO_SUBSTITUTION = {"spark.sql.variable.substitute": "false", "spark.sql.runSQLOnFiles": "false"}
"""Set by the job on its session at run time, so no sparkConf of the author's turns them back
on: `${env:PGPASSWORD}` in SQL text is not replaced by the job's environment, and
`csv.\\`path\\`` is not a relation."""
CONTINUED_COMMENT = re.compile(r"--[^\r\n]*\\\n")
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_PLAN = "org.apache.spark.sql.catalyst.plans.logical."


def harden(spark: SparkSession) -> None:
    """Session settings that hold even if a query got past `check`: no variable substitution,
    no SQL on files, no reflection functions. Call before any of the view's SQL is parsed."""
    for key, value in NO_SUBSTITUTION.items():
        spark.conf.set(key, value)
    jvm: Any = spark._jvm  # py4j: no public API for the session catalog
    registry = spark._jsparkSession.sessionState().functionRegistry()
    for name in JVM_FUNCTIONS:
        registry.dropFunction(jvm.org.apache.spark.sql.catalyst.FunctionIdentifier.apply(name))


def query(spark: SparkSession, sql: str) -> DataFrame:
    """`sql` as a DataFrame over the session's `events`, once its parsed and analysed plans
    pass; ConfigError naming the first thing that is not allowed."""
    check(spark, sql)
    try:
        frame = spark.sql(sql)
    except Exception as exc:  # AnalysisException / ParseException name the problem
        raise ConfigError(f"transform.sql: {_first_line(exc)}") from None
    check_analyzed(frame)
    return frame


def check(spark: SparkSession, sql: str) -> None:
    """Raise ConfigError naming what makes `sql`, as Spark's parser reads it, more than a
    query over `events`."""
    if len(sql) > MAX_SQL_CHARS:
        raise ConfigError(f"transform.sql: {len(sql)} characters, more than the "
                          f"{MAX_SQL_CHARS} a view's SQL may have; {RULE}")
    if "${" in sql:
        raise ConfigError("transform.sql: `${` asks Spark to substitute a variable (`${env:X}` "
                          "would put the job's environment into the SQL) and the job "
                          f"substitutes none: remove it; {RULE}")
    text_problem = _text_problem(sql)
    if text_problem is not None:
        raise ConfigError(f"transform.sql: {text_problem}; {RULE}")
    parser = spark._jsparkSession.sessionState().sqlParser()
    try:
        plan = parser.parsePlan(sql)
    except Exception as exc:  # ParseException: Spark's own words, first line
        raise ConfigError(f"transform.sql: {_first_line(exc)}") from None
    problem = _problem(spark, plan, analyzed=False)
    if problem is not None:
        raise ConfigError(f"transform.sql: {problem}; {RULE}")


def _text_problem(sql: str) -> str | None:
    """What the operator refuses because another reader would see a different query (a `--`
    comment that a backslash continues onto the next line, a control character) or because
    it costs too much (deep parentheses). The job reads the text as Spark does, but holds it
    to the same rules so both refuse alike."""
    continued = CONTINUED_COMMENT.search(sql)
    if continued is not None:
        return ("a `--` comment ends in a backslash, which in Spark continues the comment onto "
                "the next line: remove the backslash")
    control = CONTROL.search(sql)
    if control is not None:
        return f"control character {control.group()!r}: remove it"
    depth = deepest = 0
    for ch in sql:  # parentheses leave no node behind: counted in the text (strings too)
        depth += (ch == "(") - (ch == ")")
        deepest = max(deepest, depth)
    if deepest > MAX_DEPTH:
        return f"the query nests deeper than {MAX_DEPTH} levels of parentheses: simplify it"
    return None


def check_analyzed(frame: DataFrame) -> None:
    """Raise ConfigError if the analysed plan holds a node that is not allowed (what only
    analysis reveals: what a name resolved to, a view other than `events`)."""
    plan = frame._jdf.queryExecution().analyzed()
    problem = _problem(frame.sparkSession, plan, analyzed=True)
    if problem is not None:
        raise ConfigError(f"transform.sql: {problem}; {RULE}")


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:500]


def _problem(spark: SparkSession, root: Any, *, analyzed: bool) -> str | None:
    jvm: Any = spark._jvm
    commands = [jvm.java.lang.Class.forName(_PLAN + name)
                for name in ("Command", "ParsedStatement", "InsertIntoDir")]
    for node, depth in _plans(root):
        name = _name(node)
        if depth > MAX_DEPTH:
            return f"the query nests deeper than {MAX_DEPTH} levels: simplify it"
        if name not in PLAN_NODES:
            return _node_refusal(node, name, commands)
        problem = _relation_problem(node, name)
        if problem is not None:
            return problem
        if name == "View" or analyzed:
            # Behind `events` is the job's own plan. After analysis only the nodes are
            # judged again: every function was named, and judged, in the parsed plan (the
            # session has no function but the registry's, no view but `events`), and a walk
            # over the analysed expressions would double the guard's cost for nothing.
            continue
        for expression, level in _expressions(node):
            if level > MAX_DEPTH:
                return f"an expression nests deeper than {MAX_DEPTH} levels: simplify it"
            problem = _expression_problem(expression)
            if problem is not None:
                return problem
    return None


def _node_refusal(node: Any, name: str, commands: list[Any]) -> str:
    if name == "ScriptTransformation":
        return "TRANSFORM ... USING runs a command on the job's pods"
    if name in ("ExecuteImmediateQuery", "UnresolvedExecuteImmediate"):
        return (f"EXECUTE IMMEDIATE runs a string as SQL that no check has read (Spark's "
                f"{name})")
    if any(kind.isInstance(node) for kind in commands):
        return f"{_words(name)} is a command, not a query (Spark's {name})"
    return f"Spark's plan node {name} is not one a view's query may use"


def _relation_problem(node: Any, name: str) -> str | None:
    if name == "UnresolvedRelation":
        parts = [str(p) for p in _seq(node.multipartIdentifier())]
        if len(parts) > 1:
            return f"{'.'.join(parts)} reads a file or a catalog table"
        # A plain unknown name is Spark's own TABLE_OR_VIEW_NOT_FOUND at analysis: the
        # session's catalog holds nothing but `events`.
    if name == "UnresolvedTableValuedFunction":
        function = ".".join(str(p) for p in _seq(node.name())).lower()
        if function not in TABLE_FUNCTIONS:
            return f"table-valued function {function}() is not a generator over its arguments"
    if name == "UnresolvedHint":  # its parameters are no expressions of the node's
        for parameter in _seq(node.parameters()):
            if not isinstance(parameter, (str, int)) and _name(parameter) not in HINT_VALUES:
                return "a hint's parameters may only be column names and numbers"
    if name == "View":
        table = str(node.desc().identifier().table()).lower()
        if not node.isTempView() or table != EVENTS_VIEW:
            return f"view {table} is not `{EVENTS_VIEW}`, the one relation a view may read"
    return None


def _expression_problem(expression: Any) -> str | None:
    name = _name(expression)
    if name in REFUSED_EXPRESSIONS:
        if name == "CallMethodViaReflection":
            return f"{expression.prettyName()}() reaches the JVM"
        if name == "ExpressionWithUnresolvedIdentifier":
            return "IDENTIFIER(...) names a function only when the query runs"
        return f"Spark's expression {name} is not one a view's query may use"
    if name == "UnresolvedFunction":
        parts = [str(p) for p in _seq(expression.nameParts())]
        return _function_problem(".".join(parts).lower(), len(parts))
    if name == "UnresolvedGenerator":
        identifier = expression.name()
        qualified = bool(identifier.database().isDefined())
        return _function_problem(str(identifier.unquotedString()).lower(),
                                 2 if qualified else 1)
    return None


def _function_problem(function: str, parts: int) -> str | None:
    if parts == 1 and function in FUNCTIONS:
        return None
    if function in REFUSED_FUNCTIONS:
        return f"{function}() {REFUSED_FUNCTIONS[function]}"
    return f"{function}() is not a built-in function a view may call"


def _plans(root: Any) -> Iterator[tuple[Any, int]]:
    """Every plan node with its depth: children, CTE definitions and subquery plans
    (innerChildren); not below the view `events`."""
    stack = [(root, 0)]
    while stack:
        node, depth = stack.pop()
        yield node, depth
        if _name(node) == "View":
            continue
        stack.extend((child, depth + 1) for child in _seq(node.children()))
        stack.extend((inner, depth + 1) for inner in _seq(node.innerChildren()))


def _expressions(node: Any) -> Iterator[tuple[Any, int]]:
    stack = [(e, 1) for e in _seq(node.expressions())]
    while stack:
        expression, depth = stack.pop()
        yield expression, depth
        stack.extend((child, depth + 1) for child in _seq(expression.children()))


def _seq(seq: Any) -> list[Any]:
    """A Scala Seq through py4j, as a list (size and apply: the fewest round trips)."""
    return [seq.apply(i) for i in range(seq.size())]


def _name(node: Any) -> str:
    """The class's simple name (TreeNode.nodeName: one round trip, not two)."""
    return str(node.nodeName())


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
