"""What a tenant writes as cutover-check SQL to get more than a read of its own index.

One catalogue for the unit test of core.judges.assertion_sql (refused before it runs, with the
expected message), the integration test against the stack's PostgreSQL (what the
server itself does with what gets past) and the table in docs/security.md. The
legitimate checks must keep passing: an allowlist that refuses them is no use.
MISREAD holds texts the policy accepts that a session with the sink user's own defaults
(ALTER ROLE ... SET) would read differently; the adapter pins those settings.
Placeholders are the spec's: `{index}` and `{active}`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Hostile:
    cls: str
    sql: str
    expected: str
    """A part of core.judges.assertion_sql's refusal."""
    unrun: str = ""
    """Why the integration test does not send it to the shared server anyway ("": it does)."""


@dataclass(frozen=True)
class Legitimate:
    what: str
    sql: str
    expect: str = "noRows"
    """How the check is judged; over the integration fixture's tables every one passes."""


FUNCTION = "is not on the allowlist of check functions"
SIZED = "is not allowed in a check: it builds a value as large as a number it is given"
ROWS = "is not allowed in a check: it builds one value from every row it reads"
WIDTH = "is not allowed in a check: only %s, %I, %L and %%"
GIGABYTES = "builds values of up to 1 GB in the shared server"
TABLE = "is not allowed: a check may only read {index} and {active}"
REG = "reg* types look up catalog objects"

HOSTILE: list[Hostile] = [
    # more than one statement: the second would run outside the read-only transaction
    Hostile("multiple statements",
            "SELECT 1 FROM {index} WHERE false ORDER BY 1 USING <; COMMIT; CREATE TABLE x()",
            "it holds 3 statements; a check is exactly one SELECT statement"),
    Hostile("multiple statements", "SELECT 1 FROM {index}; SELECT pg_sleep(10)",
            "it holds 2 statements"),
    Hostile("multiple statements",
            "SELECT 1 FROM {index} WHERE false; RESET ROLE; DROP TABLE {active}",
            "it holds 3 statements"),
    Hostile("multiple statements", "SELECT 1 FROM {index} /* ; */ WHERE $$;$$ = ''; COMMIT",
            "it holds 2 statements"),
    Hostile("multiple statements", "SET ROLE postgres; SELECT 1 FROM {index}",
            "it holds 2 statements"),
    Hostile("multiple statements", "-- nothing but {index} in a comment",
            "it holds 0 statements"),
    # text sqlglot could not read was let through; PostgreSQL's parser decides now
    Hostile("unparseable", "SELECT 1 FROM {index} WHERE", "PostgreSQL cannot parse it: syntax "
            "error at end of input"),
    Hostile("unparseable", "SELECT 1 FROM {index} WHERE x = 'unterminated",
            "PostgreSQL cannot parse it: unterminated quoted string"),
    Hostile("unparseable", "SELEC 1 FROM {index}; COMMIT",
            'PostgreSQL cannot parse it: syntax error at or near "SELEC"'),
    # U& identifiers: the same names under another spelling
    Hostile("U& spelling", 'SELECT U&"\\0070g_sleep"(5) FROM {index}',
            f"function pg_sleep() {FUNCTION}"),
    Hostile("U& spelling", 'SELECT 1 FROM {index}, U&"pg_\\0061uthid"',
            f"table pg_authid {TABLE}"),
    Hostile("U& spelling", "SELECT 1 FROM {index}, U&\"!0070g_shadow\" UESCAPE '!'",
            f"table pg_shadow {TABLE}"),
    Hostile("U& spelling", "SELECT 'x'::U&\"reg\\0063lass\" FROM {index}", REG),
    # functions that run a string as SQL
    Hostile("runs SQL text", "SELECT query_to_xml('DELETE FROM t RETURNING 1', true, false, '') "
            "FROM {index}", f"function query_to_xml() {FUNCTION}"),
    Hostile("runs SQL text", "SELECT * FROM {index}, ts_stat('SELECT v FROM t')",
            f"function ts_stat() {FUNCTION}"),
    Hostile("runs SQL text", "SELECT ts_rewrite('a'::tsquery, 'SELECT 1') FROM {index}",
            f"function ts_rewrite() {FUNCTION}"),
    Hostile("runs SQL text", "SELECT cursor_to_xml('c', 1, false, false, '') FROM {index}",
            f"function cursor_to_xml() {FUNCTION}"),
    Hostile("runs SQL text", "SELECT * FROM {index} WHERE EXISTS (SELECT * FROM "
            "dblink('host=evil', 'SELECT 1') AS t(a int))", f"function dblink() {FUNCTION}"),
    # whole schemas, files, settings
    Hostile("reads schemas", "SELECT database_to_xml(true, false, '') FROM {index}",
            f"function database_to_xml() {FUNCTION}"),
    Hostile("reads schemas", "SELECT schema_to_xml_and_xmlschema('public', true, false, '') "
            "FROM {index}", f"function schema_to_xml_and_xmlschema() {FUNCTION}"),
    Hostile("reads files", "SELECT pg_read_file('/etc/passwd') FROM {index}",
            f"function pg_read_file() {FUNCTION}"),
    Hostile("reads files", "SELECT * FROM {index}, pg_ls_dir('.')",
            f"function pg_ls_dir() {FUNCTION}"),
    Hostile("reads settings", "SELECT current_setting('data_directory') FROM {index}",
            f"function current_setting() {FUNCTION}"),
    Hostile("changes settings", "SELECT set_config('role', 'postgres', false) FROM {index}",
            f"function set_config() {FUNCTION}"),
    Hostile("identity", "SELECT current_user FROM {index}",
            "CURRENT_USER is not allowed in a check"),
    # large objects
    Hostile("large objects", "SELECT lo_import('/etc/passwd') FROM {index}",
            f"function lo_import() {FUNCTION}"),
    Hostile("large objects", "SELECT lo_get(1) FROM {index}", f"function lo_get() {FUNCTION}"),
    # advisory locks: a session lock outlives the check's transaction (job start-ups took
    # one once, which any role could hold; they now lock their own index table)
    Hostile("advisory locks", "SELECT pg_try_advisory_lock(1) FROM {index}",
            f"function pg_try_advisory_lock() {FUNCTION}"),
    Hostile("advisory locks", "SELECT pg_advisory_xact_lock(42) FROM {index}",
            f"function pg_advisory_xact_lock() {FUNCTION}"),
    Hostile("advisory locks", "SELECT pg_catalog.pg_advisory_lock(7) FROM {index}",
            f"function pg_catalog.pg_advisory_lock() {FUNCTION}"),
    # sleeps, signals, notifications
    Hostile("sleeps", "SELECT pg_sleep(3600) FROM {index}", f"function pg_sleep() {FUNCTION}"),
    Hostile("sleeps", 'SELECT "pg_catalog"."pg_sleep_for"(\'1 hour\') FROM {index}',
            f"function pg_catalog.pg_sleep_for() {FUNCTION}"),
    Hostile("signals", "SELECT pg_terminate_backend(1) FROM {index}",
            f"function pg_terminate_backend() {FUNCTION}"),
    Hostile("signals", "SELECT pg_cancel_backend(1) FROM {index}",
            f"function pg_cancel_backend() {FUNCTION}"),
    Hostile("signals", "SELECT pg_notify('c', customer_id) FROM {index}",
            f"function pg_notify() {FUNCTION}"),
    # sequences
    Hostile("sequences", "SELECT nextval('s') FROM {index}", f"function nextval() {FUNCTION}"),
    Hostile("sequences", "SELECT setval('s', 1) FROM {index}", f"function setval() {FUNCTION}"),
    # unbounded allocation: a large value (or many rows) from a small text
    Hostile("allocation", "SELECT repeat('x', 1000000000) FROM {index}",
            f"function repeat() {SIZED}", unrun=GIGABYTES),
    Hostile("allocation", "SELECT * FROM {index}, generate_series(1, 1000000000)",
            "function generate_series() is not allowed in a check: it makes as many rows as "
            "a number it is given"),
    Hostile("allocation", "SELECT lpad('x', 1073741000) FROM {index}", f"function lpad() {SIZED}",
            unrun=GIGABYTES),
    Hostile("allocation", "SELECT pg_catalog.rpad(customer_id, 1073741000) FROM {index}",
            f"function pg_catalog.rpad() {SIZED}", unrun=GIGABYTES),
    Hostile("allocation", "SELECT array_fill(1, ARRAY[200000000]) FROM {index}",
            f"function array_fill() {SIZED}", unrun=GIGABYTES),
    Hostile("allocation", "SELECT customer_id::char(10485760) FROM {index}",
            "char(n) wider than 1000 is not allowed in a check: it pads every value"),
    # format() with a width is repeat() by another name, anywhere in the query
    Hostile("format width", "SELECT format('%1073741000s', 'x') FROM {index}",
            f"format() with '%1073741000s' {WIDTH}", unrun=GIGABYTES),
    Hostile("format width", "SELECT jsonb_build_array(format('%1073741000s', 'x')) FROM {index}",
            f"format() with '%1073741000s' {WIDTH}", unrun=GIGABYTES),
    Hostile("format width", "SELECT count(format('%-1073741000s', customer_id)) FROM {index}",
            f"format() with '%-1073741000s' {WIDTH}", unrun=GIGABYTES),
    Hostile("format width", "SELECT format('%*s', 1073741000, 'x') FROM {index}",
            f"format() with '%*s' {WIDTH}", unrun=GIGABYTES),
    Hostile("format width", "SELECT format('%2$1073741000s', 'x', 'y') FROM {index}",
            f"format() with '%2$1073741000s' {WIDTH}", unrun=GIGABYTES),
    Hostile("format width", "SELECT format(E'%10737410\\x30\\x30s', 'x') FROM {index}",
            f"format() with '%1073741000s' {WIDTH}", unrun=GIGABYTES),
    Hostile("format width", "SELECT format(U&'%1073741000\\0073', 'x') FROM {index}",
            f"format() with '%1073741000s' {WIDTH}", unrun=GIGABYTES),
    Hostile("format width", "SELECT format(customer_id, 'x') FROM {index}",
            "format() needs a constant format string in a check"),
    # aggregates whose one value grows with every row: a cross join makes it gigabytes
    Hostile("aggregated values", "SELECT string_agg(format('%1073741000s', 'x'), '') "
            "FROM {index}", f"function string_agg() {ROWS}", unrun=GIGABYTES),
    Hostile("aggregated values", "SELECT string_agg(a.customer_id, ',') "
            "FROM {index} a, {index} b, {index} c", f"function string_agg() {ROWS}"),
    Hostile("aggregated values", "SELECT array_agg(a.*) FROM {index} a, {index} b",
            f"function array_agg() {ROWS}"),
    Hostile("aggregated values", "SELECT jsonb_agg(a) FROM {index} a, {index} b",
            f"function jsonb_agg() {ROWS}"),
    Hostile("aggregated values", "SELECT json_object_agg(a.customer_id || b.customer_id, "
            "a.balance) FROM {index} a, {index} b", f"function json_object_agg() {ROWS}"),
    Hostile("aggregated values", "SELECT array_agg(customer_id) OVER (ORDER BY customer_id) "
            "FROM {index}", f"function array_agg() {ROWS}"),
    Hostile("aggregated values", "SELECT ARRAY(SELECT a.customer_id FROM {index} a, {index} b)",
            "ARRAY(SELECT ...) is not allowed in a check: it builds one value from every row"),
    # functions of other schemas, including look-alikes of allowed ones
    Hostile("other functions", "SELECT public.count(*) FROM {index}",
            f"function public.count() {FUNCTION}"),
    Hostile("other functions", "SELECT evil_fn() FROM {index}", f"function evil_fn() {FUNCTION}"),
    Hostile("other functions", "SELECT regclass('pg_authid') FROM {index}",
            f"function regclass() {FUNCTION}"),
    # writes, DDL and commands
    Hostile("writes", "DELETE FROM {index}", "DELETE is not a SELECT; a check only reads"),
    Hostile("writes", "INSERT INTO {index} SELECT * FROM {active}", "INSERT is not a SELECT"),
    Hostile("writes", "UPDATE {index} SET balance = 0", "UPDATE is not a SELECT"),
    Hostile("writes", "MERGE INTO {index} t USING {active} s ON t.customer_id = s.customer_id "
            "WHEN MATCHED THEN DELETE", "MERGE is not a SELECT"),
    Hostile("DDL", "TRUNCATE {index}", "TRUNCATE is not a SELECT"),
    Hostile("DDL", "CREATE TABLE stolen AS SELECT * FROM {index}",
            "CREATE TABLE AS is not a SELECT"),
    Hostile("DDL", "LOCK TABLE {index}", "LOCK is not a SELECT"),
    Hostile("COPY", "COPY {index} TO PROGRAM 'sh -c id'", "COPY is not a SELECT"),
    Hostile("CALL", "CALL evil('{index}')", "CALL is not a SELECT"),
    Hostile("DO", "DO $$BEGIN PERFORM 1 FROM {index}; END$$", "DO is not a SELECT"),
    Hostile("transaction", "COMMIT -- {index}", "a transaction command is not a SELECT"),
    Hostile("EXPLAIN", "EXPLAIN ANALYZE SELECT * FROM {index}", "EXPLAIN is not a SELECT"),
    Hostile("SELECT INTO", "SELECT * INTO stolen FROM {index}",
            "SELECT INTO creates a table; a check only reads"),
    Hostile("FOR UPDATE", "SELECT * FROM {index} FOR UPDATE", "FOR UPDATE/SHARE locks rows"),
    Hostile("FOR UPDATE", "SELECT * FROM (SELECT * FROM {index} FOR SHARE SKIP LOCKED) t",
            "FOR UPDATE/SHARE locks rows"),
    # data-modifying WITH
    Hostile("data-modifying CTE", "WITH gone AS (DELETE FROM {index} RETURNING *) "
            "SELECT * FROM gone", "WITH gone AS (DELETE ...) modifies data"),
    Hostile("data-modifying CTE", "WITH x AS (UPDATE {active} SET balance = 0 RETURNING 1) "
            "SELECT 1 FROM {index}", "WITH x AS (UPDATE ...) modifies data"),
    Hostile("data-modifying CTE", "SELECT * FROM {index} WHERE EXISTS (WITH x AS (INSERT INTO "
            "{index} VALUES ('k', 1) RETURNING 1) SELECT * FROM x)",
            "WITH x AS (INSERT ...) modifies data"),
    # relations other than the two indexes
    Hostile("catalog tables", "SELECT * FROM {index} JOIN pg_catalog.pg_authid ON true",
            f"table pg_catalog.pg_authid {TABLE}"),
    Hostile("catalog tables", "SELECT * FROM {index}, pg_shadow", f"table pg_shadow {TABLE}"),
    Hostile("catalog tables", "SELECT (SELECT passwd FROM pg_user LIMIT 1) FROM {index}",
            f"table pg_user {TABLE}"),
    Hostile("catalog tables", "SELECT customer_id FROM {index} UNION "
            "SELECT query FROM pg_stat_activity", f"table pg_stat_activity {TABLE}"),
    Hostile("information_schema", "SELECT * FROM {index} WHERE EXISTS "
            "(SELECT 1 FROM information_schema.tables)",
            f"table information_schema.tables {TABLE}"),
    Hostile("other schemas", "SELECT * FROM {index} JOIN public.other_team o ON true",
            f"table public.other_team {TABLE}"),
    Hostile("other schemas", "SELECT * FROM otherdb.public.t, {index}",
            f"table otherdb.public.t {TABLE}"),
    Hostile("WITH scope", "SELECT * FROM {index}, (WITH pg_authid AS (SELECT 1) SELECT 1) x, "
            "pg_authid", f"table pg_authid {TABLE}"),
    Hostile("WITH scope", "WITH c AS (SELECT * FROM c) SELECT * FROM {index}, c",
            f"table c {TABLE}"),
    Hostile("WITH RECURSIVE", "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) "
            "SELECT * FROM r, {index}", "WITH RECURSIVE is not allowed in a check"),
    # casts that look objects up
    Hostile("reg* casts", "SELECT 'pg_authid'::regclass FROM {index}", REG),
    Hostile("reg* casts", "SELECT 'pg_sleep'::regproc FROM {index}", REG),
    Hostile("reg* casts", "SELECT CAST('x' AS pg_catalog.regnamespace) FROM {index}", REG),
    # other constructs
    Hostile("XML", "SELECT xmlparse(document '<x/>') FROM {index}", "XML functions"),
    Hostile("TABLESAMPLE", "SELECT * FROM {index} TABLESAMPLE SYSTEM (10)", "TABLESAMPLE"),
    Hostile("operators", "SELECT 1 FROM {index} WHERE 1 OPERATOR(public.===) 1",
            "operator public.=== is not on the allowlist of check operators"),
    Hostile("operators", "SELECT * FROM {index} ORDER BY 1 USING OPERATOR(evil.<)",
            "operator evil.< is not on the allowlist"),
    Hostile("operators", "SELECT 1 FROM {index} WHERE 1 OPERATOR(evil.=) ANY (SELECT 1)",
            "operator evil.= is not on the allowlist"),
    Hostile("WITH RECURSIVE", "WITH c AS (SELECT 1 AS a FROM {index}) SEARCH DEPTH FIRST BY a "
            "SET ord SELECT * FROM c",
            "SEARCH and CYCLE are for recursive queries"),
    Hostile("parameters", "SELECT $1 FROM {index}", "a $n parameter is not allowed"),
]

LEGITIMATE: list[Legitimate] = [
    Legitimate("the documented example",
               "SELECT customer_id, balance FROM {index} WHERE balance < -1000000"),
    Legitimate("sums of both indexes", "SELECT (SELECT sum(balance) FROM {index}) <= "
               "(SELECT sum(balance) FROM {active}) + 1000000", "true"),
    Legitimate("a join of the indexes", "SELECT c.customer_id FROM {index} c JOIN {active} a "
               "USING (customer_id) WHERE abs(c.balance - a.balance) > 1000000"),
    Legitimate("a WITH query", "WITH neg AS (SELECT customer_id FROM {index} WHERE balance < "
               "-1000000) SELECT * FROM neg"),
    Legitimate("WITH queries reading each other", "WITH a AS (SELECT customer_id FROM {index}), "
               "b AS (SELECT customer_id FROM a WHERE customer_id IS NULL) SELECT * FROM b"),
    Legitimate("a window function", "SELECT customer_id FROM (SELECT customer_id, row_number() "
               "OVER (PARTITION BY customer_id ORDER BY balance) AS n FROM {index}) t "
               "WHERE n > 1"),
    Legitimate("NOT EXISTS", "SELECT c.customer_id FROM {index} c WHERE NOT EXISTS "
               "(SELECT 1 FROM {active} a WHERE a.customer_id = c.customer_id)"),
    Legitimate("CASE", "SELECT count(CASE WHEN balance < -1000000 THEN 1 END) = 0 FROM {index}",
               "true"),
    Legitimate("an aggregate with FILTER",
               "SELECT count(*) FILTER (WHERE balance IS NULL) = 0 FROM {index}", "true"),
    Legitimate("a percentile", "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY balance) "
               "> -1000000 FROM {index}", "true"),
    Legitimate("text functions", "SELECT customer_id FROM {index} WHERE customer_id NOT LIKE "
               "'c-%' OR lower(customer_id) <> customer_id OR length(trim(customer_id)) = 0"),
    Legitimate("casts and rounding", "SELECT abs(round(coalesce(sum(balance), 0)::numeric, 2)) "
               ">= 0 FROM {index}", "true"),
    Legitimate("dates", "SELECT date_trunc('day', now()) <= now() AND extract(year FROM "
               "current_date) > 2000 AND now() - interval '1 hour' < now() FROM {index} "
               "LIMIT 1", "true"),
    Legitimate("json", "SELECT jsonb_build_object('id', customer_id)->>'id' FROM {index} "
               "WHERE jsonb_build_object('id', customer_id)->>'id' <> customer_id"),
    Legitimate("pg_catalog-qualified and U& spelled",
               'SELECT pg_catalog.count(*) >= 0 AND bool_and(U&"\\0063ustomer_id" IS NOT NULL) '
               "FROM {index}", "true"),
    Legitimate("ORDER BY USING, GROUP BY, HAVING", "SELECT customer_id, count(*) FROM {index} "
               "GROUP BY customer_id HAVING count(*) > 1 ORDER BY 1 USING <"),
    Legitimate("IN, BETWEEN, ANY, set operations", "SELECT customer_id FROM {index} WHERE "
               "balance NOT BETWEEN -1000000 AND 1000000 OR customer_id IN ('', ' ') OR "
               "customer_id = ANY (ARRAY['']) EXCEPT SELECT customer_id FROM {active}"),
    Legitimate("format() without widths", "SELECT customer_id FROM {index} WHERE "
               "format('%s-%2$s %%', customer_id, balance) NOT LIKE 'c-%' OR "
               "format('%I.%L', customer_id, balance) = '' OR customer_id::char(6) = ''"),
    Legitimate("a trailing semicolon and comment",
               "SELECT customer_id FROM {index} WHERE balance < -1000000;  -- none"),
    Legitimate("a trailing comment", "SELECT count(*) = 100 FROM {index} -- all of them",
               "true"),
    Legitimate("every column of a self-join, ordered", "SELECT * FROM {index} a JOIN {active} b "
               "USING (customer_id) WHERE a.balance < -1000000 ORDER BY a.balance"),
]


@dataclass(frozen=True)
class Misread:
    what: str
    sql: str
    """Accepted by core.judges.assertion_sql; `{schema}` is the schema the sink user owns."""
    settings: dict[str, str]
    """The sink user's own defaults, each value as `ALTER ROLE ... SET name = <value>` takes
    it (quoted where it must be); `{schema}` as above."""
    read: tuple[str, ...]
    """The check's first row as core.judges.assertion_sql read the text (PostgreSQL's defaults)."""
    setup: str = ""
    """Run as the sink user first (its own objects)."""


MISREAD: list[Misread] = [
    Misread("a backslash ends no string: standard_conforming_strings = off",
            "SELECT 'a\\' -- ', pg_catalog.current_setting('search_path') --'\n"
            "FROM {index} LIMIT 1",
            {"standard_conforming_strings": "off"}, ("a\\",)),
    Misread("¥ is sent as a backslash: client_encoding = SJIS, backslash_quote = on",
            "SELECT E'a¥' -- ', pg_catalog.current_setting('client_encoding') --'\n"
            "FROM {index} LIMIT 1",
            {"client_encoding": "'SJIS'", "backslash_quote": "on"}, ("a¥",)),
    Misread("a function and an operator of the sink user's schema first: search_path",
            "SELECT lower('ABC'), 'X' = 'x' FROM {index} LIMIT 1",
            {"search_path": '"{schema}", pg_catalog'}, ("abc", "false"),
            setup="CREATE FUNCTION {schema}.lower(text) RETURNS text LANGUAGE sql "
                  "AS $$SELECT 'hijacked'$$; CREATE FUNCTION {schema}.eq(text, text) RETURNS "
                  "boolean LANGUAGE sql AS $$SELECT true$$; CREATE OPERATOR {schema}.= "
                  "(LEFTARG = text, RIGHTARG = text, FUNCTION = {schema}.eq)"),
    Misread("x = NULL read as x IS NULL: transform_null_equals = on",
            "SELECT (NULL::text = NULL) IS NULL FROM {index} LIMIT 1",
            {"transform_null_equals": "on"}, ("true",)),
    Misread("NULL in an array literal a string: array_nulls = off",
            "SELECT ('{NULL}'::text[])[1] IS NULL FROM {index} LIMIT 1",
            {"array_nulls": "off"}, ("true",)),
    Misread("01/02 is the first of February: DateStyle = 'SQL, DMY'",
            "SELECT '01/02/2024'::date = '2024-01-02'::date FROM {index} LIMIT 1",
            {"DateStyle": "'SQL, DMY'"}, ("true",)),
    Misread("a time without offset in another zone: TimeZone",
            "SELECT '2024-01-01 00:00'::timestamptz = '2024-01-01 00:00+00'::timestamptz "
            "FROM {index} LIMIT 1",
            {"TimeZone": "'Asia/Tokyo'"}, ("true",)),
    Misread("an interval written otherwise: IntervalStyle = iso_8601",
            "SELECT '1 day'::interval::text = '1 day' FROM {index} LIMIT 1",
            {"IntervalStyle": "iso_8601"}, ("true",)),
    Misread("floats rounded: extra_float_digits = -15",
            "SELECT 0.1::float8 + 0.2::float8 > 0.3::float8, 0.1::float8 + 0.2::float8 "
            "FROM {index} LIMIT 1",
            {"extra_float_digits": "'-15'"}, ("true", "0.30000000000000004")),
    Misread("bytea written otherwise: bytea_output = escape",
            "SELECT 'A'::bytea::text = '\\x41' FROM {index} LIMIT 1",
            {"bytea_output": "escape"}, ("true",)),
]
