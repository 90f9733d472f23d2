"""The schema registry's settings, its unpacked distribution and the client's error reading."""

from __future__ import annotations

import dataclasses
import io
import tarfile
import urllib.error
from email.message import Message
from pathlib import Path
from typing import Any

import pytest

from dvstack import artefacts
from dvstack.cli import components
from dvstack.services import schema_registry
from dvstack.settings import APICURIO_VERSION, Settings, load
from dvstack.testing import schema_registry_client


def settings_in(tmp_path: Path, *, node: bool = False) -> Settings:
    return dataclasses.replace(load(), state_dir=tmp_path / "state dir",
                               cache_dir=tmp_path / "cache", schema_registry_port=20081, node=node)


def test_serves_the_confluent_api_on_the_stack_address_and_port(tmp_path: Path) -> None:
    settings = settings_in(tmp_path)
    assert schema_registry.registry_url(settings) == "http://127.0.0.1:20081/apis/ccompat/v7"
    assert schema_registry.health_url(settings) == "http://127.0.0.1:20081/health/ready"
    props = schema_registry.render_properties(settings)
    assert (props["quarkus.http.host"], props["quarkus.http.port"]) == ("127.0.0.1", "20081")
    assert props["apicurio.rules.global.compatibility"] == "BACKWARD"
    on_node = schema_registry.render_properties(settings_in(tmp_path, node=True))
    assert on_node["quarkus.http.host"] == "10.217.0.1"  # where pods reach it
    assert schema_registry.REGISTRY_NAME in components(settings)


def test_properties_go_where_quarkus_reads_them_and_a_change_is_noticed(tmp_path: Path) -> None:
    settings = settings_in(tmp_path)
    assert schema_registry._write_config(settings) is True
    written = tmp_path / "state dir" / "schema-registry" / "config" / "application.properties"
    lines = dict(line.split("=", 1) for line in written.read_text().splitlines())
    assert lines == schema_registry.render_properties(settings)
    assert schema_registry._write_config(settings) is False
    moved = dataclasses.replace(settings, schema_registry_port=20082)
    assert schema_registry._write_config(moved) is True


def test_the_jvm_runs_the_runner_jar_with_a_modest_heap(tmp_path: Path) -> None:
    argv = schema_registry.registry_command(tmp_path / "home", "/opt/java", tmp_path / "work")
    assert argv[0] == "/opt/java"
    assert "-Xmx384m" in argv
    assert f"-Djava.io.tmpdir={tmp_path / 'work' / 'tmp'}" in argv  # not a shared /tmp
    assert argv[-2:] == ["-jar", str(tmp_path / "home" /
                                     f"apicurio-registry-app-{APICURIO_VERSION}-runner.jar")]


def test_a_missing_runner_jar_says_what_to_delete(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match=r"runner\.jar in .*: delete that directory"):
        schema_registry.start_registry(settings_in(tmp_path), tmp_path / "empty home", wait=False)
    assert not (tmp_path / "state dir" / "run").exists()  # nothing was started


def test_the_port_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DV_SCHEMA_REGISTRY_PORT", "21081")
    assert load().schema_registry_port == 21081


def test_the_archive_is_unpacked_once_and_never_half(tmp_path: Path) -> None:
    settings = settings_in(tmp_path)
    fetched = tmp_path / "cache" / f"apicurio-registry-{APICURIO_VERSION}-archive"
    fetched.mkdir(parents=True)
    # as if Maven had fetched it from the pom as it is
    (fetched / ".complete").write_text(
        artefacts.pom_digest(settings.repo / "stack" / "jars" / "apicurio-registry") + "\n")
    runner = f"apicurio-registry-app-{APICURIO_VERSION}-runner.jar"
    with tarfile.open(fetched / f"apicurio-registry-app-{APICURIO_VERSION}-all.tar.gz",
                      "w:gz") as tf:
        for name, data in ((runner, b"jar"), ("lib/a.jar", b"lib")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    stale = tmp_path / "cache" / f"apicurio-registry-{APICURIO_VERSION}.partial"
    stale.mkdir()  # an earlier, interrupted unpack
    home = artefacts.apicurio_registry_home(settings)
    assert home == tmp_path / "cache" / f"apicurio-registry-{APICURIO_VERSION}"
    assert (home / runner).read_bytes() == b"jar"
    assert (home / "lib" / "a.jar").read_bytes() == b"lib"
    assert (home / ".complete").is_file() and not stale.exists()
    (home / "lib" / "a.jar").unlink()
    assert artefacts.apicurio_registry_home(settings) == home
    assert not (home / "lib" / "a.jar").exists()  # a complete tree is not unpacked again


def _http_error(status: int, body: bytes) -> urllib.error.HTTPError:
    return urllib.error.HTTPError("http://registry/x", status, "refused", Message(),
                                  io.BytesIO(body))


@pytest.mark.parametrize(("status", "body", "expected"), [
    (409, b'{"error_code": 409, "message": "incompatible"}', (409, 409, "incompatible")),
    (404, b'{"message": "No content with ID", "error_code": 40403}',
     (404, 40403, "No content with ID")),
    (502, b"<html>bad gateway</html>", (502, None, "<html>bad gateway</html>")),
    (500, b'["not", "an", "object"]', (500, None, '["not", "an", "object"]')),
])
def test_a_refusal_carries_the_status_and_confluent_error_code(
        status: int, body: bytes, expected: tuple[int, int | None, str]) -> None:
    error = schema_registry_client._error(_http_error(status, body))
    assert (error.status, error.error_code, error.message) == expected


def test_subjects_are_quoted_whole() -> None:
    assert schema_registry_client._path("subjects", "a/b c", "versions") == \
        "subjects/a%2Fb%20c/versions"


@pytest.mark.parametrize("echo", [{"compatibility": "FULL"}, {"compatibilityLevel": "FULL"}])
def test_set_compatibility_takes_either_echo(monkeypatch: pytest.MonkeyPatch,
                                             echo: dict[str, str]) -> None:
    calls: list[tuple[Any, ...]] = []

    def call(*args: Any) -> dict[str, str]:
        calls.append(args)
        return echo

    monkeypatch.setattr(schema_registry_client, "call", call)
    schema_registry_client.set_compatibility("http://r/apis/ccompat/v7", "s", "FULL")
    assert calls == [("http://r/apis/ccompat/v7", "PUT", "config/s", {"compatibility": "FULL"})]
    with pytest.raises(schema_registry_client.RegistryError, match="asked for NONE"):
        schema_registry_client.set_compatibility("http://r/apis/ccompat/v7", "s", "NONE")
