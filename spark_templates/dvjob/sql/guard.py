"""The job's own check of a view's SQL: a query over `events`, by Spark's own reading.

The driver holds the sink's password in its environment, so SQL that reaches
the JVM (`reflect('java.lang.System', 'getenv', 'PGPASSWORD')`), runs a command
(`SELECT TRANSFORM(...) USING 'sh ...'`), runs a string as SQL (`EXECUTE
IMMEDIATE`), loads code (`ADD JAR`), writes (`INSERT OVERWRITE DIRECTORY`) or
reads files (`csv.\\`file:///...\\``) would hand the view's author the job's
credentials. The operator refuses such SQL before any job starts
(core/judges/transform_policy.py, with sqlglot and a lexer that follows Spark's); this check
is the authority, because it judges what Spark itself parsed and analysed, and a
job started by hand is held to the same rule.

It is an allowlist (dvjob/sql/allowlist.py). Before Spark analyses anything,
every tree node of the parsed plan, wherever Spark keeps it (dvjob/sql/tree.py:
named windows, pipe operators, hints, lambdas, subqueries), must be a query node
or an expression that calls only listed built-ins; a function that reads a type
from a string (`from_json`, `variant_get`, ...) gets a string literal that names
no class, and its options only harmless keys, because Spark instantiates the type
and reads the options while it analyses, inside `spark.sql()`. After analysis
every node and expression is judged again, with the view `events` the only
relation. As a second wall, the session substitutes no `${...}` variables,
forgets the reflection functions and refuses SQL on files.
"""

from __future__ import annotations

import json
import re
from typing import Any, cast

from py4j.java_gateway import JavaObject  # type: ignore[import-untyped]
from pyspark.sql import DataFrame, SparkSession

from dvjob.errors import ConfigError
from dvjob.sql import tree as sql_tree
from dvjob.sql.allowlist import (
    FUNCTIONS,
    MOST_ARGUMENTS,
    OPTION_KEYS,
    OPTIONS_ARGUMENTS,
    PLAN_NODES,
    REFUSED_EXPRESSIONS,
    REFUSED_FUNCTIONS,
    SCHEMA_ARGUMENTS,
    TABLE_FUNCTIONS,
)

JVM_FUNCTIONS = ("reflect", "java_method", "try_reflect")
"""Spark 4.0's CallMethodViaReflection under its names: any static Java method."""
EVENTS_VIEW = "events"
HINT_VALUES = frozenset({"Literal", "UnresolvedAttribute"})
MAX_SQL_CHARS = 65536
SHOWN_NAME = 128
"""The longest function name quoted whole in a message."""
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
_LITERAL = "org.apache.spark.sql.catalyst.expressions.Literal"
_FUNCTION = "org.apache.spark.sql.catalyst.analysis.UnresolvedFunction"
_UTF8 = "org.apache.spark.unsafe.types.UTF8String"
JSON_TYPE_NAME = re.compile(r"[a-z_]+(?: [a-z_]+)*(?:\(\s*-?\d+\s*(?:,\s*-?\d+\s*)?\))?")
"""A type named in a JSON schema ("integer", "decimal(10,2)", "interval day to second"):
Spark looks it up among its own types and loads nothing."""
UDT_KEYS = frozenset({"class", "pyClass", "serializedClass", "sqlType"})
DDL_EXAMPLE = "write it as DDL, e.g. 'a INT, b STRUCT<c: STRING>'"


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
    query over `events`; nothing of it is analysed yet."""
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
    problem = _Judge(spark).parsed(plan)
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
    """Raise ConfigError if the analysed plan holds a node or an expression that is not
    allowed (what only analysis reveals: what a name resolved to, a view other than
    `events`, and every expression where analysis put it)."""
    plan = frame._jdf.queryExecution().analyzed()
    problem = _Judge(frame.sparkSession).analysed(plan)
    if problem is not None:
        raise ConfigError(f"transform.sql: {problem}; {RULE}")


def _first_line(exc: Exception) -> str:
    java = getattr(exc, "java_exception", None)  # py4j: the JVM's message, not py4j's
    text = str(java.getMessage()) if java is not None else str(exc)
    return (text.strip().splitlines() or [type(exc).__name__])[0][:500]


class _Judge:
    """The rules, applied to the nodes of one plan."""

    def __init__(self, spark: SparkSession) -> None:
        self._jvm: Any = cast(Any, spark._jvm)  # py4j: untyped
        self._class_name = sql_tree.class_name_of(self._jvm)
        self._commands: list[Any] | None = None

    def parsed(self, root: Any) -> str | None:
        try:
            for node in sql_tree.parsed_nodes(self._jvm, root):
                problem = self._depth_problem(node) or self._parsed_node_problem(node)
                if problem is not None:
                    return problem
        except sql_tree.TooLarge as exc:
            return str(exc)
        return None

    def analysed(self, root: Any) -> str | None:
        for node in sql_tree.analysed_nodes(self._jvm, root):
            problem = self._depth_problem(node)
            if problem is None and node.kind == sql_tree.PLAN:
                problem = self._plan_problem(node)
            elif problem is None and node.name in REFUSED_EXPRESSIONS:
                problem = _refused_expression(node.obj, node.name)
            if problem is not None:
                return problem
        return None

    @staticmethod
    def _depth_problem(node: sql_tree.Node) -> str | None:
        if node.plans > MAX_DEPTH:
            return f"the query nests deeper than {MAX_DEPTH} levels: simplify it"
        if node.expressions > MAX_DEPTH:
            return f"an expression nests deeper than {MAX_DEPTH} levels: simplify it"
        return None

    def _parsed_node_problem(self, node: sql_tree.Node) -> str | None:
        if node.kind == sql_tree.PLAN:
            return self._plan_problem(node)
        if node.name in REFUSED_EXPRESSIONS:
            return _refused_expression(node.obj, node.name)
        if node.name == "UnresolvedFunction":
            parts = [str(p) for p in _seq(node.obj.nameParts())]
            function = ".".join(parts).lower()
            return (_function_problem(function, len(parts))
                    or self._argument_problem(node.obj, function))
        if node.name == "UnresolvedGenerator":
            identifier = node.obj.name()
            qualified = bool(identifier.database().isDefined())
            return _function_problem(str(identifier.unquotedString()).lower(),
                                     2 if qualified else 1)
        return None

    def _plan_problem(self, node: sql_tree.Node) -> str | None:
        if node.name not in PLAN_NODES:
            return self._node_refusal(node.obj, node.name)
        return _relation_problem(node.obj, node.name)

    def _node_refusal(self, node: Any, name: str) -> str:
        if name == "ScriptTransformation":
            return "TRANSFORM ... USING runs a command on the job's pods"
        if name in ("ExecuteImmediateQuery", "UnresolvedExecuteImmediate"):
            return (f"EXECUTE IMMEDIATE runs a string as SQL that no check has read (Spark's "
                    f"{name})")
        if self._commands is None:
            for_name = self._jvm.java.lang.Class.forName
            self._commands = [for_name(_PLAN + kind)
                              for kind in ("Command", "ParsedStatement", "InsertIntoDir")]
        if any(kind.isInstance(node) for kind in self._commands):
            return f"{_words(name)} is a command, not a query (Spark's {name})"
        return f"Spark's plan node {name} is not one a view's query may use"

    def _argument_problem(self, function_node: Any, function: str) -> str | None:
        """The schema and options arguments of a function that reads them while Spark
        analyses the query (SCHEMA_ARGUMENTS, OPTIONS_ARGUMENTS), judged before it does."""
        if function not in MOST_ARGUMENTS:
            return None
        arguments = _seq(function_node.arguments())
        if len(arguments) > MOST_ARGUMENTS[function]:
            return f"{function}() takes at most {MOST_ARGUMENTS[function]} arguments"
        at = SCHEMA_ARGUMENTS.get(function)
        if at is not None:
            text = self._string_literal(arguments[at]) if len(arguments) > at else None
            if text is None:
                return (f"{function}() reads its type from argument {at + 1}, which must be "
                        f"a string literal (Spark evaluates it while analysing): {DDL_EXAMPLE}")
            problem = schema_problem(self._jvm, text)
            if problem is not None:
                return f"{function}()'s type {_shown(text)} {problem}"
        options = OPTIONS_ARGUMENTS.get(function)
        if options is not None and len(arguments) > options[0]:
            return self._options_problem(arguments[options[0]], function, options[1])
        return None

    def _options_problem(self, options: Any, function: str, family: str) -> str | None:
        shape = (f"{function}()'s options must be map('key', 'value', ...) of string "
                 "literals")
        if str(self._class_name(options, "")) != _FUNCTION or [
                str(p).lower() for p in _seq(options.nameParts())] != ["map"]:
            return shape
        texts = [self._string_literal(a) for a in _seq(options.arguments())]
        if len(texts) % 2 or None in texts:
            return shape
        for key in texts[0::2]:
            assert key is not None
            if key.lower() not in OPTION_KEYS[family]:
                return (f"{function}()'s option {_shown(key)} is not one a view may set: "
                        f"only {family.upper()} formats, separators, modes, time zones and "
                        "locales (no class names, charsets or files)")
        return None

    def _string_literal(self, expression: Any) -> str | None:
        """The value of a string Literal as Spark's parser made it (escapes resolved)."""
        if str(self._class_name(expression, "")) != _LITERAL:
            return None
        value = expression.value()
        if not isinstance(value, JavaObject) or str(self._class_name(value, "")) != _UTF8:
            return None
        return str(value.toString())


def schema_problem(jvm: Any, text: str) -> str | None:
    """Why Spark could instantiate a class, or could not read a type, from `text` (None when
    neither). `jvm`: the session's py4j view.

    Spark 4.0 reads it as DDL, else as JSON (ExprUtils.evalTypeExpr:
    DataType.parseTypeWithFallback). DDL has no syntax for a class (DataTypeAstBuilder maps
    keywords to built-in types), so a text without `{` is read with Spark's own DDL parser,
    which constructs nothing. A text with `{` may be a JSON object, where `{"type": "udt",
    "class": ...}` names a class Spark loads and instantiates: it is read here, strictly, and
    must hold built-in types only."""
    control = CONTROL.search(text)
    if control is not None:
        return f"holds the control character {control.group()!r}"
    if "{" in text:
        return json_type_problem(text)
    try:
        jvm.org.apache.spark.sql.types.DataType.fromDDL(text)
    except Exception as exc:  # Spark's own reading refused it: its words
        return f"is not a type Spark reads: {_first_line(exc)}"
    return None


def json_type_problem(text: str) -> str | None:
    """Why the JSON schema `text` is not plain built-in types, read strictly (no duplicate
    keys, no NaN, nothing after the value; each object exactly one of the shapes Spark 4.0's
    DataType.parseDataType matches, sql/api/.../types/DataType.scala), or None."""
    try:
        value = json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return f"is neither a DDL type nor JSON read strictly: {DDL_EXAMPLE}"
    return _json_type(value, 0)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("duplicate key")
    return dict(pairs)


def _no_constant(name: str) -> None:
    raise ValueError(name)


def _json_type(value: Any, depth: int) -> str | None:
    if depth > MAX_DEPTH:
        return f"nests deeper than {MAX_DEPTH} levels"
    if isinstance(value, str):
        return None if JSON_TYPE_NAME.fullmatch(value) else (
            f"names no Spark type ({_shown(value)}): {DDL_EXAMPLE}")
    if not isinstance(value, dict):
        return f"is not a Spark type in JSON: {DDL_EXAMPLE}"
    kind, keys = value.get("type"), set(value)
    if kind == "udt" or keys & UDT_KEYS:
        return ('holds a user-defined type ("udt"), which names a class Spark would load and '
                f"instantiate while analysing the query: {DDL_EXAMPLE}")
    if kind == "array" and keys == {"type", "elementType", "containsNull"} and isinstance(
            value["containsNull"], bool):
        return _json_type(value["elementType"], depth + 1)
    if kind == "map" and keys == {"type", "keyType", "valueType", "valueContainsNull"} and (
            isinstance(value["valueContainsNull"], bool)):
        return (_json_type(value["keyType"], depth + 1)
                or _json_type(value["valueType"], depth + 1))
    if kind == "struct" and keys == {"type", "fields"} and isinstance(value["fields"], list):
        for field in value["fields"]:
            problem = _json_field(field, depth + 1)
            if problem is not None:
                return problem
        return None
    return f"is not a Spark type in JSON (a type name, array, map or struct): {DDL_EXAMPLE}"


def _json_field(field: Any, depth: int) -> str | None:
    if not isinstance(field, dict) or not {"name", "type"} <= set(field) <= {
            "name", "type", "nullable", "metadata"}:
        return f"has a struct field that is not {{name, type, nullable, metadata}}: {DDL_EXAMPLE}"
    if (not isinstance(field["name"], str) or not isinstance(field.get("nullable", True), bool)
            or not isinstance(field.get("metadata", {}), dict)):
        return f"has a struct field that is not {{name, type, nullable, metadata}}: {DDL_EXAMPLE}"
    return _json_type(field["type"], depth)


def _refused_expression(expression: Any, name: str) -> str:
    if name in ("CallMethodViaReflection", "TryReflect"):
        return f"{expression.prettyName()}() reaches the JVM"
    if name == "ExpressionWithUnresolvedIdentifier":
        return "IDENTIFIER(...) names a function only when the query runs"
    return (f"{expression.prettyName()}() (Spark's {name}) is not a built-in function a view "
            "may call")


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
    if name == "UnresolvedHint":  # judged before the walk reaches its parameters
        for parameter in _seq(node.parameters()):
            if not isinstance(parameter, (str, int)) and _simple_name(parameter) not in (
                    HINT_VALUES):
                return "a hint's parameters may only be column names and numbers"
    if name == "View":
        table = str(node.desc().identifier().table()).lower()
        if not node.isTempView() or table != EVENTS_VIEW:
            return f"view {table} is not `{EVENTS_VIEW}`, the one relation a view may read"
    return None


def _function_problem(function: str, parts: int) -> str | None:
    if parts == 1 and function in FUNCTIONS:
        return None
    if function in REFUSED_FUNCTIONS:
        return f"{function}() {REFUSED_FUNCTIONS[function]}"
    shown = function if len(function) <= SHOWN_NAME else f"{function[:SHOWN_NAME]}..."
    return f"{shown}() is not a built-in function a view may call"


def _seq(seq: Any) -> list[Any]:
    """A Scala Seq through py4j, as a list (size and apply: the fewest round trips)."""
    return [seq.apply(i) for i in range(seq.size())]


def _simple_name(node: Any) -> str:
    return str(node.nodeName())


def _shown(text: str, limit: int = 80) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


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
