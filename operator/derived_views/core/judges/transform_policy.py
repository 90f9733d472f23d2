"""SQL a tenant may run: a query, and nothing that reaches the JVM, the environment or files.

A view's author is not trusted with the job's credentials: its driver holds the
sink's password in the environment and may reach the cluster's network. Spark
SQL has ways out of a query (`reflect('java.lang.System', 'getenv', ...)`,
`java_method`, `SELECT TRANSFORM(...) USING 'cmd'`, `ADD JAR`, `INSERT
OVERWRITE DIRECTORY`, `parquet.\\`path\\`` relations, `EXECUTE IMMEDIATE`).
This is the operator's check, made before any job starts, for fast feedback;
the job's guard (spark_templates/dvjob/sql/guard.py) decides with Spark's own
parser and analyzer, on the same allowlists. Check SQL for PostgreSQL is judged
by PostgreSQL's own parser instead (core/judges/assertion_sql.py).

Refusal is positive where it can be: the statement must be a query, it reads no
file or catalog relation, and every function must be a built-in on the job's allowlist
(core/judges/spark_allowlist.py). A function that reads a type from a string
(`from_json`, `variant_get`, ...) must get a string literal naming built-in types
only, and its options map only harmless keys: Spark instantiates a JSON type
`"udt"` (any class) and reads options while it analyses the query, before the
job's guard sees the analysed plan. Spark SQL is first read by a lexer that follows
Spark's (core/judges/spark_lexer.py), so comment, string and `${...}` tricks where
Spark and sqlglot would read different queries are refused, and it fails closed:
SQL that cannot be read, or whose judging fails, is refused.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable
from typing import Any, ClassVar

import sqlglot
from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import ParseError, SqlglotError

from derived_views.core.judges.spark_allowlist import (
    FUNCTIONS,
    MOST_ARGUMENTS,
    OPTION_KEYS,
    OPTIONS_ARGUMENTS,
    REFUSED_FUNCTIONS,
    SCHEMA_ARGUMENTS,
    TABLE_FUNCTIONS,
)
from derived_views.core.judges.spark_lexer import SqlTextError, lex

SPARK_SYNTAX = frozenset({"try_cast"})
"""Calls Spark parses as syntax, not through its function registry."""
MAX_SQL_CHARS = 65536
"""Longer Spark SQL is refused unread: no view needs it, and judging it costs every pass."""
MAX_QUERY_NESTING = 64
"""Nesting deeper than any view needs (the job's limit too): refused before anything recurses."""
SHOWN_NAME = 128
"""The longest name quoted whole in a message (a message ends in a Kubernetes condition)."""
WINDOW_FUNCTION = re.compile(r"\b(window|session_window)\s*\(", re.IGNORECASE)
"""sqlglot reads `window(` as the WINDOW clause: a query that fails to parse is parsed again
with the time-window functions renamed `dv_window(`, `dv_session_window(`."""
_FUNCTION_SPELT = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*\(")
JSON_TYPE_NAME = re.compile(r"[a-z_]+(?: [a-z_]+)*(?:\(\s*-?\d+\s*(?:,\s*-?\d+\s*)?\))?")
"""A type named in a JSON schema ("integer", "decimal(10,2)"): Spark loads nothing for it."""
UDT_KEYS = frozenset({"class", "pyClass", "serializedClass", "sqlType"})
DDL_EXAMPLE = "write it as DDL, e.g. 'a INT, b STRUCT<c: STRING>'"
DDL_TYPES = frozenset({
    "boolean", "tinyint", "byte", "smallint", "short", "int", "integer", "bigint", "long",
    "float", "real", "double", "date", "timestamp", "timestamp_ntz", "timestamp_ltz",
    "string", "character", "char", "varchar", "binary", "decimal", "dec", "numeric", "void",
    "variant",
})
"""Spark 4.0's DDL type keywords (DataTypeAstBuilder.visitPrimitiveDataType), besides ARRAY,
MAP, STRUCT and INTERVAL: the DDL a schema argument may be written in."""
_INTERVAL_UNITS = frozenset({"year", "month", "day", "hour", "minute", "second"})
_DDL_TOKEN = re.compile(r"""\s*(?:(?P<name>`(?:[^`]|``)+`|[A-Za-z0-9_]+)
    |(?P<string>'[^']*'|"[^"]*")|(?P<punct>[<>(),:])|(?P<end>\Z))""", re.VERBOSE)
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
ONLY_QUERIES = ("a view's SQL may only query {tables}: a SELECT (or WITH ... SELECT), "
                "without commands, file relations or functions that reach the JVM, the "
                "environment or files")


def unsafe_sql(sql: str, *, tables: Iterable[str] = ("events",),
               shown: str | None = None) -> str | None:
    """Why Spark SQL `sql` is more than a query over `tables` (a message), or None.

    `shown` names the tables in the message instead. SQL that cannot be read (too long,
    ambiguous text, too deep, not parsed by sqlglot, or anything failing while judged) is
    refused. Check SQL for PostgreSQL is judged by PostgreSQL's own parser (core.judges.assertion_sql).
    """
    allowed = {t.lower() for t in tables}
    shown = shown or ", ".join(f"`{t}`" for t in sorted(allowed))
    return _unsafe_spark(sql, shown)


def _statement_problem(statement: exp.Expr, text: str) -> str | None:
    if not isinstance(statement, exp.Query):
        words = (statement.sql(dialect="spark").split() or [statement.key])[:2]
        return f"{' '.join([words[0].upper(), *words[1:]])} is a command, not a query"
    for node in statement.walk():
        problem = _node_problem(node, text)
        if problem is not None:
            return problem
    for table in statement.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier):
            continue  # a table-valued function (range, explode, ...): judged by its name above
        if table.args.get("db") or table.args.get("catalog"):
            return f"{table.sql(dialect='spark')} reads a file or a catalog table"
        # Spark's catalog holds nothing but `events`: another plain name is a mistake the
        # SQL check reports in Spark's words.
    return None


def _node_problem(node: exp.Expr, text: str) -> str | None:
    if isinstance(node, exp.QueryTransform):
        return "TRANSFORM ... USING runs a command on the job's pods"
    if isinstance(node, (exp.Into, exp.Lock)):
        return f"{node.key.upper()} is not a read"
    return _spark_function_problem(node) or _argument_problem(node, text)


class _PlainCalls(Spark):
    """Spark's dialect, with the calls whose arguments are judged (and `map`) read as plain
    calls: sqlglot's own classes for some of them name and order arguments their own way,
    and a judged argument must be the one Spark reads at that position."""

    class Parser(Spark.Parser):  # type: ignore[misc,valid-type]  # sqlglot: a variable
        FUNCTIONS: ClassVar[dict[str, Any]] = {
            name: build for name, build in Spark.Parser.FUNCTIONS.items()
            if name.lower() not in {*MOST_ARGUMENTS, "map"}}
        FUNCTION_PARSERS: ClassVar[dict[str, Any]] = {
            name: build for name, build in Spark.Parser.FUNCTION_PARSERS.items()
            if name.lower() not in {*MOST_ARGUMENTS, "map"}}


def _argument_problem(node: exp.Expr, text: str) -> str | None:
    """The schema and options arguments of a function Spark evaluates while analysing (core/
    spark_allowlist.SCHEMA_ARGUMENTS, OPTIONS_ARGUMENTS), as the job's guard judges them; a
    call that cannot be read argument by argument is refused. `text` is what sqlglot read."""
    function = spark_function_name(node)
    if function not in MOST_ARGUMENTS:
        return None
    try:
        arguments = _arguments(node, function)
        if arguments is None:
            return f"{function}() could not be read argument by argument, so it is refused"
        escaped = _escaped_values(node, text)
        return _judge_arguments(function, arguments, escaped)
    except Exception as exc:  # fail closed
        return f"{function}() could not be checked ({type(exc).__name__}), so it is refused"


def _arguments(node: exp.Expr, function: str) -> list[exp.Expr] | None:
    """The call's arguments in Spark's order: the call as sqlglot writes it in Spark SQL, read
    again as a plain call."""
    written = node.sql(dialect="spark")
    select = sqlglot.parse_one(f"SELECT {written}", read=_PlainCalls)
    call = select.expressions[0] if isinstance(select, exp.Select) else None
    if not isinstance(call, exp.Anonymous) or str(call.name).lower() != function:
        return None
    return list(call.expressions)


def _escaped_values(node: exp.Expr, text: str) -> set[str]:
    """Values of the call's string literals written with a backslash escape (or whose text
    cannot be found): sqlglot resolves escapes after Spark's manner, not by Spark's code, so
    such a value is not taken as Spark's."""
    escaped = set()
    for literal in node.find_all(exp.Literal):
        start, end = literal.meta.get("start"), literal.meta.get("end")
        if literal.is_string and (start is None or end is None
                                  or "\\" in text[start:end + 1]):
            escaped.add(str(literal.this))
    return escaped


def _judge_arguments(function: str, arguments: list[exp.Expr],
                     escaped: set[str]) -> str | None:
    if len(arguments) > MOST_ARGUMENTS[function]:
        return f"{function}() takes at most {MOST_ARGUMENTS[function]} arguments"
    at = SCHEMA_ARGUMENTS.get(function)
    if at is not None:
        text = _string_literal(arguments[at], escaped) if len(arguments) > at else None
        if text is None:
            return (f"{function}() reads its type from argument {at + 1}, which must be a "
                    "string literal (Spark evaluates it while analysing), written without "
                    f"backslash escapes: {DDL_EXAMPLE}")
        problem = schema_text_problem(text)
        if problem is not None:
            return f"{function}()'s type {_quoted(text)} {problem}"
    options = OPTIONS_ARGUMENTS.get(function)
    if options is not None and len(arguments) > options[0]:
        return _options_problem(arguments[options[0]], function, options[1], escaped)
    return None


def _string_literal(node: exp.Expr, escaped: set[str]) -> str | None:
    """A string literal's value when it is certainly Spark's: written without backslash
    escapes (`escaped`), else not read (a schema needs none)."""
    if not isinstance(node, exp.Literal) or not node.is_string or str(node.this) in escaped:
        return None
    return str(node.this)


def _options_problem(options: exp.Expr, function: str, family: str,
                     escaped: set[str]) -> str | None:
    shape = f"{function}()'s options must be map('key', 'value', ...) of string literals"
    if not isinstance(options, exp.Anonymous) or str(options.name).lower() != "map":
        return shape
    keys = [_string_literal(a, escaped) for a in options.expressions[0::2]]
    values = [_string_literal(a, set()) for a in options.expressions[1::2]]
    if len(keys) != len(values) or None in keys or None in values:
        return shape  # a value may hold escapes (a '\\t' separator): only keys are compared
    for key in keys:
        assert key is not None
        if key.lower() not in OPTION_KEYS[family]:
            return (f"{function}()'s option {_quoted(key)} is not one a view may set: only "
                    f"{family.upper()} formats, separators, modes, time zones and locales (no "
                    "class names, charsets or files)")
    return None


def schema_text_problem(text: str) -> str | None:
    """Why Spark could instantiate a class, or the check could not read a type, from `text`.

    Spark 4.0 reads it as DDL, else as JSON (DataType.parseTypeWithFallback). DDL names no
    class; a JSON object (which needs a `{`) may: `{"type": "udt", "class": ...}` is loaded
    and instantiated. So a text with `{` must be JSON of built-in types, read strictly, and
    any other must be DDL this check reads (the job reads it with Spark's own parser)."""
    control = CONTROL.search(text)
    if control is not None:
        return f"holds the control character {control.group()!r}"
    if "{" in text:
        return json_type_problem(text)
    return ddl_problem(text)


def json_type_problem(text: str) -> str | None:
    """Why the JSON schema `text` is not plain built-in types, read strictly (no duplicate
    keys, no NaN, nothing after the value; each object exactly one of the shapes Spark 4.0's
    DataType.parseDataType matches, sql/api/.../types/DataType.scala), or None. The job's
    guard reads it the same way (dvjob.sql.guard.json_type_problem; a test holds them so)."""
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
    if depth > MAX_QUERY_NESTING:
        return f"nests deeper than {MAX_QUERY_NESTING} levels"
    if isinstance(value, str):
        return None if JSON_TYPE_NAME.fullmatch(value) else (
            f"names no Spark type ({_quoted(value)}): {DDL_EXAMPLE}")
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


def ddl_problem(text: str) -> str | None:
    """Why `text` is not a Spark DDL type (`ARRAY<INT>`) or field list (`a INT, b STRING`) this
    check reads, or None: Spark's own grammar, strictly and without expressions (DEFAULT,
    GENERATED). Spark reads it with its parser in the job; what it refuses there, it says."""
    tokens = []
    position = 0
    while True:
        match = _DDL_TOKEN.match(text, position)
        if match is None or match.lastgroup is None:
            return f"is not DDL the check reads (at {text[position:position + 10]!r}): {DDL_EXAMPLE}"
        if match.lastgroup == "end":
            break
        tokens.append((match.lastgroup, match.group(match.lastgroup)))
        position = match.end()
    for fields in (False, True):
        reader = _DdlReader(tokens)
        try:
            if fields:
                reader.fields(closing=None, depth=0)
            else:
                reader.data_type(0)
        except ValueError:
            continue
        if reader.at == len(tokens):
            return None
    return f"is not a DDL type or field list the check reads: {DDL_EXAMPLE}"


class _DdlReader:
    """A recursive reader of DDL tokens; ValueError where they are not a type."""

    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.tokens = tokens
        self.at = 0

    def next(self) -> tuple[str, str]:
        if self.at >= len(self.tokens):
            raise ValueError("end of input")
        self.at += 1
        return self.tokens[self.at - 1]

    def accept(self, text: str) -> bool:
        if self.at < len(self.tokens) and self.tokens[self.at][1].lower() == text:
            self.at += 1
            return True
        return False

    def expect(self, text: str) -> None:
        if not self.accept(text):
            raise ValueError(text)

    def data_type(self, depth: int) -> None:
        if depth > MAX_QUERY_NESTING:
            raise ValueError("too deep")
        kind, word = self.next()
        word = word.lower()
        if kind != "name":
            raise ValueError(word)
        if word == "array":
            self.expect("<")
            self.data_type(depth + 1)
            self.expect(">")
        elif word == "map":
            self.expect("<")
            self.data_type(depth + 1)
            self.expect(",")
            self.data_type(depth + 1)
            self.expect(">")
        elif word == "struct":
            self.expect("<")
            if not self.accept(">"):
                self.fields(closing=">", depth=depth + 1)
                self.expect(">")
        elif word == "interval":
            for _ in range(2):
                if self.at < len(self.tokens) and self.tokens[self.at][1].lower() in (
                        _INTERVAL_UNITS):
                    self.at += 1
                if not self.accept("to"):
                    break
        elif word in DDL_TYPES:
            if self.accept("("):
                self.number()
                if self.accept(","):
                    self.number()
                self.expect(")")
            if self.accept("collate"):
                self.name()
        else:
            raise ValueError(word)

    def number(self) -> None:
        if not re.fullmatch(r"\d+", self.next()[1]):
            raise ValueError("number")

    def name(self) -> None:
        if self.next()[0] != "name":
            raise ValueError("name")

    def fields(self, *, closing: str | None, depth: int) -> None:
        """`name [:] TYPE [NOT NULL] [COMMENT 'text']`, comma-separated."""
        while True:
            self.name()
            self.accept(":")
            self.data_type(depth)
            if self.accept("not"):
                self.expect("null")
            if self.accept("comment") and self.next()[0] != "string":
                raise ValueError("comment")
            if self.at == len(self.tokens) or (
                    closing is not None and self.tokens[self.at][1] == closing):
                return
            self.expect(",")


def _quoted(text: str, limit: int = 80) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _spark_function_problem(node: exp.Expr) -> str | None:
    """A function not on the job's allowlist, by Spark's name for it."""
    if isinstance(node, exp.Dot) and isinstance(node.expression, exp.Func):
        return (f"{_shown(node.sql(dialect='spark').split('(', 1)[0])}() is a qualified "
                "function name: call the built-in by its plain name")
    name = spark_function_name(node)
    if (name is None or name in FUNCTIONS or name in TABLE_FUNCTIONS or name in SPARK_SYNTAX
            or isinstance(node.parent, exp.Hint)):
        return None  # a hint's name (REPARTITION) is no call; what it is given is judged
    if name in REFUSED_FUNCTIONS:
        return f"{name}() {REFUSED_FUNCTIONS[name]}"
    return f"{_shown(name)}() is not a built-in function a view may call"


def spark_function_name(node: exp.Expr) -> str | None:
    """The name Spark knows a function node by (sqlglot names some differently: its
    `StrToDate` is Spark's `to_date`), None for syntax that is no call (CASE, CURRENT_DATE)."""
    if isinstance(node, exp.Anonymous):
        name = str(node.name).lower()
        return name.removeprefix("dv_") if name in ("dv_window", "dv_session_window") else name
    if not isinstance(node, exp.Func):
        return None
    spelt = _FUNCTION_SPELT.match(node.sql(dialect="spark"))
    return None if spelt is None else spelt.group(1).lower()


def _shown(name: str) -> str:
    return name if len(name) <= SHOWN_NAME else f"{name[:SHOWN_NAME]}..."


def _unsafe_spark(sql: str, shown: str) -> str | None:
    rule = ONLY_QUERIES.format(tables=shown)
    if len(sql) > MAX_SQL_CHARS:
        return (f"{len(sql)} characters, more than the {MAX_SQL_CHARS} a view's SQL may have; "
                f"{rule}")
    if _paren_depth(sql) > MAX_QUERY_NESTING:  # before any parser recurses (the job's own rule)
        return (f"the query nests deeper than {MAX_QUERY_NESTING} levels of parentheses: simplify it; "
                f"{rule}")
    try:
        text, statements = _parsed(sql)
    except SqlTextError as exc:
        return f"{exc}; {rule}"
    except SqlglotError as exc:
        return f"cannot be read ({str(exc).splitlines()[0][:200]}), so it cannot be checked; {rule}"
    except (RecursionError, MemoryError):
        return f"the query nests too deeply to be checked: simplify it; {rule}"
    except Exception as exc:  # sqlglot failing in its own code (map('k') in sqlglot 30)
        return f"cannot be read ({type(exc).__name__} in sqlglot), so it cannot be checked; {rule}"
    try:
        for statement in statements:
            if _deeper_than(statement, MAX_QUERY_NESTING):
                return (f"the query nests deeper than {MAX_QUERY_NESTING} levels: simplify it "
                        f"(the job refuses the same); {rule}")
            problem = _statement_problem(statement, text)
            if problem is not None:
                return f"{problem}; {rule}"
    except (RecursionError, MemoryError):
        return f"the query nests too deeply to be checked: simplify it; {rule}"
    return None


def _paren_depth(sql: str) -> int:
    """The deepest parenthesis nesting, counting those in strings too, as the job does: it
    can only refuse more, and it costs one scan instead of a recursion per level."""
    depth = deepest = 0
    for ch in sql:
        depth += (ch == "(") - (ch == ")")
        deepest = max(deepest, depth)
    return deepest


def _deeper_than(tree: exp.Expr, limit: int) -> bool:
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in node.iter_expressions())
    return False


def parse_spark(sql: str) -> tuple[exp.Expr, ...]:
    """The statements of `sql` as sqlglot reads the text Spark's lexer leaves (cached: the
    operator judges the same SQL on every pass; callers must not modify the trees).
    SqlTextError for text the two could read differently, SqlglotError if sqlglot cannot."""
    return _parsed(sql)[1]


@functools.lru_cache(maxsize=256)
def _parsed(sql: str) -> tuple[str, tuple[exp.Expr, ...]]:
    """The text sqlglot read (the nodes' positions point into it) and its statements."""
    text = lex(sql).text
    try:
        parsed = sqlglot.parse(text, read="spark")
    except ParseError as first:
        renamed = WINDOW_FUNCTION.sub(r"dv_\1(", text)
        if renamed == text:
            raise
        try:
            parsed = sqlglot.parse(renamed, read="spark")
        except ParseError:
            raise first from None
        text = renamed
    return text, tuple(s for s in parsed if s is not None)
