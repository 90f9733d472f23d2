"""A checkpoint that outlived its index is moved aside, so the revision replays from genesis.

Spark resumes a query from its checkpoint.  Each batch's rows and its ledger
row commit in one PostgreSQL transaction *before* Spark records the batch in
`<checkpoint>/commits`, so a checkpoint with commits while the ledger has no
row for the revision means the index was dropped or the database reset since:
resuming would skip every record before the checkpoint's offsets and silently
build an incomplete index.  The decision is pure; the file system work goes
through Hadoop's FileSystem (via Spark's JVM), so it works for any URI Spark
can checkpoint to.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def is_stale(committed_batches: int, ledger_batches: int) -> bool:
    """Commits in the checkpoint but none in the ledger: the index it resumes no longer exists."""
    return committed_batches > 0 and ledger_batches == 0


def stale_location(location: str, now: dt.datetime) -> str:
    """Where a stale checkpoint goes: beside it, named by the (UTC) time it was set aside."""
    return f"{location.rstrip('/')}.stale-{now.astimezone(dt.timezone.utc):%Y%m%dT%H%M%SZ}"


class HadoopPaths:
    """The few Hadoop FileSystem calls needed, for one SparkSession."""

    def __init__(self, spark: SparkSession) -> None:
        self._jvm: Any = spark.sparkContext._jvm
        self._conf: Any = spark.sparkContext._jsc.hadoopConfiguration()

    def _path(self, location: str) -> tuple[Any, Any]:
        path = self._jvm.org.apache.hadoop.fs.Path(location)
        return path, path.getFileSystem(self._conf)

    def read_text(self, location: str) -> str:
        """A whole file as UTF-8 text, read by the driver's JVM (not a Spark job)."""
        path, fs = self._path(location)
        stream = fs.open(path)
        try:
            text: str = self._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
        finally:
            stream.close()
        return text

    def committed_batches(self, location: str) -> int:
        """How many batch files `<location>/commits` holds (0 when there is no checkpoint)."""
        path, fs = self._path(f"{location.rstrip('/')}/commits")
        if not fs.exists(path):
            return 0
        return sum(1 for status in fs.listStatus(path) if status.getPath().getName().isdigit())

    def rename(self, source: str, target: str) -> None:
        src, fs = self._path(source)
        dst, _ = self._path(target)
        if not fs.rename(src, dst):
            raise OSError(f"could not move checkpoint {source} to {target}")


def set_aside_if_stale(paths: HadoopPaths, location: str, ledger_batches: int,
                       now: dt.datetime) -> str | None:
    """Move a stale checkpoint aside; return where it went (None when it is not stale)."""
    if not is_stale(paths.committed_batches(location), ledger_batches):
        return None
    target = stale_location(location, now)
    paths.rename(location, target)
    return target
