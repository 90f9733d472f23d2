"""The stand-in's driver JVM options: the class archive when there is one, C1 always."""

from __future__ import annotations

from pathlib import Path

from dvstack.spark.jvm import driver_java_options


def test_without_an_archive_only_the_quick_jit() -> None:
    assert driver_java_options(None) == "-XX:TieredStopAtLevel=1"


def test_the_archive_comes_first() -> None:
    assert driver_java_options(Path("/cache/spark-cds/a.jsa")).split() == [
        "-XX:SharedArchiveFile=/cache/spark-cds/a.jsa", "-XX:TieredStopAtLevel=1"]
