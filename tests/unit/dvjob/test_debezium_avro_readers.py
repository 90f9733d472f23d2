"""The reader schemas the job wraps around a view's row for Debezium's Avro converter.

Checked with another Avro implementation (fastavro), on writer schemas shaped as Debezium's
PostgreSQL connector registers them: the envelope's row, op and time must come through, the
connector's other fields be skipped, and a key (the primary key alone) read as a row with
only its key columns set."""

from __future__ import annotations

import io
import json
from typing import Any

import fastavro

from dvjob.source.avro_decoding import debezium_readers

ROW = {"type": "record", "name": "Account", "namespace": "shop", "fields": [
    {"name": "id", "type": "int"}, {"name": "owner", "type": "string"},
    {"name": "balance", "type": ["null", "long"], "default": None},
    {"name": "region", "type": "string", "default": "eu"}]}
"""The view's reader: `region` is new, with a default (the table has no such column)."""

VALUE = {"type": "record", "name": "Value", "namespace": "cdc.public.accounts",
         "connect.name": "cdc.public.accounts.Value", "fields": [
             {"name": "id", "type": "int"}, {"name": "owner", "type": "string"},
             {"name": "balance", "type": "long"}]}
WRITER_ENVELOPE = {
    "type": "record", "name": "Envelope", "namespace": "cdc.public.accounts", "fields": [
        {"name": "before", "type": ["null", VALUE], "default": None},
        {"name": "after", "type": ["null", "Value"], "default": None},
        {"name": "source", "type": {"type": "record", "name": "Source",
                                    "namespace": "io.debezium.connector.postgresql",
                                    "fields": [{"name": "version", "type": "string"},
                                               {"name": "lsn", "type": ["null", "long"],
                                                "default": None}]}},
        {"name": "transaction", "type": ["null", {
            "type": "record", "name": "block", "namespace": "event",
            "fields": [{"name": "id", "type": "string"}]}], "default": None},
        {"name": "op", "type": "string"},
        {"name": "ts_ms", "type": ["null", "long"], "default": None},
        {"name": "ts_us", "type": ["null", "long"], "default": None}]}
WRITER_KEY = {"type": "record", "name": "Key", "namespace": "cdc.public.accounts",
              "fields": [{"name": "id", "type": "int"}]}


def _round_trip(writer: dict[str, Any], reader: str, record: dict[str, Any]) -> Any:
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, fastavro.parse_schema(writer), record)
    buffer.seek(0)
    return fastavro.schemaless_reader(buffer, fastavro.parse_schema(writer),
                                      fastavro.parse_schema(json.loads(reader)))


def test_an_update_reads_as_the_row_before_and_after_with_the_readers_default() -> None:
    envelope, _ = debezium_readers(json.dumps(ROW))
    got = _round_trip(WRITER_ENVELOPE, envelope, {
        "before": {"id": 7, "owner": "ann", "balance": 10},
        "after": {"id": 7, "owner": "ann", "balance": 12},
        "source": {"version": "3.3.2.Final", "lsn": 99}, "transaction": None,
        "op": "u", "ts_ms": 1_700_000_000_000, "ts_us": None})
    assert got == {"before": {"id": 7, "owner": "ann", "balance": 10, "region": "eu"},
                   "after": {"id": 7, "owner": "ann", "balance": 12, "region": "eu"},
                   "op": "u", "ts_ms": 1_700_000_000_000}


def test_a_delete_keeps_before_and_a_key_names_its_row_alone() -> None:
    envelope, key = debezium_readers(json.dumps(ROW))
    deleted = _round_trip(WRITER_ENVELOPE, envelope, {
        "before": {"id": 7, "owner": "ann", "balance": 12}, "after": None,
        "source": {"version": "v", "lsn": None}, "transaction": None, "op": "d",
        "ts_ms": None, "ts_us": None})
    assert deleted["after"] is None and deleted["before"]["id"] == 7
    assert _round_trip(WRITER_KEY, key, {"id": 7}) == {
        "id": 7, "owner": None, "balance": None, "region": None}


def test_the_readers_are_named_as_debeziums_and_the_row_keeps_no_name_of_its_own() -> None:
    envelope, key = (json.loads(s) for s in debezium_readers(json.dumps(ROW)))
    assert (envelope["name"], key["name"]) == ("Envelope", "Key")
    row = envelope["fields"][0]["type"][1]
    assert row["name"] == "Value" and "namespace" not in row
    assert [f["type"] for f in key["fields"]] == [
        ["null", "int"], ["null", "string"], ["null", "long"], ["null", "string"]]
