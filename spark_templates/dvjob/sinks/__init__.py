"""Where batches go: what a sink must do (`contract`), which one a configuration names
(`registry`), Spark's columns as a sink's (`schema`), and one package per sink. The
PostgreSQL and OpenSearch sinks never import each other."""
