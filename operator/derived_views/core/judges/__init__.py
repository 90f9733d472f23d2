"""Everything that decides whether an author's input may run, before any job starts: the
view's Spark SQL (`transform`, over its sqlglot `transform_policy`, Spark's lexer rules and
allowlist), the events' schema (`source_schema`, `spark_ddl`, `avro_schema`), the cutover
checks' PostgreSQL SQL (`assertion_sql`), the tenancy policy (`tenancy`), and what a judge
that raised means (`unjudged`). Every judge is bounded by counted work and fails closed."""
