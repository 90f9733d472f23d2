"""Order records in Avro for the tests: three compatible writer versions, one that cannot be
resolved to them, and the Confluent wire format, written with fastavro (the tests' own Avro
library, never Spark's)."""

from __future__ import annotations

import io
import struct
from typing import Any

import fastavro


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


def wire(schema_id: int, schema: dict[str, Any], value: dict[str, Any]) -> bytes:
    """The Confluent wire format: magic byte 0, the schema id (4 bytes, big-endian), Avro."""
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), value)
    return b"\x00" + struct.pack(">I", schema_id) + out.getvalue()
