"""The records a batch leaves out under `skip` or `deadLetter`: found, counted, dead-lettered.

The stream's filter (parse.parse_events) drops bad records before the
transform, so the batch the writer gets no longer holds them.  To count them
exactly once, the writer reads the batch's own offset range again (Kafka
records are immutable) and applies the same check (parse.bad_records): the
count goes into the batch's ledger row, in the batch's transaction.  Rows the
transform emits with a NULL primary key are counted the same way; they have
no single source record, so a dead letter carries the row as JSON and the
batch's offset range.

Dead letters are written to Kafka (same connection and credentials as the
source) before the batch's transaction commits: at-least-once.  A crash
between the send and the commit replays the batch and sends its dead letters
again; a committed batch is never re-sent.  The cost: under `skip` and
`deadLetter` each batch's range is read from Kafka twice; `fail` reads once.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, StringType, StructField, StructType

from dvjob.offsets import EARLIEST, EndOffsets, read_end_offsets, start_offsets
from dvjob.sinks.contract import NULL_KEY_CAUSE, null_key_error
from dvjob.source.avro_decoding import Decoding
from dvjob.source.parse import BAD_CAUSE, bad_records

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType as Schema

HEADER_PREFIX = "dv."
_READER_OWNED = frozenset({"subscribe", "startingoffsets", "maxoffsetspertrigger"})


def range_text(start: EndOffsets, end: EndOffsets) -> str:
    """`orders/0 [10, 20), orders/1 [0, 3)`: the offsets a batch covers, for messages."""
    return ", ".join(f"{t}/{p} [{'earliest' if start[t][p] == EARLIEST else start[t][p]}, "
                     f"{o})" for t in sorted(end) for p, o in sorted(
                         end[t].items(), key=lambda item: int(item[0])))


def range_reader_options(options: Mapping[str, str], start: EndOffsets, end: EndOffsets
                         ) -> dict[str, str]:
    """The stream's Kafka options turned into a batch read of exactly [start, end)."""
    out = {k: v for k, v in options.items() if k.lower() not in _READER_OWNED}
    out.update({
        "assign": json.dumps({t: sorted(int(p) for p in parts) for t, parts in end.items()}),
        "startingOffsets": json.dumps(start),
        "endingOffsets": json.dumps(end),
        "includeHeaders": "true",
    })
    return out


def writer_options(options: Mapping[str, str], topic: str) -> dict[str, str]:
    """Kafka producer options: the source's connection and credentials, another topic."""
    out = {k: v for k, v in options.items() if k.startswith("kafka.")}
    out["topic"] = topic
    return out


def _header(name: str, value: Column) -> Column:
    return F.struct(F.lit(HEADER_PREFIX + name).alias("key"),
                    value.cast("string").cast("binary").alias("value"))


def dead_letters(bad: DataFrame, *, view: str, revision: str) -> DataFrame:
    """key, value (the original bytes) and headers (the original ones, then dv.*)."""
    ours = F.array(_header("cause", F.col(BAD_CAUSE)), _header("source.topic", F.col("topic")),
                   _header("source.partition", F.col("partition")),
                   _header("source.offset", F.col("offset")),
                   _header("view", F.lit(view)), _header("revision", F.lit(revision)))
    headers = (F.when(F.col("headers").isNull(), ours).otherwise(F.concat("headers", ours))
               if "headers" in bad.columns else ours)
    return bad.select("key", "value", headers.alias("headers"))


def _json_value(value: Any) -> Any:
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, bytes | bytearray):
        return value.hex()
    return str(value)


DEAD_LETTER_SCHEMA = StructType([
    StructField("key", BinaryType()), StructField("value", BinaryType()),
    StructField("cause", StringType()), StructField("batch", StringType()),
    StructField("offsets", StringType())])


class BadRecordScreen:
    """The bad-record policy of one job: the sink's BadRecordHandler."""

    def __init__(self, *, spark: SparkSession, policy: str, dead_letter_topic: str | None,
                 reader_options: Mapping[str, str], schema: Schema, fmt: str, view: str,
                 revision: str, checkpoint_location: str, columns: Sequence[str],
                 avro: Decoding | None = None) -> None:
        self.spark = spark
        self.avro = avro
        """Format avro: the decoding of the running query (the driver replaces it when the
        query restarts having learnt schema ids)."""
        self.policy = policy
        self.dead_letter_topic = dead_letter_topic
        self.reader_options = dict(reader_options)
        self.schema = schema
        self.fmt = fmt
        self.view = view
        self.revision = revision
        self.checkpoint_location = checkpoint_location
        self.columns = list(columns)
        self._null_keys: list[tuple[str, Sequence[Any]]] = []
        self._batch: int | None = None

    def _range(self, batch_id: int, end: EndOffsets) -> EndOffsets:
        previous = (read_end_offsets(self.spark, self.checkpoint_location, batch_id - 1)
                    if batch_id > 0 else None)
        return start_offsets(previous, end)

    def null_key(self, batch_id: int, column: str, row: Sequence[Any]) -> None:
        if self._batch != batch_id:
            self._batch, self._null_keys = batch_id, []
        if self.policy == "fail":
            raise null_key_error(batch_id, column, self._row_text(row))
        self._null_keys.append((column, row))

    def _row_json(self, row: Sequence[Any]) -> str:
        return json.dumps(dict(zip(self.columns, row[:-1], strict=False)), default=_json_value)

    def _row_text(self, row: Sequence[Any]) -> str:
        return self._row_json(row)[:300]

    def settle(self, batch_id: int, end_offsets: EndOffsets) -> int:
        """Count (and dead-letter) the batch's left-out records; 0 under `fail` (the stream
        stopped at the first one)."""
        null_keys = self._null_keys if self._batch == batch_id else []
        self._batch, self._null_keys = None, []
        if self.policy == "fail":
            return 0
        start = self._range(batch_id, end_offsets)
        raw = (self.spark.read.format("kafka")
               .options(**range_reader_options(self.reader_options, start, end_offsets)).load())
        bad = bad_records(raw, self.schema, self.fmt, self.avro).persist()
        try:
            count = bad.count()
            if self.dead_letter_topic is not None:
                options = writer_options(self.reader_options, self.dead_letter_topic)
                if count:
                    (dead_letters(bad, view=self.view, revision=self.revision)
                     .write.format("kafka").options(**options).save())
                if null_keys:
                    self._dead_letter_rows(batch_id, null_keys, range_text(start, end_offsets),
                                           options)
        finally:
            bad.unpersist()
        return count + len(null_keys)

    def _dead_letter_rows(self, batch_id: int, rows: list[tuple[str, Sequence[Any]]],
                          offsets: str, options: Mapping[str, str]) -> None:
        records = [(None, self._row_json(row).encode(), f"{NULL_KEY_CAUSE} {column!r}",
                    str(batch_id), offsets) for column, row in rows]
        frame = self.spark.createDataFrame(records, DEAD_LETTER_SCHEMA)
        headers = F.array(_header("cause", F.col("cause")), _header("batch", F.col("batch")),
                          _header("source.offsets", F.col("offsets")),
                          _header("view", F.lit(self.view)),
                          _header("revision", F.lit(self.revision)))
        frame.select("key", "value", headers.alias("headers")).write.format("kafka").options(
            **options).save()
