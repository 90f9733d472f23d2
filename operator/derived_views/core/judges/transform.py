"""A view's schema DDL and Spark SQL, checked before any job starts: a pure function of the spec.

Without this, a typo in the SQL surfaces when a Spark driver has started and
analysed the query, minutes after the apply, and costs a driver start each
time. Here the SQL is parsed with sqlglot's Spark dialect and its column
references are resolved against what the job's `events` view holds (the DDL's
fields plus the `_kafka_*` and, for Debezium, `_debezium_*` columns), and the
primary key is looked for in the output.

No false refusals of what it can read: where the SQL uses something whose
columns it cannot know (a table-valued function, a star over an expression, a
struct built from strings), it lets the query through and the job has the last
word. What it cannot read at all is refused (core/judges/transform_policy.py): a security
check fails closed. Python transforms are not checked (the function runs only
inside the job).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.errors import ParseError, SqlglotError

from derived_views.api.spec import MAX_SCHEMA, DerivedViewSpec
from derived_views.core import reasons
from derived_views.core.judges.avro_schema import AvroSchemaError
from derived_views.core.judges.source_schema import (
    NONE_KNOWN,
    ReaderSchemas,
    ReaderSchemaUnknown,
    events_ddl,
    pinned_reader,
    reader_text,
)
from derived_views.core.judges.spark_ddl import DdlError, Field, parse_schema
from derived_views.core.judges.spark_lexer import SqlTextError
from derived_views.core.judges.transform_policy import (
    MAX_SQL_CHARS,
    SHOWN_NAME,
    parse_spark,
    unsafe_sql,
)

EVENTS_VIEW = "events"
KAFKA_COLUMNS = ("_kafka_key", "_kafka_topic", "_kafka_partition", "_kafka_offset",
                 "_kafka_timestamp", "_kafka_tombstone")
DEBEZIUM_COLUMNS = ("_debezium_op", "_debezium_ts_ms", "_debezium_deleted")
"""The metadata columns the job adds to `events` (spark_templates/dvjob/source/parse.py; a unit
test holds the two lists equal)."""

GENERATED_NAMES = re.compile(r"^(col|key|value|pos|c\d+|col\d+|window|session_window)$")
"""Names Spark gives generator outputs (explode, posexplode, json_tuple, stack) and time
windows when the SQL does not alias them: never refused as unknown."""
BARE_WORDS = frozenset({
    "current_date", "current_timestamp", "current_user", "user", "session_user",
    "current_catalog", "current_database", "current_schema", "current_time", "all", "default",
    "year", "years", "quarter", "month", "months", "week", "weeks", "day", "days", "dayofyear",
    "hour", "hours", "minute", "minutes", "second", "seconds", "millisecond", "milliseconds",
    "microsecond", "microseconds", "nanosecond", "nanoseconds", "true", "false", "null",
})
"""Words Spark reads as functions, literals or units where sqlglot may see a column."""
GENERATOR_FUNCTIONS = frozenset({"stack", "json_tuple", "explode_outer", "posexplode_outer",
                                 "inline_outer", "variant_explode", "variant_explode_outer"})
NOT_A_QUERY = (exp.Create, exp.Drop, exp.Insert, exp.Delete, exp.Update, exp.Merge,
               exp.Alter, exp.TruncateTable, exp.Use, exp.Set)
SUGGESTIONS = 5
VARIANT_PATH = re.compile(r"[A-Za-z0-9_`]:[A-Za-z_`$\[]")
"""Spark syntax sqlglot 30 does not parse (the variant path `v:a.b`): a query failing to
parse that contains it is refused with the spelling the check can read."""
MESSAGE_CHARS = 1024
"""The longest refusal message (it ends in a Kubernetes condition)."""
SUGGESTION_PREFIX = 64
"""Suggestions rank names by their first characters only: the distance costs the product of
the two lengths."""


@dataclass(frozen=True)
class Refusal:
    """Why the spec's revision cannot run: a Stalled reason and its message."""

    reason: str
    message: str


def check_spec(spec: DerivedViewSpec, known: ReaderSchemas = NONE_KNOWN) -> Refusal | None:
    """The first certain problem of the spec's schema or SQL, None when none is found; a
    reader schema pinned in the registry is read from `known` (fetched, or kept by the
    revision's status)."""
    pin = pinned_reader(spec.source)
    text = reader_text(spec.source, known)
    if pin is not None and text is not None and len(text) > MAX_SCHEMA:
        return Refusal(reasons.INVALID_SCHEMA, (
            f"source.avro.readerSchema: {pin.describe()} is {len(text)} characters, more than "
            f"{MAX_SCHEMA} (each live revision's status keeps a copy): pin a smaller reader "
            "schema, with only the fields the transform reads"))
    try:
        ddl = events_ddl(spec.source, known)
    except ReaderSchemaUnknown as exc:
        return Refusal(reasons.READER_SCHEMA_NOT_FOUND,
                       f"source.avro.readerSchema: {exc}: it has not been read from the "
                       "schema registry")
    except AvroSchemaError as exc:
        where = "" if pin is None else f" ({pin.describe()} in the registry)"
        return Refusal(reasons.INVALID_SCHEMA,
                       f"source.avro.readerSchema{where}: {exc}"[:MESSAGE_CHARS])
    return _check(ddl, spec.source.format, spec.transform.sql, tuple(spec.sink.primary_key))


@functools.lru_cache(maxsize=256)
def _check(ddl: str, fmt: str, sql: str | None, primary_key: tuple[str, ...]
           ) -> Refusal | None:
    """Fails closed: whatever goes wrong while judging (RecursionError on a deeply nested
    query included) is a refusal, never an exception in the operator's pass."""
    try:
        refusal = _judge(ddl, fmt, sql, primary_key)
    except Exception as exc:
        refusal = Refusal(reasons.POLICY_VIOLATION, (
            f"transform.sql: could not be checked ({type(exc).__name__}), so it is refused: "
            "simplify the query (less nesting, shorter names)"))
    if refusal is not None and len(refusal.message) > MESSAGE_CHARS:
        refusal = Refusal(refusal.reason, refusal.message[:MESSAGE_CHARS - 3] + "...")
    return refusal


def _judge(ddl: str, fmt: str, sql: str | None, primary_key: tuple[str, ...]
           ) -> Refusal | None:
    try:
        fields = parse_schema(ddl)
    except DdlError as exc:
        return Refusal(reasons.INVALID_SCHEMA, f"source.schema: cannot parse {_quote(ddl)}: {exc}")
    if sql is None:
        return None  # a Python transform: only the job can run it
    if len(sql) <= MAX_SQL_CHARS:
        try:
            parse_spark(sql)
        except (SqlTextError, RecursionError):
            pass  # unsafe_sql names it
        except ParseError as exc:  # a mistake, in the parser's words: not the policy's
            return Refusal(reasons.INVALID_TRANSFORM, _unreadable(sql, exc))
    unsafe = unsafe_sql(sql)
    if unsafe is not None:
        return Refusal(reasons.POLICY_VIOLATION, f"transform.sql: {unsafe}")
    problem = check_sql(sql, fields, fmt, primary_key)
    return None if problem is None else Refusal(reasons.INVALID_TRANSFORM, problem)


def _unreadable(sql: str, exc: ParseError) -> str:
    if VARIANT_PATH.search(sql):
        return ("transform.sql: the variant path `v:a.b` is Spark syntax the operator's check "
                "cannot read, and SQL it cannot read is refused: write "
                "variant_get(v, '$.a.b', 'string') (or try_variant_get) instead")
    return f"transform.sql: {_syntax_error(exc)}"


def _quote(text: str, limit: int = 120) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


def check_sql(sql: str, fields: list[Field] | None, fmt: str,
              primary_key: tuple[str, ...]) -> str | None:
    """The first certain problem of `sql`, as a message; `fields` None: the schema is unknown."""
    try:
        statements = _parse(sql)
    except SqlTextError as exc:
        return f"transform.sql: {exc}"
    except ParseError as exc:
        return _unreadable(sql, exc)
    if not statements:
        return "transform.sql: no query: write SELECT ... FROM events"
    if len(statements) > 1:
        return ("transform.sql: [PARSE_SYNTAX_ERROR] one query only: the transform is a single "
                "SELECT (or WITH ... SELECT) over the view `events`")
    query = statements[0]
    if isinstance(query, NOT_A_QUERY):
        return (f"transform.sql: a {query.key.upper()} statement is not a query: the transform "
                "is a SELECT (or WITH ... SELECT) over the view `events`")
    missing_table = _unknown_table(query)
    if missing_table is not None:
        return (f"transform.sql: [TABLE_OR_VIEW_NOT_FOUND] The table or view `{missing_table}` "
                f"cannot be found: the transform reads the view `{EVENTS_VIEW}`")
    if fields is None:
        return None
    columns = _events_columns(fields, fmt)
    unknown = _unknown_column(query, columns, fields)
    if unknown is not None:
        return f"transform.sql: {_unresolved(unknown, columns)}"
    combining = _combining(query) if fmt == "debezium" else None
    if combining is not None:
        return (f"transform.sql: aggregates over a changelog are refused ({combining}): "
                f"{DEBEZIUM_AGGREGATE_FIX}")
    outputs = _output_names(query, columns)
    if outputs is not None:
        missing = [k for k in primary_key if not _produced(k, outputs)]
        if missing:
            shown = ", ".join(name for name, _ in outputs) or "none"
            return (f"sink.primaryKey: {', '.join(missing)} not in the transform's output "
                    f"columns ({shown}); names are case-sensitive")
    return None


def _parse(sql: str) -> list[exp.Expr]:
    """The statements of `sql`, as sql_policy.parse_spark reads them (Spark's lexer first,
    then sqlglot; cached)."""
    return list(parse_spark(sql))


def _syntax_error(exc: ParseError) -> str:
    detail = exc.errors[0] if exc.errors else {}
    near = str(detail.get("highlight") or "").strip()
    where = (f" (line {detail['line']}, column {detail['col']})"
             if detail.get("line") is not None else "")
    cause = str(detail.get("description") or "").strip()
    clause = re.search(r"<class '[\w.]*?(\w+)'>", cause)
    if clause is not None:  # sqlglot names its own classes: say which clause is incomplete
        cause = f"incomplete {clause.group(1).upper()}"
    return (f"[PARSE_SYNTAX_ERROR] Syntax error at or near '{near}'{where}"
            + (f": {cause}" if cause else ""))


def _unresolved(name: str, columns: list[str]) -> str:
    prefix = name.lower()[:SUGGESTION_PREFIX]
    ranked = sorted(columns, key=lambda c: (_distance(prefix, c.lower()[:SUGGESTION_PREFIX]), c))
    shown = ", ".join(f"`{_cut(c)}`" for c in ranked[:SUGGESTIONS])
    return (f"[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or function parameter "
            f"with name `{_cut(name)}` cannot be resolved. Did you mean one of the following? "
            f"[{shown}].")


def _cut(name: str) -> str:
    return name if len(name) <= SHOWN_NAME else f"{name[:SHOWN_NAME]}..."


def _distance(a: str, b: str) -> int:
    """Levenshtein distance, as Spark ranks its suggestions."""
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1,
                               previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def _events_columns(fields: list[Field], fmt: str) -> list[str]:
    metadata = KAFKA_COLUMNS + (DEBEZIUM_COLUMNS if fmt == "debezium" else ())
    return [f.name for f in fields] + list(metadata)


def _cte_names(query: exp.Expr) -> set[str]:
    return {cte.alias_or_name.lower() for cte in query.find_all(exp.CTE)}


def _unknown_table(query: exp.Expr) -> str | None:
    """A plain table name that is neither `events` nor a CTE (Spark's catalog is empty)."""
    known = _cte_names(query) | {EVENTS_VIEW}
    for table in query.find_all(exp.Table):
        if (isinstance(table.this, exp.Identifier) and not table.args.get("db")
                and not table.args.get("catalog") and table.name.lower() not in known):
            return table.name
    return None


def _events_aliases(query: exp.Expr) -> set[str]:
    """Names that stand for `events` (and nothing else) in a qualified column."""
    bound: dict[str, set[str]] = {}
    for table in query.find_all(exp.Table):
        alias = table.alias
        if alias:
            bound.setdefault(alias.lower(), set()).add(table.name.lower())
    for node in query.find_all(exp.Subquery, exp.Lateral, exp.CTE):
        if node.alias:
            bound.setdefault(node.alias.lower(), set()).add("")
    aliases = {a for a, tables in bound.items() if tables == {EVENTS_VIEW}}
    if EVENTS_VIEW not in bound or bound[EVENTS_VIEW] == {EVENTS_VIEW}:
        aliases.add(EVENTS_VIEW)
    return aliases


def _defined_names(query: exp.Expr) -> set[str]:
    """Every name the query itself defines (aliases, CTEs, lambda parameters, named windows,
    and, since struct fields may be named by them, identifier-like string literals)."""
    names: set[str] = set()
    for node in query.walk():
        if isinstance(node, exp.Alias | exp.TableAlias | exp.CTE | exp.Subquery | exp.Window
                      ) and node.alias:
            names.add(node.alias.lower())
        if isinstance(node, exp.TableAlias):
            names.update(c.name.lower() for c in node.columns)
        elif isinstance(node, (exp.Aliases, exp.Lambda)):
            names.update(e.name.lower() for e in node.expressions)
        elif isinstance(node, exp.Pivot):
            names.update(i.name.lower() for i in node.find_all(exp.Identifier))
        elif isinstance(node, exp.Literal) and node.is_string:
            names.add(node.this.lower())
    return names


def _opaque(query: exp.Expr) -> bool:
    """True when the query may produce columns whose names cannot be known here."""
    for node in query.walk():
        if isinstance(node, exp.Table) and not isinstance(node.this, exp.Identifier):
            return True  # a table-valued function
        if isinstance(node, exp.Unnest | exp.Command):
            return True
        if isinstance(node, exp.Dot) and isinstance(node.expression, exp.Star):
            return True  # func(...).*
    return False


def _unknown_column(query: exp.Expr, columns: list[str],
                    fields: list[Field]) -> str | None:
    """A column no scope of the query can provide, or None (also when unsure)."""
    if _opaque(query):
        return None
    top = {c.lower() for c in columns}
    known = (top | {n.lower() for f in fields for n in f.nested} | _defined_names(query)
             | BARE_WORDS)
    events_aliases = _events_aliases(query)
    for column in query.find_all(exp.Column):
        if isinstance(column.this, exp.Star):
            continue
        name = column.name
        qualifier = column.table
        if not name or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            continue  # Spark's auto-generated names such as `count(1)`
        if column.args.get("db") or column.args.get("catalog"):
            continue  # a.b.c: struct access, whose parts cannot be told apart here
        if not qualifier:
            if name.lower() not in known and not GENERATED_NAMES.match(name.lower()):
                return name
        elif (qualifier.lower() in events_aliases and qualifier.lower() not in top
              and name.lower() not in top):
            return f"{qualifier}.{name}"
    return None


def _output_names(query: exp.Expr, columns: list[str]
                  ) -> list[tuple[str, bool]] | None:
    """The result's column names, each with whether its case is certain; None when unsure."""
    while isinstance(query, exp.SetOperation):
        query = query.this  # a UNION's columns are named by its first query
    if isinstance(query, exp.Subquery):
        query = query.unnest()
    if not isinstance(query, exp.Select) or query.args.get("laterals") or query.args.get(
            "pivots") or _opaque(query):
        return None
    by_lower = {c.lower(): c for c in columns}
    sources = [query.args.get("from_") or query.args.get("from"),
               *query.args.get("joins", [])]
    only_events = all(
        s is not None and isinstance(s.this, exp.Table)
        and isinstance(s.this.this, exp.Identifier) and s.this.name.lower() == EVENTS_VIEW
        for s in sources) and bool(sources)
    names: list[tuple[str, bool]] = []
    for projection in query.expressions:
        while isinstance(projection, exp.Paren):
            projection = projection.this
        if isinstance(projection, exp.Alias):
            names.append((projection.alias, True))
        elif isinstance(projection, exp.Star) or (
                isinstance(projection, exp.Column) and isinstance(projection.this, exp.Star)):
            if not only_events or len(sources) > 1:
                return None
            star = projection if isinstance(projection, exp.Star) else projection.this
            excluded = {e.name.lower() for e in star.args.get("except_") or star.args.get("except") or []}
            names.extend((c, True) for c in columns if c.lower() not in excluded)
        elif isinstance(projection, exp.Column):
            resolved = by_lower.get(projection.name.lower())
            if resolved is not None and not projection.table:
                names.append((resolved, True))
            else:
                names.append((projection.name, False))
        elif isinstance(projection, exp.Literal) and projection.is_string:
            names.append((projection.this, True))
        elif isinstance(projection, exp.Dot):
            names.append((projection.name, False))  # a struct field, named after the field
        elif isinstance(projection, exp.Explode | exp.Posexplode | exp.Inline) or (
                isinstance(projection, exp.Anonymous)
                and projection.name.lower() in GENERATOR_FUNCTIONS):
            return None  # generators name their columns themselves
        # anything else is named like `sum(amount)`: never a primary key column
    return names


def _produced(key: str, outputs: list[tuple[str, bool]]) -> bool:
    return any(name == key or (not certain and name.lower() == key.lower())
               for name, certain in outputs)


DEBEZIUM_AGGREGATE_FIX = (
    "format debezium delivers every version of a row (create, each update, delete), so an "
    "aggregate counts old versions that nothing subtracts (sum(amount) grows with each "
    "update). Write a projection that mirrors the table instead, e.g. SELECT id, amount, "
    "_debezium_deleted AS _dv_deleted FROM events with primaryKey [id], and aggregate when "
    "reading: a PostgreSQL view over the alias (SELECT customer_id, sum(amount) FROM <alias> "
    "GROUP BY customer_id) is always current")
"""The job's own words (dvjob/source/changelog.py refuses the same at its start; a test keeps the
two equal): the operator says it before any job starts."""


def _combining(query: exp.Expr) -> str | None:
    """What makes the query combine rows (the job's Aggregate plan node): GROUP BY, DISTINCT,
    or an aggregate function outside a window; None when it maps row to row."""
    if query.find(exp.Group) is not None:
        return "GROUP BY"
    if query.find(exp.Distinct) is not None:
        return "DISTINCT"
    for node in query.find_all(exp.AggFunc):
        if node.find_ancestor(exp.Window) is None:
            return f"{node.sql(dialect='spark').split('(', 1)[0].strip().lower()}()"
    return None


def aggregate_functions(sql: str) -> list[str]:
    """Aggregate functions the SQL calls (e.g. ['sum', 'count']), in order, without repeats;
    [] when it does not parse. A hook for rules on changelog sources: over a Debezium
    topic an aggregate counts every version of a row unless the SQL keeps the latest first.
    Window functions over aggregates count too; unknown functions are not listed."""
    try:
        statements = _parse(sql)
    except (SqlglotError, SqlTextError, RecursionError):
        return []
    names: dict[str, None] = {}
    for statement in statements:
        for node in statement.find_all(exp.AggFunc):
            spelt = node.sql(dialect="spark")  # Spark's name, e.g. max_by, not sqlglot's
            names.setdefault(spelt.split("(", 1)[0].strip().lower(), None)
    return list(names)
