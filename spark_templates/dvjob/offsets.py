"""A micro-batch's end offsets, read from Spark's offset log in the checkpoint.

foreachBatch hands the function a DataFrame and a batch id, never the Kafka
offsets the batch covers.  Spark writes `<checkpoint>/offsets/<batchId>` (its
write-ahead record of the batch's range) *before* running the batch and, on a
restart, re-runs an uncommitted batch over exactly that range; so the file is
the authoritative end of the batch we are writing.  Its format (Spark 3.x/4.x):

    v1
    {"batchWatermarkMs":0,"batchTimestampMs":...,"conf":{...}}
    {"orders":{"0":1234,"1":99}}          <- one line per source, in query order

Kafka offsets there are exclusive ends (the next offset to read), directly
comparable with a partition's high watermark.

The checkpoint also keeps where the replay began (`read_history_start`): the
offsets Spark resolved `startingOffsets=earliest` to when the query first
started, which retention may have moved past offset 0.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from dvjob.checkpoint import HadoopPaths
from dvjob.errors import JobError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

EndOffsets = dict[str, dict[str, int]]
"""topic -> partition (decimal string, as in Kafka JSON) -> exclusive end offset."""

SUPPORTED_VERSION = "v1"


class OffsetLogError(JobError):
    """The offset log is missing or not in a format this job understands."""


def offset_log_path(checkpoint_location: str, batch_id: int) -> str:
    return f"{checkpoint_location.rstrip('/')}/offsets/{batch_id}"


def _kafka_offsets(line: str, where: str, *, allow_empty: bool = False) -> EndOffsets:
    try:
        value = json.loads(line)
    except json.JSONDecodeError:
        raise OffsetLogError(f"{where}: source line {line[:200]!r} is not JSON") from None
    if not isinstance(value, dict) or not (value or allow_empty):
        raise OffsetLogError(f"{where}: source line {line[:200]!r} is not Kafka offsets "
                             '({"topic": {"partition": offset}}); is the source Kafka?')
    result: EndOffsets = {}
    for topic, partitions in value.items():
        if not isinstance(partitions, dict) or not partitions:
            raise OffsetLogError(f"{where}: topic {topic!r} has no partition offsets")
        parsed: dict[str, int] = {}
        for partition, offset in partitions.items():
            if not (partition.isascii() and partition.isdigit()):
                raise OffsetLogError(f"{where}: topic {topic!r}: partition {partition!r} "
                                     "is not a partition number")
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
                raise OffsetLogError(f"{where}: topic {topic!r} partition {partition}: "
                                     f"offset {offset!r} is not a non-negative integer")
            parsed[str(int(partition))] = offset
        result[topic] = parsed
    return result


def parse_offset_log(text: str, *, where: str = "offset log") -> EndOffsets:
    """The end offsets of every Kafka source in one offset-log file.

    Raises OffsetLogError naming the problem when the file is not a v1 offset
    log whose source lines are all Kafka offsets.
    """
    lines = text.splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines or lines[0].strip() != SUPPORTED_VERSION:
        first = lines[0][:40] if lines else ""
        raise OffsetLogError(f"{where}: expected version line {SUPPORTED_VERSION!r}, found "
                             f"{first!r} (written by an unsupported Spark version?)")
    if len(lines) < 3:
        raise OffsetLogError(f"{where}: no source offsets after the metadata line")
    try:
        metadata = json.loads(lines[1])
    except json.JSONDecodeError:
        metadata = None
    if not isinstance(metadata, dict):
        raise OffsetLogError(f"{where}: second line is not the batch metadata JSON object")
    offsets: EndOffsets = {}
    for line in lines[2:]:
        if line.strip() == "-":
            raise OffsetLogError(f"{where}: a source has no offset in this batch")
        for topic, partitions in _kafka_offsets(line, where).items():
            if topic in offsets:
                raise OffsetLogError(f"{where}: topic {topic!r} appears in two sources")
            offsets[topic] = partitions
    return offsets


EARLIEST = -2
"""Kafka JSON offsets: -2 means the partition's earliest offset."""


def start_offsets(previous: EndOffsets | None, end: EndOffsets) -> EndOffsets:
    """Where a batch ending at `end` started: the previous batch's end, else the earliest
    offset (the first batch, or a partition added since)."""
    return {topic: {p: (previous or {}).get(topic, {}).get(p, EARLIEST) for p in parts}
            for topic, parts in end.items()}


def read_end_offsets(spark: SparkSession, checkpoint_location: str, batch_id: int) -> EndOffsets:
    """Read and parse the batch's offset log through Hadoop's FileSystem (any URI Spark can
    checkpoint to), called from the driver's JVM: not a Spark job, which cost about 0.25 s of
    every batch when read with spark.read."""
    path = offset_log_path(checkpoint_location, batch_id)
    try:
        text = HadoopPaths(spark).read_text(path)
    except Exception as exc:  # Py4JJavaError (FileNotFoundException, ...)
        cause = getattr(exc, "java_exception", None)
        detail = str(cause.toString()) if cause is not None else str(exc)
        first_line = (detail.strip().splitlines() or [type(exc).__name__])[0]
        raise OffsetLogError(f"cannot read offset log {path}: {first_line[:300]}") from None
    return parse_offset_log(text, where=f"offset log {path}")


def initial_offsets_path(checkpoint_location: str) -> str:
    """Where Spark keeps the offsets the query's Kafka source (the query's only source, so
    source 0) resolved `startingOffsets` to on its first start."""
    return f"{checkpoint_location.rstrip('/')}/sources/0/0"


def parse_initial_offsets(text: str, *, where: str = "initial offsets") -> EndOffsets:
    """The offsets a checkpoint's Kafka source started from (its history start).

    Spark's KafkaSourceInitialOffsetWriter writes a zero byte ("to support Spark 2.1.0",
    SPARK-19517), the version line `v1`, then the offsets as one JSON object with no newline
    after it: `\\x00v1\\n{"orders":{"0":100,"1":0}}`.  An empty object is valid: none of
    the topics existed when the query first started.
    """
    body = text[1:] if text.startswith("\x00") else text
    version, _, offsets = body.partition("\n")
    if version.strip() != SUPPORTED_VERSION:
        raise OffsetLogError(f"{where}: expected version line {SUPPORTED_VERSION!r}, found "
                             f"{version[:40]!r} (written by an unsupported Spark version?)")
    if not offsets.strip():
        raise OffsetLogError(f"{where}: no offsets after the version line")
    return _kafka_offsets(offsets.strip(), where, allow_empty=True)


def read_history_start(spark: SparkSession, checkpoint_location: str) -> EndOffsets | None:
    """The offsets the revision's replay began at, per partition: what `earliest` resolved to
    when the query first started on this checkpoint (records below them were already gone).

    Spark writes them once, before the first batch of a new checkpoint, and keeps them across
    restarts (the first batch's re-plan included), so they are exact and never change.  A
    partition added to a topic later is not in them: Spark reads it from its earliest offset
    and fails the batch when that is not 0 (unless failOnDataLoss is false).  None when the
    file does not exist (a checkpoint the job did not start), so nothing is claimed;
    an unreadable or malformed file fails the batch, as an offset log does.
    """
    path = initial_offsets_path(checkpoint_location)
    try:
        text = HadoopPaths(spark).read_text(path)
    except Exception as exc:  # Py4JJavaError (FileNotFoundException, ...)
        cause = getattr(exc, "java_exception", None)
        detail = str(cause.toString()) if cause is not None else str(exc)
        if "java.io.FileNotFoundException" in detail:
            return None
        first_line = (detail.strip().splitlines() or [type(exc).__name__])[0]
        raise OffsetLogError(f"cannot read initial offsets {path}: {first_line[:300]}") from None
    return parse_initial_offsets(text, where=f"initial offsets {path}")
