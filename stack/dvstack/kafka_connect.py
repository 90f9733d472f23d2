"""Kafka Connect in standalone mode with the Debezium PostgreSQL connector: real CDC.

The worker runs from Maven Central's jars (`stack/jars/kafka-connect`), with the
Debezium connector's plugin archive unpacked into its `plugin.path`, so the
connector's own dependencies stay in their plugin class loader. It starts with
no connector: whoever wants changes captured (a test, the CDC demo) registers
one through the REST API (`put_connector`), on a "system of record" database of
the stack's PostgreSQL (started with `wal_level=logical`). Source offsets live
in a file of the state directory, as standalone mode keeps them.

JSON converter, schemas on for keys and values (the converter's default), so
topics carry what a team running Connect with default settings produces.
"""

from __future__ import annotations

import json
import tarfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from dvstack import processes
from dvstack.artefacts import java
from dvstack.settings import Settings
from dvstack.waiting import wait_for

NAME = "kafka-connect"
HEAP = "-Xmx512m"
PLUGIN_ARCHIVE = "debezium-connector-postgres-*-plugin.tar.gz"
POSTGRES_CONNECTOR = "io.debezium.connector.postgresql.PostgresConnector"


def connect_dir(settings: Settings) -> Path:
    return settings.state_dir / "kafka-connect"


def rest_url(settings: Settings) -> str:
    return f"http://127.0.0.1:{settings.connect_port}"


def plugin_path(libs: Path) -> Path:
    """The plugin archive unpacked beside the worker's jars (once; the cache keeps it)."""
    plugins = libs.parent / "plugins"
    marker = plugins / ".complete"
    if marker.is_file():
        return plugins
    archives = sorted(libs.glob(PLUGIN_ARCHIVE))
    if not archives:
        raise SystemExit(f"no Debezium plugin archive in {libs}: delete that directory and "
                         "run again")
    plugins.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archives[0]) as tar:
        tar.extractall(plugins, filter="data")
    marker.write_text("ok\n")
    return plugins


def _write_config(settings: Settings, libs: Path) -> tuple[Path, bool]:
    """worker.properties (and the log4j2 configuration); True when the properties changed."""
    d = connect_dir(settings)
    d.mkdir(parents=True, exist_ok=True)
    (d / "log4j2.properties").write_text(
        "appender.out.type = Console\n"
        "appender.out.name = STDOUT\n"
        "appender.out.layout.type = PatternLayout\n"
        "appender.out.layout.pattern = [%d] %p %m (%c)%n\n"
        "rootLogger.level = INFO\n"
        "rootLogger.appenderRef.out.ref = STDOUT\n"
        "logger.reflections.name = org.reflections\n"
        "logger.reflections.level = ERROR\n")
    props = {
        "bootstrap.servers": f"{settings.host}:{settings.kafka_port}",
        "listeners": rest_url(settings),
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable": "true",
        "value.converter.schemas.enable": "true",
        "offset.storage.file.filename": str(d / "offsets"),
        "offset.flush.interval.ms": "1000",
        "plugin.path": str(plugin_path(libs)),
        # Every plugin here ships ServiceLoader manifests: no class-path scan at start-up.
        "plugin.discovery": "service_load",
    }
    path = d / "worker.properties"
    return path, processes.write_properties(path, props)


def _request(url: str, method: str, path: str, body: Any = None,
             timeout: float = 10.0) -> tuple[int, Any]:
    """(status, decoded JSON body or None) of one REST call; connection errors raise."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"{url}{path}", data=data, method=method,
                                 headers={"Content-Type": "application/json",
                                          "Accept": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
            return resp.status, (json.loads(raw) if raw else None)
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        try:
            return exc.code, json.loads(raw) if raw else None
        except ValueError:
            return exc.code, raw.decode(errors="replace")


def _ready(settings: Settings) -> bool:
    try:
        status, plugins = _request(rest_url(settings), "GET", "/connector-plugins", timeout=3)
    except OSError:
        return False
    return status == 200 and any(p.get("class") == POSTGRES_CONNECTOR for p in plugins)


def start(settings: Settings, libs: Path) -> None:
    config, changed = _write_config(settings, libs)
    if changed and processes.running(settings, NAME):
        print("Kafka Connect's configuration changed: restarting it", flush=True)
        stop(settings)
    if not processes.running(settings, NAME):
        d = connect_dir(settings)
        processes.start(settings, NAME, [
            java(), HEAP, "-Xms128m", f"-Dlog4j2.configurationFile={d / 'log4j2.properties'}",
            "-cp", f"{libs}/*", "org.apache.kafka.connect.cli.ConnectStandalone", str(config)])
    wait_for(lambda: _ready(settings), timeout=120, interval=0.5,
             what=f"Kafka Connect at {rest_url(settings)} with the Debezium PostgreSQL connector",
             on_timeout=lambda: processes.tail(processes.log_file(settings, NAME)))


def stop(settings: Settings) -> None:
    processes.stop(settings, NAME, timeout=45)


def put_connector(url: str, name: str, config: dict[str, str]) -> None:
    """Create or update a connector on the worker at `url` (stack.json's `kafka_connect`); an
    invalid configuration raises with Connect's words."""
    status, body = _request(url, "PUT", f"/connectors/{name}/config", config, timeout=60)
    if status not in (200, 201):
        raise RuntimeError(f"Kafka Connect refused connector {name} (HTTP {status}): {body}")


def connector_status(url: str, name: str) -> dict[str, Any] | None:
    """The connector's and its tasks' states (None: no such connector)."""
    status, body = _request(url, "GET", f"/connectors/{name}/status")
    if status == 404:
        return None
    if status != 200:
        raise RuntimeError(f"Kafka Connect status of {name}: HTTP {status}: {body}")
    return dict(body)


def delete_connector(url: str, name: str) -> None:
    """Stop and remove a connector (no-op when absent)."""
    status, body = _request(url, "DELETE", f"/connectors/{name}", timeout=60)
    if status not in (200, 204, 404):
        raise RuntimeError(f"Kafka Connect could not delete {name} (HTTP {status}): {body}")
