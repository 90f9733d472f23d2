"""Derived views: a Kubernetes operator that replays Kafka topics into derived views."""
