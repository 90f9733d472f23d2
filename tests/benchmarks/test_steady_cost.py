"""benchmarks/steady_cost.py: where a view's memory goes."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import pytest

MB = 1024 * 1024


@pytest.fixture(scope="module")
def sc(bench_script: Callable[[str], ModuleType]) -> ModuleType:
    return bench_script("steady_cost")


def test_the_jvms_rest_is_its_resident_memory_beyond_heap_and_class_metadata(
        sc: ModuleType) -> None:
    counters = {"sun.gc.generation.0.capacity": 16 * MB,
                "sun.gc.generation.1.capacity": 134 * MB,
                "sun.gc.generation.1.space.0.used": 90 * MB,
                "sun.gc.metaspace.capacity": 160 * MB, "java.threads.live": 200}
    profile = sc.memory_profile([("java", 500.0, counters), ("python3", 80.0, None),
                                 ("tini", 1.0, None)])
    assert profile == {"jvm_rss_mb": 500.0, "heap_committed_mb": 150.0, "heap_used_mb": 90.0,
                       "metaspace_mb": 160.0, "jvm_rest_mb": 190.0, "jvm_threads": 200,
                       "python_rss_mb": 80.0}


def test_a_view_without_a_jvm_has_an_empty_profile(sc: ModuleType) -> None:
    assert sc.memory_profile([("python3", 80.0, None)])["jvm_rss_mb"] == 0.0
