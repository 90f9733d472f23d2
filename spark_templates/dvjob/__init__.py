"""The derived-view replay job: Kafka (from genesis) -> parse -> transform -> PostgreSQL.

Modules, in pipeline order: `config` (the operator's contract), `load` (Kafka
reader options), `parse` (value JSON + Kafka metadata columns), `transform`
(the view's SQL or Python function), `sink_schema` (Spark -> PostgreSQL
columns), `offsets` (a batch's end offsets from the checkpoint's offset log),
`sink_postgres` (one transaction per batch: rows + ledger), `bad_records`
(count and dead-letter what the bad-record policy left out), `batch_writer`
(the foreachBatch callable), `errors` (one-line failures) and `main` (wires
them to a streaming query).
"""
