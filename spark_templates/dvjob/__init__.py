"""The derived-view replay job: Kafka (from genesis) -> parse -> transform -> a sink.

In pipeline order: `config` (the operator's contract), `source` (Kafka reader options,
values into columns, Debezium and Avro, bad records), `sql` (the guard on the view's SQL),
`transform` (the view's SQL or Python function), `offsets` (a batch's range from the
checkpoint), `sinks` (the contract, the registry, PostgreSQL and OpenSearch),
`batch_writer` (the foreachBatch callable), `first_batch`, `credentials`, `errors` (one-line
failures) and `main` (wires them to a streaming query). pyproject.toml's import contracts
hold the layers: main over the batch writer, over the sink registry, over each sink, over the
sink contract.
"""
