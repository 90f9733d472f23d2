"""Whether a cutover check's SQL is one plain SELECT of the view's own index tables.

A check runs on the team's database as the sink's user (or its check role): its SQL
must not be able to do anything but read `{index}` and `{active}` and compute over
them. The decision is PostgreSQL's own parser's (pglast wraps libpg_query), so what
is checked is what the server will run: `U&"..."` identifiers, comments, dollar
quoting and `;`-separated statements are resolved exactly as the server resolves them.
Everything is an allowlist and fails closed: a statement kind, a node of the parse
tree, a function, a type or an operator not listed is refused, and so is text the
parser cannot read (with the parser's message).

Decisions: WITH RECURSIVE is refused (unbounded work a timeout only cuts short, never
needed to judge an index); `now()`/CURRENT_TIMESTAMP and friends are allowed (checks
compare freshness); CURRENT_USER and the other identity values are refused (not
needed to judge an index); casts go only to plain value types (a reg* cast looks up
catalog objects). The text is judged as PostgreSQL reads it with its default settings
(standard_conforming_strings on, ...): the adapter pins those, and a search_path of
pg_catalog only, in every check's transaction, so names resolve to the built-ins judged
here whatever the sink user's own defaults say. Out of scope: casts are found whatever
the search_path, so a type its owner gave a cast function (a table's row type, a domain)
can still run that owner's code in a check, with the check's rights.

Size: a check must not build a large value from a small text. Functions whose result is as
large as a number they are given (repeat, lpad, rpad, format() with a width, char(n) casts,
generate_series) and aggregates whose one value grows with every row they read (string_agg,
array_agg, json(b)_agg, json(b)_object_agg, ARRAY(SELECT ...)) are refused: a cross join
makes those gigabytes from a few words. Concatenation (||, concat, replace, json builders)
stays allowed: its result is bounded by its inputs, and although nesting it can still reach
PostgreSQL's own 1 GB limit for one value, the adapter caps what any check returns in the
query itself (adapters/postgres/checks.py) and the statement timeout bounds the rest.

Pure: no I/O; verdicts are cached per SQL text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from pglast import ast, parse_sql
from pglast.enums import A_Expr_Kind, SQLValueFunctionOp, SubLinkType
from pglast.parser import ParseError

FUNCTIONS_RULE = ("is not on the allowlist of check functions (aggregates, comparisons, "
                  "string, math and date functions)")
TABLES_RULE = "a check may only read {index} and {active} (and the WITH queries it defines)"

AGGREGATES = frozenset({
    "count", "sum", "avg", "min", "max", "bool_and", "bool_or", "every",
    "percentile_cont", "percentile_disc", "mode", "stddev", "stddev_pop", "stddev_samp",
    "variance", "var_pop", "var_samp", "corr", "covar_pop", "covar_samp", "bit_and",
    "bit_or", "any_value"})
"""Each returns one value no larger than one of its inputs, however many rows it reads."""
WINDOWS = frozenset({
    "row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile", "lag", "lead",
    "first_value", "last_value", "nth_value"})
MATH = frozenset({
    "abs", "round", "floor", "ceil", "ceiling", "trunc", "sign", "mod", "power", "sqrt",
    "cbrt", "exp", "ln", "log", "log10", "div", "width_bucket", "scale"})
STRINGS = frozenset({
    "length", "char_length", "character_length", "octet_length", "bit_length", "lower",
    "upper", "initcap", "substr", "substring", "btrim", "ltrim", "rtrim", "position",
    "strpos", "replace", "split_part", "left", "right", "concat", "concat_ws", "reverse",
    "md5", "starts_with", "regexp_replace", "regexp_match", "regexp_like", "regexp_count",
    "translate", "ascii", "chr", "to_hex", "overlay", "similar_to_escape", "like_escape",
    "format"})
DATES = frozenset({
    "now", "date_trunc", "date_part", "extract", "to_char", "to_date", "to_timestamp",
    "to_number", "age", "make_date", "make_interval", "make_timestamp", "make_timestamptz",
    "date_bin", "justify_days", "justify_hours", "justify_interval", "isfinite", "timezone",
    "statement_timestamp", "transaction_timestamp", "clock_timestamp"})
JSON_ARRAYS = frozenset({
    "json_typeof", "jsonb_typeof", "json_array_length", "jsonb_array_length",
    "json_extract_path", "json_extract_path_text", "jsonb_extract_path",
    "jsonb_extract_path_text", "json_build_object", "jsonb_build_object", "json_build_array",
    "jsonb_build_array", "to_json", "to_jsonb", "jsonb_object_keys", "json_object_keys",
    "jsonb_array_elements", "jsonb_array_elements_text", "json_array_elements",
    "json_array_elements_text", "jsonb_each", "jsonb_each_text", "json_each",
    "json_each_text", "jsonb_strip_nulls", "array_length", "cardinality", "unnest",
    "array_position", "array_remove", "array_to_string", "string_to_array", "array_cat",
    "array_append", "array_prepend", "array_lower", "array_upper", "num_nulls",
    "num_nonnulls"})
ALLOWED_FUNCTIONS = AGGREGATES | WINDOWS | MATH | STRINGS | DATES | JSON_ARRAYS
"""Built-in, side-effect free, and none runs SQL text, reads files or the catalog, locks,
sleeps or builds a value larger than its inputs allow (see SIZED; format() is judged by
its format string)."""

SIZED = {
    **dict.fromkeys(("repeat", "lpad", "rpad", "array_fill"),
                    "it builds a value as large as a number it is given"),
    **dict.fromkeys(("generate_series", "generate_subscripts"),
                    "it makes as many rows as a number it is given"),
    **dict.fromkeys(("string_agg", "array_agg", "json_agg", "jsonb_agg", "json_object_agg",
                     "jsonb_object_agg", "xmlagg"),
                    "it builds one value from every row it reads, which a join makes "
                    "gigabytes; count or compare the rows instead"),
}
"""Refused with why: each makes something large from a small text (a check judges an index,
it never needs to build one value from all of it)."""

FORMAT_SPECIFIER = re.compile(r"%(?:%|(?:[0-9]+\$)?-*[sIL])")
"""What format() may hold in a check: %s, %I, %L, %%, with an optional position (%2$s) and
the `-` flag; a width (%10s, %*s, %-1073741000s) pads the value to that many characters."""
SPECIFIER_SHOWN = re.compile(r"%[^A-Za-z%]{0,20}[A-Za-z%]?")
"""A refused specifier as the refusal names it."""
CHAR_LENGTH_LIMIT = 1000
"""char(n) pads every value to n characters (PostgreSQL allows ten million): a check's casts
to char stay at most this wide, the size of a literal the text could hold anyway."""

ALLOWED_TYPES = frozenset({
    "bool", "boolean", "int2", "int4", "int8", "smallint", "integer", "int", "bigint",
    "numeric", "decimal", "float4", "float8", "real", "text", "varchar", "bpchar", "char",
    "date", "time", "timetz", "timestamp", "timestamptz", "interval", "json", "jsonb",
    "uuid", "bytea"})

ALLOWED_OPERATORS = frozenset({
    "=", "<>", "!=", "<", ">", "<=", ">=", "+", "-", "*", "/", "%", "^", "||", "|/", "||/",
    "@", "~~", "!~~", "~~*", "!~~*", "~", "~*", "!~", "!~*", "->", "->>", "#>", "#>>",
    "@>", "<@", "?", "?|", "?&", "&&", "#-"})
RANGE_KINDS = frozenset({
    A_Expr_Kind.AEXPR_BETWEEN, A_Expr_Kind.AEXPR_NOT_BETWEEN, A_Expr_Kind.AEXPR_BETWEEN_SYM,
    A_Expr_Kind.AEXPR_NOT_BETWEEN_SYM})
"""Their `name` is the keyword, not an operator."""

ALLOWED_VALUE_FUNCTIONS = frozenset({
    SQLValueFunctionOp.SVFOP_CURRENT_DATE, SQLValueFunctionOp.SVFOP_CURRENT_TIME,
    SQLValueFunctionOp.SVFOP_CURRENT_TIME_N, SQLValueFunctionOp.SVFOP_CURRENT_TIMESTAMP,
    SQLValueFunctionOp.SVFOP_CURRENT_TIMESTAMP_N, SQLValueFunctionOp.SVFOP_LOCALTIME,
    SQLValueFunctionOp.SVFOP_LOCALTIME_N, SQLValueFunctionOp.SVFOP_LOCALTIMESTAMP,
    SQLValueFunctionOp.SVFOP_LOCALTIMESTAMP_N})

PLAIN_NODES = frozenset({
    "ResTarget", "ColumnRef", "A_Star", "A_Const", "Integer", "Float", "Boolean", "String",
    "BitString", "BoolExpr", "NullTest", "BooleanTest", "CaseExpr", "CaseWhen",
    "CoalesceExpr", "MinMaxExpr", "A_ArrayExpr", "RowExpr", "A_Indirection", "A_Indices",
    "SortBy", "WindowDef", "JoinExpr", "Alias", "RangeSubselect", "RangeFunction",
    "GroupingSet", "CollateClause", "TypeName"})
"""Parse-tree nodes that neither name an object nor run anything by themselves; their
children are checked. Any node not here and not handled below is refused."""


class Refused(Exception):
    """What in the SQL is refused, and by which rule."""


@lru_cache(maxsize=256)  # keys hold the SQL (up to 64 KiB each)
def check_sql_problem(sql: str, tables: frozenset[tuple[str, str]]) -> str | None:
    """Why `sql` (placeholders already replaced) may not run as a check; None if it may.

    `tables` are the (schema, table) pairs it may read. Never raises: anything that cannot
    be decided is a refusal."""
    try:
        statements = parse_sql(sql)
    except ParseError as exc:
        return f"PostgreSQL cannot parse it: {exc}; a check is one SELECT statement"
    except Exception as exc:  # fail closed, whatever the parser did
        return f"it cannot be read ({type(exc).__name__}); a check is one SELECT statement"
    try:
        if len(statements) != 1:
            raise Refused(f"it holds {len(statements)} statements; a check is exactly one "
                          "SELECT statement (no `;`-separated statements)")
        stmt = statements[0].stmt
        if not isinstance(stmt, ast.SelectStmt):
            raise Refused(f"{_kind(stmt)} is not a SELECT; a check only reads")
        _Walk(tables).select(stmt, frozenset())
    except Refused as refused:
        return str(refused)
    except RecursionError:
        return "it nests too deeply to be checked; simplify the query"
    except Exception as exc:  # fail closed
        return f"it cannot be checked ({type(exc).__name__}); simplify the query"
    return None


def statement_text(sql: str) -> str | None:
    """The text of the one statement in `sql`, from its first token to before its `;`, as
    PostgreSQL's parser delimits it; None unless `sql` holds exactly one statement. What the
    adapter puts inside a query of its own (a trailing `;` could not stand there)."""
    try:
        statements = parse_sql(sql)
    except Exception:  # not one statement: the caller sends the text as it is, and fails
        return None
    if len(statements) != 1:
        return None
    start, length = statements[0].stmt_location or 0, statements[0].stmt_len or 0
    return sql[start:start + length] if length else sql[start:]


def _kind(node: Any) -> str:
    name = type(node).__name__
    statement = name.removesuffix("Stmt")
    words = {"Insert": "INSERT", "Update": "UPDATE", "Delete": "DELETE", "Merge": "MERGE",
             "Copy": "COPY", "Call": "CALL", "Do": "DO", "Transaction": "a transaction command",
             "VariableSet": "SET", "Create": "CREATE TABLE", "Lock": "LOCK",
             "Explain": "EXPLAIN", "Truncate": "TRUNCATE", "CreateTableAs": "CREATE TABLE AS"}
    return words.get(statement, f"a {statement} statement" if statement != name else name)


def _names(items: Iterable[Any] | None) -> tuple[str, ...]:
    return tuple(getattr(i, "sval", "?") for i in items or ())


class _Walk:
    """Checks every node of one statement; `ctes` are the WITH names visible at a node."""

    def __init__(self, tables: frozenset[tuple[str, str]]) -> None:
        self.tables = tables

    def select(self, stmt: ast.SelectStmt, ctes: frozenset[str]) -> None:
        if stmt.intoClause is not None:
            raise Refused("SELECT INTO creates a table; a check only reads")
        if stmt.lockingClause:
            raise Refused("FOR UPDATE/SHARE locks rows; a check only reads")
        with_clause = stmt.withClause
        if with_clause is not None:
            if with_clause.recursive:
                raise Refused("WITH RECURSIVE is not allowed in a check; use plain WITH "
                              "queries, joins and subqueries")
            for cte in with_clause.ctes or ():
                if not isinstance(cte, ast.CommonTableExpr):
                    raise Refused(f"{type(cte).__name__} is not allowed in a WITH clause")
                if cte.search_clause is not None or cte.cycle_clause is not None:
                    raise Refused(f"WITH {cte.ctename}: SEARCH and CYCLE are for recursive "
                                  "queries, which a check may not use")
                if not isinstance(cte.ctequery, ast.SelectStmt):
                    raise Refused(f"WITH {cte.ctename} AS ({_kind(cte.ctequery)} ...) "
                                  "modifies data; a check's WITH queries may only SELECT")
                self.node(cte.aliascolnames, ctes)
                self.select(cte.ctequery, ctes)
                ctes = ctes | {cte.ctename or ""}
        for field in stmt:
            if field in ("withClause", "intoClause", "lockingClause"):
                continue
            self.node(getattr(stmt, field), ctes)

    def node(self, value: Any, ctes: frozenset[str]) -> None:
        if value is None or isinstance(value, (str, int, float, bool)):
            return
        if isinstance(value, (tuple, list)):
            for each in value:
                self.node(each, ctes)
            return
        if not isinstance(value, ast.Node):
            raise Refused(f"{type(value).__name__} is not allowed in a check")
        kind = type(value).__name__
        if isinstance(value, ast.SelectStmt):
            self.select(value, ctes)
            return
        if isinstance(value, ast.RangeVar):
            self.range_var(value, ctes)
        elif isinstance(value, ast.FuncCall):
            self.function(value)
        elif isinstance(value, ast.TypeCast):
            self.type_name(value.typeName)
        elif isinstance(value, ast.TypeName):
            self.type_name(value)
        elif isinstance(value, ast.A_Expr):
            self.operator(value.kind, value.name)
        elif isinstance(value, ast.SortBy):
            if value.useOp:
                self.operator(A_Expr_Kind.AEXPR_OP, value.useOp)
        elif isinstance(value, ast.SubLink):
            if value.subLinkType == SubLinkType.ARRAY_SUBLINK:
                raise Refused("ARRAY(SELECT ...) is not allowed in a check: it builds one value "
                              "from every row of the subquery, like array_agg()")
            if value.operName:  # x <op> ANY/ALL (SELECT ...)
                self.operator(A_Expr_Kind.AEXPR_OP, value.operName)
        elif isinstance(value, ast.SQLValueFunction):
            if value.op not in ALLOWED_VALUE_FUNCTIONS:
                shown = value.op.name.removeprefix("SVFOP_") if value.op else "?"
                raise Refused(f"{shown} is not allowed in a check (of the SQL value functions "
                              "only the current date and time are)")
        elif isinstance(value, ast.RangeFunction):
            if value.is_rowsfrom:
                raise Refused("ROWS FROM is not allowed in a check")
        elif kind not in PLAIN_NODES:
            raise Refused(f"{_construct(value)} is not allowed in a check (a check is one "
                          "SELECT over {index} and {active} with plain expressions)")
        for field in value:
            self.node(getattr(value, field), ctes)

    def range_var(self, rel: ast.RangeVar, ctes: frozenset[str]) -> None:
        shown = ".".join(n for n in (rel.catalogname, rel.schemaname, rel.relname) if n)
        if rel.catalogname is None and rel.schemaname is None and rel.relname in ctes:
            return
        if rel.catalogname is None and (rel.schemaname, rel.relname) in self.tables:
            return
        raise Refused(f"table {shown} is not allowed: {TABLES_RULE}")

    def function(self, call: ast.FuncCall) -> None:
        names = _names(call.funcname)
        if len(names) == 2 and names[0] == "pg_catalog":
            names = names[1:]
        shown = ".".join(_names(call.funcname))
        if len(names) == 1 and names[0] in SIZED:
            raise Refused(f"function {shown}() is not allowed in a check: {SIZED[names[0]]}")
        if len(names) != 1 or names[0] not in ALLOWED_FUNCTIONS:
            raise Refused(f"function {shown}() {FUNCTIONS_RULE}")
        if names[0] == "format":
            _format_string(call)

    def type_name(self, type_name: ast.TypeName | None) -> None:
        if type_name is None:
            raise Refused("a cast without a type is not allowed in a check")
        names = _names(type_name.names)
        shown = ".".join(names)
        if len(names) == 2 and names[0] == "pg_catalog":
            names = names[1:]
        if type_name.pct_type or type_name.setof or len(names) != 1 or (
                names[0] not in ALLOWED_TYPES):
            raise Refused(f"type {shown} is not allowed in a check: casts only to plain value "
                          "types (numbers, text, boolean, dates and times, json, uuid); "
                          "reg* types look up catalog objects")
        if names[0] == "bpchar" and not all(
                isinstance(m, ast.A_Const) and isinstance(m.val, ast.Integer)
                and (m.val.ival or 0) <= CHAR_LENGTH_LIMIT for m in type_name.typmods or ()):
            raise Refused(f"char(n) wider than {CHAR_LENGTH_LIMIT} is not allowed in a check: "
                          "it pads every value to n characters, like lpad()")

    def operator(self, kind: A_Expr_Kind | None, name: Iterable[Any] | None) -> None:
        if kind in RANGE_KINDS:
            return
        names = _names(name)
        shown = ".".join(names)
        if len(names) == 2 and names[0] == "pg_catalog":
            names = names[1:]
        if len(names) != 1 or names[0] not in ALLOWED_OPERATORS:
            raise Refused(f"operator {shown} is not on the allowlist of check operators "
                          "(comparisons, arithmetic, text matching, json and array access)")


def _format_string(call: ast.FuncCall) -> None:
    """format() without widths: its result is then its format string and its arguments."""
    first = call.args[0] if call.args else None
    text = first.val.sval if (isinstance(first, ast.A_Const) and not first.isnull
                              and isinstance(first.val, ast.String)) else None
    if text is None:
        raise Refused("format() needs a constant format string in a check (one from the data "
                      "could hold a width like %1073741000s)")
    at = 0
    while (at := text.find("%", at)) >= 0:
        found = FORMAT_SPECIFIER.match(text, at)
        if found is None:
            shown = SPECIFIER_SHOWN.match(text, at)
            raise Refused(f"format() with {shown.group() if shown else '%'!r} is not allowed "
                          "in a check: only "
                          "%s, %I, %L and %% (with a position like %2$s and the - flag); a "
                          "width pads the value to that many characters, like repeat()")
        at = found.end()


def _construct(node: ast.Node) -> str:
    kind = type(node).__name__
    return {"XmlExpr": "XML functions", "XmlSerialize": "XMLSERIALIZE",
            "ParamRef": "a $n parameter", "RangeTableSample": "TABLESAMPLE",
            "JsonIsPredicate": "IS JSON", "LockingClause": "FOR UPDATE/SHARE"
            }.get(kind, _kind(node))

