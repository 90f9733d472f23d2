"""benchmarks/steady_cost.py: where a view's memory goes."""

from __future__ import annotations

import argparse
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


def test_a_spark_setting_is_key_equals_value_and_nothing_else(sc: ModuleType) -> None:
    assert sc.spark_setting("spark.sql.shuffle.partitions=4") == (
        "spark.sql.shuffle.partitions", "4")
    assert sc.spark_setting("spark.driver.extraJavaOptions=-Da=b") == (
        "spark.driver.extraJavaOptions", "-Da=b")
    for bad in ("spark.sql.shuffle.partitions", "=4", " =4"):
        with pytest.raises(argparse.ArgumentTypeError, match="give KEY=VALUE"):
            sc.spark_setting(bad)


def test_a_view_without_a_jvm_has_an_empty_profile(sc: ModuleType) -> None:
    assert sc.memory_profile([("python3", 80.0, None)])["jvm_rss_mb"] == 0.0


def test_a_jvms_threads_are_grouped_by_name_and_other_processes_by_command(
        sc: ModuleType) -> None:
    assert sc.thread_group("java", "Executor task l") == "tasks"
    assert sc.thread_group("java", "stream executio") == "micro-batch thread"
    assert sc.thread_group("java", "VM Thread") == "collector"
    assert sc.thread_group("java", "C1 CompilerThre") == "compiler"
    assert sc.thread_group("java", "block-manager-s") == "other JVM threads"
    assert sc.thread_group("python3", "python3") == "Python"
    assert sc.thread_group("tini", "tini") == "tini"


def test_cores_per_group_count_a_thread_born_in_the_window_from_zero_and_the_rest_as_exited(
        sc: ModuleType) -> None:
    first = {(1, 1): ("tasks", 10.0), (1, 2): ("collector", 4.0)}
    last = {(1, 1): ("tasks", 16.0), (1, 2): ("collector", 5.0), (1, 3): ("tasks", 1.0)}
    # over 10 s: tasks (6 + 1) / 10, collector 1 / 10; the job's total was 1.0 core
    assert sc.cores_by_group(first, last, 10.0, 1.0) == {
        "tasks": 0.7, sc.EXITED: 0.2, "collector": 0.1}
    assert sc.cores_by_group(first, last, 0.0, 1.0) == {}
