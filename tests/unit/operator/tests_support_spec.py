"""A minimal valid spec shared by the operator's unit tests."""

from typing import Any

BASE: dict[str, Any] = {
    "source": {"kafka": {"bootstrapServers": "kafka:9092"}, "topics": ["orders"],
               "schema": "order_id STRING, amount DOUBLE"},
    "transform": {"sql": "SELECT * FROM events"},
    "sink": {"postgres": {"secretRef": {"name": "db"}, "table": "orders"},
             "primaryKey": ["order_id"]},
}
