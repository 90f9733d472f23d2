"""Order events in Avro, in the Confluent wire format: for the tests and the replay benchmark.

Encoded with fastavro, an Avro implementation of its own, never Spark's: what the job
decodes was not written by the code that decodes it. The tests' writer schemas live beside
their tests (tests/avro_orders.py); here are what both need, the wire format, and the
benchmark's Avro twin of `replay.make_orders`' JSON events, so the two topics hold the same
events and differ only in their encoding.
"""

from __future__ import annotations

import datetime as dt
import io
import struct
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import fastavro

from dvstack.testing import replay

MAGIC = b"\x00"
ORDER_EVENT: dict[str, Any] = {
    "type": "record", "name": "OrderEvent", "namespace": "dvstack.orders",
    "fields": [{"name": "order_id", "type": "string"},
               {"name": "customer_id", "type": "string"},
               {"name": "amount", "type": "double"},
               {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}
"""`replay.make_orders`' events as Avro: replay.ORDER_SCHEMA's columns, `ts` a
timestamp-millis, which Spark reads as the TIMESTAMP it parses the JSON's zone-less text to
(the job's session time zone is UTC)."""


def header(schema_id: int) -> bytes:
    """The wire format's five leading bytes: magic byte 0, the schema id big-endian."""
    return MAGIC + struct.pack(">I", schema_id)


def encoder(schema_id: int, schema: dict[str, Any]) -> Callable[[Mapping[str, Any]], bytes]:
    """A function writing values in the wire format; the schema is parsed once, not once per
    value (millions of values for the benchmark)."""
    parsed = fastavro.parse_schema(schema)
    prefix = header(schema_id)

    def encode(value: Mapping[str, Any]) -> bytes:
        out = io.BytesIO()
        out.write(prefix)
        fastavro.schemaless_writer(out, parsed, value)
        return out.getvalue()

    return encode


def wire(schema_id: int, schema: dict[str, Any], value: Mapping[str, Any]) -> bytes:
    """One value in the Confluent wire format: magic byte 0, the schema id (4 bytes,
    big-endian), the Avro binary."""
    return encoder(schema_id, schema)(value)


def epoch_millis(ts: str) -> int:
    """A zone-less ISO timestamp read in UTC, as the job reads the JSON events' `ts`."""
    return int(dt.datetime.fromisoformat(ts).replace(tzinfo=dt.UTC).timestamp() * 1000)


def avro_order(event: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON order event as ORDER_EVENT's value: the same fields, `ts` in milliseconds."""
    return {"order_id": event["order_id"], "customer_id": event["customer_id"],
            "amount": float(event["amount"]), "ts": epoch_millis(event["ts"])}


def produce_orders(bootstrap: str, topic: str, events: Iterable[Mapping[str, Any]],
                   schema_id: int) -> None:
    """The events as ORDER_EVENT values in the wire format, produced as `replay.produce`
    produces their JSON twins (same keys, same producer settings), so the two topics differ
    in the values' encoding alone; waits for every ack."""
    encode = encoder(schema_id, ORDER_EVENT)
    replay.produce(bootstrap, topic, events, encode=lambda event: encode(avro_order(event)))
