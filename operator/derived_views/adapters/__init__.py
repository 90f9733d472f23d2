"""Adapters: the only modules that talk to Kubernetes, Kafka and PostgreSQL."""
