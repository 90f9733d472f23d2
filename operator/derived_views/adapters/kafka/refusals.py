"""Kafka client errors no wait will cure (credentials, TLS, authorisation): every Kafka
adapter reports them at once, naming the cause, instead of at its deadline."""

from __future__ import annotations

from confluent_kafka import KafkaError

REFUSALS = frozenset({KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED,
                      KafkaError._SSL, KafkaError.TOPIC_AUTHORIZATION_FAILED})
