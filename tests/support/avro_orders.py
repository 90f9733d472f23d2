"""Order records in Avro for the tests: three compatible writer versions and one that cannot
be resolved to them; the Confluent wire format is dvstack.testing.avro_orders' (fastavro, never
Spark's), shared with the replay benchmark."""

from __future__ import annotations

from typing import Any

from dvstack.testing.avro_orders import wire

__all__ = ["BAD_WRITER", "CHANNEL", "CUSTOMER", "GIFT", "ID", "W1", "W2", "W3", "order_record",
           "wire"]


def order_record(*fields: dict[str, Any]) -> dict[str, Any]:
    return {"type": "record", "name": "Order", "namespace": "shop", "fields": list(fields)}


ID, CUSTOMER = {"name": "order_id", "type": "string"}, {"name": "customer_id", "type": "string"}
CHANNEL = {"name": "channel", "type": "string", "default": "web"}
W1 = order_record(ID, CUSTOMER, {"name": "amount", "type": "int"},
                  {"name": "coupon", "type": ["null", "string"], "default": None})
"""v1: the first producers."""
W2 = order_record(ID, CUSTOMER, {"name": "amount", "type": "int"}, CHANNEL)
"""v2: `channel` added with a default, `coupon` removed."""
W3 = order_record(ID, CUSTOMER, {"name": "amount", "type": "long"}, CHANNEL)
"""v3: `amount` widened from int to long."""
GIFT = {"name": "gift", "type": "boolean", "default": False}
BAD_WRITER = order_record(ID, CUSTOMER, {"name": "amount", "type": "string"})
"""A writer whose `amount` no reader of a long can resolve."""

