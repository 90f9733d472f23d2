"""The heap housekeeping binds glibc's mallopt and malloc_trim where glibc is the libc."""

from __future__ import annotations

import platform
import threading

import pytest

from derived_views.process import malloc as heap

GLIBC = platform.libc_ver()[0] == "glibc"


@pytest.mark.skipif(not GLIBC, reason="glibc only; elsewhere both calls are skipped")
def test_glibc_takes_the_arena_cap_and_trims() -> None:
    assert heap.limit_arenas(heap.ARENAS) is True
    garbage = [bytes(2000) for _ in range(25_000)]  # 50 MB of malloc chunks, then freed
    del garbage
    assert heap.trim() is True  # glibc returned free pages to the system


def test_trimming_runs_on_its_own_daemon_thread() -> None:
    heap.keep_trimmed(interval=3600)
    threads = [t for t in threading.enumerate() if t.name == "heap-trim"]
    assert (len(threads) >= 1 and all(t.daemon for t in threads)) == GLIBC
