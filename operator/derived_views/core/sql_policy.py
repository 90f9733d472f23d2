"""SQL a tenant may run: a query, and nothing that reaches the JVM, the environment or files.

A view's author is not trusted with the job's credentials: its driver holds the
sink's password in the environment and may reach the cluster's network. Spark
SQL has ways out of a query (`reflect('java.lang.System', 'getenv', ...)`,
`java_method`, `SELECT TRANSFORM(...) USING 'cmd'`, `ADD JAR`, `INSERT
OVERWRITE DIRECTORY`, `parquet.\\`path\\`` relations, `EXECUTE IMMEDIATE`).
This is the operator's check, made before any job starts, for fast feedback;
the job's guard (spark_templates/dvjob/sql_guard.py) decides with Spark's own
parser and analyzer, on the same allowlists. Check SQL for PostgreSQL is judged
by PostgreSQL's own parser instead (core/check_sql.py).

Refusal is positive where it can be: the statement must be a query, it reads no
file or catalog relation, and every function must be a built-in on the job's allowlist
(core/spark_allowlist.py). Spark SQL is first read by a lexer that follows
Spark's (core/spark_lexer.py), so comment, string and `${...}` tricks where
Spark and sqlglot would read different queries are refused, and it fails closed:
SQL that cannot be read, or whose judging fails, is refused.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, SqlglotError

from derived_views.core.spark_allowlist import FUNCTIONS, REFUSED_FUNCTIONS, TABLE_FUNCTIONS
from derived_views.core.spark_lexer import SqlTextError, lex

SPARK_SYNTAX = frozenset({"try_cast"})
"""Calls Spark parses as syntax, not through its function registry."""
MAX_SQL_CHARS = 65536
"""Longer Spark SQL is refused unread: no view needs it, and judging it costs every pass."""
MAX_DEPTH = 64
"""Nesting deeper than any view needs (the job's limit too): refused before anything recurses."""
SHOWN_NAME = 128
"""The longest name quoted whole in a message (a message ends in a Kubernetes condition)."""
WINDOW_FUNCTION = re.compile(r"\b(window|session_window)\s*\(", re.IGNORECASE)
"""sqlglot reads `window(` as the WINDOW clause: a query that fails to parse is parsed again
with the time-window functions renamed `dv_window(`, `dv_session_window(`."""
_FUNCTION_SPELT = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*\(")
ONLY_QUERIES = ("a view's SQL may only query {tables}: a SELECT (or WITH ... SELECT), "
                "without commands, file relations or functions that reach the JVM, the "
                "environment or files")


def unsafe_sql(sql: str, *, tables: Iterable[str] = ("events",),
               shown: str | None = None) -> str | None:
    """Why Spark SQL `sql` is more than a query over `tables` (a message), or None.

    `shown` names the tables in the message instead. SQL that cannot be read (too long,
    ambiguous text, too deep, not parsed by sqlglot, or anything failing while judged) is
    refused. Check SQL for PostgreSQL is judged by PostgreSQL's own parser (core.check_sql).
    """
    allowed = {t.lower() for t in tables}
    shown = shown or ", ".join(f"`{t}`" for t in sorted(allowed))
    return _unsafe_spark(sql, shown)


def _statement_problem(statement: exp.Expr) -> str | None:
    if not isinstance(statement, exp.Query):
        words = (statement.sql(dialect="spark").split() or [statement.key])[:2]
        return f"{' '.join([words[0].upper(), *words[1:]])} is a command, not a query"
    for node in statement.walk():
        problem = _node_problem(node)
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


def _node_problem(node: exp.Expr) -> str | None:
    if isinstance(node, exp.QueryTransform):
        return "TRANSFORM ... USING runs a command on the job's pods"
    if isinstance(node, (exp.Into, exp.Lock)):
        return f"{node.key.upper()} is not a read"
    return _spark_function_problem(node)


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
    if _paren_depth(sql) > MAX_DEPTH:  # before any parser recurses (the job's own rule)
        return (f"the query nests deeper than {MAX_DEPTH} levels of parentheses: simplify it; "
                f"{rule}")
    try:
        statements = parse_spark(sql)
    except SqlTextError as exc:
        return f"{exc}; {rule}"
    except SqlglotError as exc:
        return f"cannot be read ({str(exc).splitlines()[0][:200]}), so it cannot be checked; {rule}"
    except (RecursionError, MemoryError):
        return f"the query nests too deeply to be checked: simplify it; {rule}"
    try:
        for statement in statements:
            if _deeper_than(statement, MAX_DEPTH):
                return (f"the query nests deeper than {MAX_DEPTH} levels: simplify it "
                        f"(the job refuses the same); {rule}")
            problem = _statement_problem(statement)
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


@functools.lru_cache(maxsize=256)
def parse_spark(sql: str) -> tuple[exp.Expr, ...]:
    """The statements of `sql` as sqlglot reads the text Spark's lexer leaves (cached: the
    operator judges the same SQL on every pass; callers must not modify the trees).
    SqlTextError for text the two could read differently, SqlglotError if sqlglot cannot."""
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
    return tuple(s for s in parsed if s is not None)

