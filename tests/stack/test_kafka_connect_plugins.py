"""The worker's plugin archives: each unpacked into a plugin directory of its own."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from dvstack.services import kafka_connect


def _archive(libs: Path, name: str, top: str) -> None:
    """A plugin archive as Maven Central serves one: one top directory holding its jars."""
    source = libs / f"{name}-src" / top
    source.mkdir(parents=True)
    (source / f"{top}.jar").write_bytes(b"jar")
    with tarfile.open(libs / name, "w:gz") as tar:
        tar.add(source, arcname=top)


def test_every_plugin_archive_is_unpacked_and_a_new_one_again(tmp_path: Path) -> None:
    libs = tmp_path / "libs"
    libs.mkdir()
    _archive(libs, "debezium-connector-postgres-3.3.2.Final-plugin.tar.gz",
             "debezium-connector-postgres")
    with pytest.raises(SystemExit, match="debezium-connector-jdbc"):
        kafka_connect.plugin_path(libs)
    _archive(libs, "debezium-connector-jdbc-3.6.0.Final-plugin.tar.gz",
             "debezium-connector-jdbc")
    plugins = kafka_connect.plugin_path(libs)
    assert sorted(p.name for p in plugins.iterdir() if p.is_dir()) == [
        "debezium-connector-jdbc", "debezium-connector-postgres"]
    # a cache unpacked from fewer archives (an older pom) is unpacked again, stale files gone
    (plugins / ".complete").write_text("debezium-connector-postgres-3.3.2.Final-plugin.tar.gz\n")
    (plugins / "stale").mkdir()
    assert kafka_connect.plugin_path(libs) == plugins
    assert not (plugins / "stale").exists()
    assert (plugins / "debezium-connector-jdbc" / "debezium-connector-jdbc.jar").is_file()
