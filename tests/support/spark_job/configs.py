"""A valid job configuration document, for the tests of its contract (values by hand)."""

from __future__ import annotations

from typing import Any

VALID: dict[str, Any] = {
    "view": "shop/orders-by-customer",
    "revision": "3f9c1a2b4d5e",
    "source": {"bootstrapServers": "127.0.0.1:9092", "topics": ["orders", "refunds"],
               "format": "json",
               "schema": "order_id STRING, customer_id STRING, amount DOUBLE, ts TIMESTAMP",
               "maxOffsetsPerTrigger": None, "kafkaOptions": {"failOnDataLoss": False}},
    "transform": {"sql": "SELECT customer_id, count(*) AS orders FROM events GROUP BY customer_id"},
    "sink": {"table": "orders_by_customer__3f9c1a2b4d5e", "schema": "public",
             "primaryKey": ["customer_id"], "ledgerTable": "dv_ledger"},
    "checkpointLocation": "/checkpoints/shop/orders-by-customer/3f9c1a2b4d5e",
    "trigger": {"processingTimeSeconds": 1},
}
