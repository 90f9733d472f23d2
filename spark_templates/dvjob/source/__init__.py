"""Reading the log: Kafka reader options (`load`), values into columns (`parse`), Debezium
change events (`changelog`), Avro through a schema registry (`avro_reader`,
`avro_decoding`, `schema_registry`), and what the bad-record policy leaves out
(`bad_records`)."""
