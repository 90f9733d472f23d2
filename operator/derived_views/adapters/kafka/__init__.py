"""Kafka as the operator reads it: end and start offsets (`offsets`), the timestamps of the
records an index lacks (`record_times`) and topics' retention (`topic_configs`), each one
batched request per cluster and cached."""
