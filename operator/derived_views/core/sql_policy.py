"""SQL a tenant may run: a query, and nothing that reaches the JVM, the environment or files.

A view's author is not trusted with the job's credentials: its driver holds the
sink's password in the environment and may reach the cluster's network. Spark
SQL has ways out of a query (`reflect('java.lang.System', 'getenv', ...)`,
`java_method`, `SELECT TRANSFORM(...) USING 'cmd'`, `ADD JAR`, `INSERT
OVERWRITE DIRECTORY`, `parquet.\\`path\\`` relations), and so has PostgreSQL
(`pg_read_file`, `COPY ... PROGRAM`, `query_to_xml` running a string as SQL).
This is the operator's check, made before any job starts or any check query
runs; the job repeats it with Spark's own parser (spark_templates/dvjob), which
is the authority when sqlglot cannot read a query.

Refusal is positive where it can be: the statement must be a query, and the
relations it reads must be the ones it is given (or its own CTEs).
"""

from __future__ import annotations

from collections.abc import Iterable

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

SPARK_JVM_FUNCTIONS = frozenset({"reflect", "java_method", "try_reflect"})
"""Spark 4.0 functions that call an arbitrary Java method (FunctionRegistry: CallMethodViaReflection
under three names): `reflect('java.lang.System', 'getenv', 'PGPASSWORD')` reads the sink's password."""
POSTGRES_UNSAFE_FUNCTIONS = frozenset({
    "pg_read_file", "pg_read_binary_file", "pg_ls_dir", "pg_stat_file", "pg_ls_logdir",
    "pg_ls_waldir", "pg_ls_tmpdir", "pg_ls_archive_statusdir", "lo_import", "lo_export",
    "lo_get", "lo_put", "lo_from_bytea",
    "dblink", "dblink_exec", "dblink_connect", "dblink_connect_u", "dblink_send_query",
    "query_to_xml", "query_to_xml_and_xmlschema", "query_to_xmlschema", "cursor_to_xml",
    "table_to_xml", "database_to_xml", "schema_to_xml",
    "set_config", "pg_terminate_backend", "pg_cancel_backend", "pg_reload_conf",
    "pg_rotate_logfile", "pg_advisory_lock", "pg_advisory_xact_lock", "pg_sleep",
    "pg_sleep_for", "pg_sleep_until", "pg_notify", "nextval", "setval",
})
"""PostgreSQL functions that read server files, reach other servers, run a string as SQL
(escaping this check), change settings, signal other sessions, or write sequences/large
objects or hold locks (a read-only transaction refuses only some of these)."""

UNSAFE_FUNCTIONS = {"spark": SPARK_JVM_FUNCTIONS, "postgres": POSTGRES_UNSAFE_FUNCTIONS}
ONLY_QUERIES = ("a view's SQL may only query {tables}: a SELECT (or WITH ... SELECT), "
                "without commands, file relations or functions that reach the JVM, the "
                "environment or files")


def unsafe_sql(sql: str, *, dialect: str = "spark",
               tables: Iterable[str] = ("events",), shown: str | None = None) -> str | None:
    """Why `sql` is more than a query over `tables` (a message), or None.

    In PostgreSQL a table may be named `schema.table`, as PostgreSQL folds it. `shown`
    names the tables in the message instead (e.g. placeholders the caller substituted).
    None also when sqlglot cannot parse the SQL: the caller's syntax check reports
    that, and the job's parser guard has the last word.
    """
    allowed = set(tables) if dialect != "spark" else {t.lower() for t in tables}
    shown = shown or ", ".join(f"`{t}`" for t in sorted(allowed))
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except SqlglotError:
        return None
    for statement in statements:
        problem = _statement_problem(statement, dialect, allowed)
        if problem is not None:
            return f"{problem}; {ONLY_QUERIES.format(tables=shown)}"
    return None


def _statement_problem(statement: exp.Expr, dialect: str, allowed: set[str]) -> str | None:
    if not isinstance(statement, exp.Query):
        words = (statement.sql(dialect=dialect).split() or [statement.key])[:2]
        return f"{words[0].upper()} {' '.join(words[1:])} is a command, not a query"
    for node in statement.walk():
        problem = _node_problem(node, dialect)
        if problem is not None:
            return problem
    own = {cte.alias_or_name.lower() for cte in statement.find_all(exp.CTE)}
    for table in statement.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier):
            continue  # a table-valued function (range, explode, ...): judged by its name above
        qualified = table.args.get("db") or table.args.get("catalog")
        spelt = table.sql(dialect=dialect)
        if dialect == "spark" and qualified:
            return f"{spelt} reads a file or a catalog table"
        # Spark's catalog holds nothing but `events`: another plain name is a mistake the
        # SQL check reports in Spark's words. PostgreSQL resolves one through search_path
        # (pg_catalog first), so there it is refused here unless named with its schema.
        if dialect != "spark" and _pg_name(table) not in allowed | (set() if qualified else own):
            return f"{spelt} is not a relation this SQL may read"
    return None


def _pg_name(table: exp.Table) -> str:
    """`schema.table` (or `table`) as PostgreSQL folds it; a catalog never matches."""
    if table.args.get("catalog"):
        return ""
    db = table.args.get("db")
    name = table.name if table.this.quoted else table.name.lower()
    if db is None:
        return name
    schema = db.name if db.quoted else db.name.lower()
    return f"{schema}.{name}"


def _node_problem(node: exp.Expr, dialect: str) -> str | None:
    if isinstance(node, exp.QueryTransform):
        return "TRANSFORM ... USING runs a command on the job's pods"
    if isinstance(node, (exp.Into, exp.Lock)):
        return f"{node.key.upper()} is not a read"
    name = _function_name(node)
    if name is not None and name in UNSAFE_FUNCTIONS.get(dialect, frozenset()):
        return f"{name}() reaches {'the JVM' if dialect == 'spark' else 'beyond the query'}"
    return None


def _function_name(node: exp.Expr) -> str | None:
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    if isinstance(node, exp.Func):
        return node.sql_name().lower()
    return None
