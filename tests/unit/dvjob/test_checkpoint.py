"""When a checkpoint is stale, and where it is moved; the Hadoop calls on a local directory."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from dvjob.checkpoint import HadoopPaths, is_stale, set_aside_if_stale, stale_location


@pytest.mark.parametrize(("commits", "ledger", "stale"), [
    (0, 0, False),   # a first run: nothing to resume
    (0, 3, False),   # batches in the ledger but no commit files yet (crash before commit)
    (3, 3, False),   # the normal resume
    (3, 2, False),   # the last batch is committed in the ledger only: Spark reruns it
    (3, 0, True),    # the index's ledger rows are gone: resuming would skip records
])
def test_stale_only_when_the_ledger_forgot_committed_batches(commits: int, ledger: int,
                                                             stale: bool) -> None:
    assert is_stale(commits, ledger) is stale


def test_stale_location_is_beside_it_with_the_utc_time() -> None:
    at = dt.datetime(2026, 11, 23, 9, 5, 7, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert stale_location("s3a://b/ckpt/orders-1/", at) == "s3a://b/ckpt/orders-1.stale-20261123T070507Z"


def _checkpoint(tmp_path: Path, batches: int) -> Path:
    location = tmp_path / "ckpt"
    (location / "commits").mkdir(parents=True)
    (location / "offsets").mkdir()
    for batch in range(batches):
        (location / "commits" / str(batch)).write_text("v1\n{}\n")
        (location / "commits" / f".{batch}.crc").write_text("")
    return location


def test_committed_batches_counts_commit_files_only(spark: SparkSession, tmp_path: Path) -> None:
    paths = HadoopPaths(spark)
    assert paths.committed_batches(str(tmp_path / "absent")) == 0
    assert paths.committed_batches(str(_checkpoint(tmp_path, 3))) == 3


def test_a_stale_checkpoint_is_moved_aside_and_a_live_one_kept(spark: SparkSession,
                                                               tmp_path: Path) -> None:
    location = _checkpoint(tmp_path, 2)
    now = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    paths = HadoopPaths(spark)
    assert set_aside_if_stale(paths, str(location), ledger_batches=2, now=now) is None
    assert (location / "commits" / "1").is_file()
    moved = set_aside_if_stale(paths, str(location), ledger_batches=0, now=now)
    assert moved == f"{location}.stale-20260102T030405Z"
    assert not location.exists()
    assert (tmp_path / "ckpt.stale-20260102T030405Z" / "commits" / "1").is_file()
