"""Kafka Connect in standalone mode with the Debezium PostgreSQL connector: real CDC.

The worker runs from Maven Central's jars (`stack/jars/kafka-connect`), with the
Debezium connectors' plugin archives unpacked into its `plugin.path`, so each
connector's own dependencies stay in its plugin class loader. Debezium's JDBC
sink is there too: what a user would run instead of a mirror view, the
benchmarks' baseline. It starts with no connector: whoever wants changes captured
(a test, the CDC demo) registers one through the REST API (`put_connector`), on a
"system of record" database of the stack's PostgreSQL (started with
`wal_level=logical`). Source offsets live in a file of the state directory, as
standalone mode keeps them.

JSON converter, schemas on for keys and values (the converter's default), so
topics carry what a team running Connect with default settings produces. A connector
may write Avro instead (`avro_converter_config`): Apicurio Registry's converter, a
plugin directory of its own on the `plugin.path` (`stack/jars/apicurio-converter`), so
its Avro, Jackson, Vert.x and Netty never meet the worker's classpath or Debezium's.
"""

from __future__ import annotations

import json
import shutil
import tarfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from dvstack import processes
from dvstack.artefacts import apicurio_converter_plugins, java
from dvstack.services import schema_registry
from dvstack.settings import Settings
from dvstack.testing.waiting import wait_for

CONNECT_NAME = "kafka-connect"
_HEAP = "-Xmx512m"
PLUGIN_ARCHIVES = "*-plugin.tar.gz"
PLUGIN_PATTERNS = ("debezium-connector-postgres-*-plugin.tar.gz",
                   "debezium-connector-jdbc-*-plugin.tar.gz")
"""The plugin archives stack/jars/kafka-connect/pom.xml fetches: the CDC source, and the
JDBC sink the benchmarks set beside the mirror view (benchmarks/jdbc_sink.py)."""
POSTGRES_CONNECTOR = "io.debezium.connector.postgresql.PostgresConnector"
JDBC_SINK_CONNECTOR = "io.debezium.connector.jdbc.JdbcSinkConnector"
AVRO_CONVERTER = "io.apicurio.registry.utils.converter.AvroConverter"
REQUIRED_PLUGINS = (POSTGRES_CONNECTOR, JDBC_SINK_CONNECTOR, AVRO_CONVERTER)
"""What a ready worker lists: a plugin that failed to load would otherwise show only when
a connector asks for it."""
REGISTRY_CORE_API = "/apis/registry/v3"
"""Apicurio's own API, the one its serdes call (they do not speak the Confluent API)."""


def connect_dir(settings: Settings) -> Path:
    return settings.state_dir / "kafka-connect"


def rest_url(settings: Settings) -> str:
    return f"http://127.0.0.1:{settings.connect_port}"


def plugin_path(libs: Path) -> Path:
    """Every plugin archive unpacked beside the worker's jars, each into its own directory
    (its archive's top directory): once per set of archives, which the marker names, so a
    cache unpacked before an archive was added to the pom is unpacked again."""
    plugins = libs.parent / "plugins"
    marker = plugins / ".complete"
    archives = sorted(libs.glob(PLUGIN_ARCHIVES))
    wanted = "".join(f"{archive.name}\n" for archive in archives)
    if marker.is_file() and marker.read_text() == wanted:
        return plugins
    missing = [pattern for pattern in PLUGIN_PATTERNS
               if not any(archive.match(pattern) for archive in archives)]
    if missing:
        raise SystemExit(f"no plugin archive {', '.join(missing)} in {libs}: delete that "
                         "directory and run again")
    if plugins.exists():
        shutil.rmtree(plugins)
    plugins.mkdir(parents=True)
    for archive in archives:
        with tarfile.open(archive) as tar:
            tar.extractall(plugins, filter="data")
    marker.write_text(wanted)
    return plugins


def plugin_path_setting(*roots: Path) -> str:
    """`plugin.path`: the roots, comma-separated; each subdirectory of a root is one plugin
    with a class loader of its own. Adding a root changes the setting, so the next `up`
    restarts a worker that started without it."""
    return ",".join(str(root) for root in roots)


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
        "plugin.path": plugin_path_setting(plugin_path(libs),
                                           apicurio_converter_plugins(settings)),
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


def missing_plugins(listed: list[dict[str, Any]]) -> list[str]:
    """The REQUIRED_PLUGINS absent from `GET /connector-plugins?connectorsOnly=false`."""
    classes = {p.get("class") for p in listed}
    return [c for c in REQUIRED_PLUGINS if c not in classes]


def connector_plugins(url: str, timeout: float = 10.0) -> list[dict[str, Any]]:
    """Every plugin the worker at `url` loaded, converters included (class, type, version)."""
    status, body = _request(url, "GET", "/connector-plugins?connectorsOnly=false",
                            timeout=timeout)
    if status != 200:
        raise RuntimeError(f"Kafka Connect plugins: HTTP {status}: {body}")
    return list(body)


def _ready(settings: Settings) -> bool:
    try:
        return not missing_plugins(connector_plugins(rest_url(settings), timeout=3))
    except (OSError, RuntimeError):
        return False


def start_connect(settings: Settings, libs: Path) -> None:
    config, changed = _write_config(settings, libs)
    if changed and processes.running(settings, CONNECT_NAME):
        print("Kafka Connect's configuration changed: restarting it", flush=True)
        stop_connect(settings)
    if not processes.running(settings, CONNECT_NAME):
        d = connect_dir(settings)
        processes.start(settings, CONNECT_NAME, [
            java(), _HEAP, "-Xms128m", f"-Dlog4j2.configurationFile={d / 'log4j2.properties'}",
            "-cp", f"{libs}/*", "org.apache.kafka.connect.cli.ConnectStandalone", str(config)])
    wait_for(lambda: _ready(settings), timeout=120, interval=0.5,
             what=f"Kafka Connect at {rest_url(settings)} with Debezium's PostgreSQL "
                  "connector and JDBC sink and Apicurio's Avro converter",
             on_timeout=lambda: processes.tail(processes.log_file(settings, CONNECT_NAME)))


def stop_connect(settings: Settings) -> None:
    processes.stop(settings, CONNECT_NAME, timeout=45)


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


def registry_core_url(registry_url: str) -> str:
    """Apicurio's own API beside the Confluent-compatible one: stack.json's
    `schema_registry_url` ends in `/apis/ccompat/v7`, the serdes need `/apis/registry/v3`
    of the same server. A URL already on the core API, or the server's root, works too."""
    base = registry_url.rstrip("/")
    for suffix in (schema_registry.API_PATH, REGISTRY_CORE_API):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
    return f"{base}{REGISTRY_CORE_API}"


def avro_converter_config(registry_url: str) -> dict[str, str]:
    """A connector's settings for Avro keys and values in Confluent's wire format (magic byte
    0, a 4-byte big-endian schema id, the Avro binary body) through the registry at
    `registry_url`, its schemas registered as they come, each under `<topic>-key` or
    `<topic>-value` in the default group, where the Confluent-compatible API sees them.
    Defaults of the 3.0.9 serdes are spelled out, as they are the contract readers rely on:
    the id in the payload (headers disabled), 4 bytes (not the 8-byte legacy), and the
    content id, which is what `GET /apis/ccompat/v7/schemas/ids/{id}` answers (the global
    id would name one version of one artifact). One schema whole per subject version
    (`dereference-schema`): by default the 3.0.9 serializer registers each nested record
    (Debezium's `Value`, `Source`, `event.block`) as an artifact of its own and the envelope
    with references to them, which `/schemas/ids/{id}` then answers unresolved, a schema no
    reader without reference support (Spark's `from_avro`, fastavro) can parse, and which
    every connector's `io.debezium.connector.postgresql.Source` would share. Null values
    stay null: a tombstone."""
    serde = {
        "apicurio.registry.url": registry_core_url(registry_url),
        "apicurio.registry.auto-register": "true",
        "apicurio.registry.artifact-resolver-strategy":
            "io.apicurio.registry.serde.strategy.TopicIdStrategy",
        "apicurio.registry.headers.enabled": "false",
        "apicurio.registry.id-handler": "io.apicurio.registry.serde.Default4ByteIdHandler",
        "apicurio.registry.use-id": "contentId",
        "apicurio.registry.avro.encoding": "BINARY",
        "apicurio.registry.dereference-schema": "true",
    }
    config: dict[str, str] = {}
    for side in ("key.converter", "value.converter"):
        config[side] = AVRO_CONVERTER
        config.update({f"{side}.{name}": value for name, value in serde.items()})
    return config
