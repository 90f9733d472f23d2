"""benchmarks/spark_batch.py: the better run, the runs' clock, and the JDBC target."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import pytest


@pytest.fixture(scope="module")
def sb(bench_script: Callable[[str], ModuleType]) -> ModuleType:
    return bench_script("spark_batch")


def test_the_better_run_counts_and_every_run_is_kept(sb: ModuleType) -> None:
    assert sb.best([12.5, 10.0], 2_000_000) == {"events_per_s": 200_000,
                                                "seconds": [12.5, 10.0]}


def test_each_run_is_reset_before_its_clock_starts(sb: ModuleType) -> None:
    calls: list[str] = []
    seconds = sb.timed(lambda: calls.append("run"), runs=2,
                       before=lambda: calls.append("reset"))
    assert calls == ["reset", "run", "reset", "run"]
    assert len(seconds) == 2 and all(s >= 0 for s in seconds)


def test_a_libpq_dsn_becomes_the_jdbc_url_with_batched_inserts_rewritten(
        sb: ModuleType) -> None:
    url, props = sb.jdbc_target("host=127.0.0.1 port=55432 dbname=views user=dv password=s3")
    assert url == "jdbc:postgresql://127.0.0.1:55432/views?reWriteBatchedInserts=true"
    assert props == {"user": "dv", "password": "s3", "driver": "org.postgresql.Driver"}
    assert sb.jdbc_target("postgresql://dv@db/views")[0] == \
        "jdbc:postgresql://db:5432/views?reWriteBatchedInserts=true"
