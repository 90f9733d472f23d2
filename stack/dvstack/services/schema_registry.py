"""The schema registry: Apicurio Registry 3.0.9 serving the Confluent Schema Registry API.

Views that read Avro topics in Confluent's wire format (magic byte, 4-byte schema id, Avro
body) look each writer schema up by id; on a cluster that is a Confluent-compatible
registry, here Apicurio's built application (Maven Central's `apicurio-registry-app`
tar.gz, unpacked once into the cache by dvstack.artefacts) run with `java -jar` on the
machine's Java 17 (3.3 needs 21). Storage is Apicurio's default in-memory H2: schemas last
as long as the process, and whoever needs them registers them. No authentication
(Apicurio's default). Quarkus reads `config/application.properties` from its working
directory, `.stack/schema-registry`, which holds our settings; a change there restarts it
at the next `up`. Ready in 18-45 s (7-9 s of CPU) beside a test suite on 2 cores; about
260 MB resident.

Clients use `registry_url()`, the Confluent-compatible API (`/apis/ccompat/v7`). Ids are Apicurio's
content ids (`apicurio.ccompat.legacy-id-mode.enabled=false`, the default): one id per
distinct schema text, the same under every subject, as Confluent's ids; legacy mode would
give each version an id of its own.

As Confluent (checked against 3.0.9): register answers `{"id": N}`, the same id again for a
known schema; `GET /schemas/ids/{id}` answers `{"schema": ...}`, an unknown id 404 with
`error_code` 40403; an unknown subject 404 / 40401, an unknown version 404 / 40402; an
incompatible version 409 / 409 and `{"is_compatible": false}` from the compatibility
check; an unparsable schema 422 / 42201; a deleted subject's schemas stay readable by id;
both `application/json` and `application/vnd.schemaregistry.v1+json` are accepted.
Differences found:

- Apicurio's global level is NONE; Confluent's is BACKWARD, so we make it BACKWARD (its
  default rule and, at start, the stored level, since `GET /config` reports only the
  stored one).
- `PUT /config[/{subject}]` echoes `{"compatibilityLevel": ...}`; Confluent's key is
  `compatibility`. An unknown level is 500 with `error_code` 0 (Confluent: 422 / 42203).
- `GET /config/{subject}` of a subject without a level of its own answers NONE (with
  `?defaultToGlobal=true` the global one), of an unknown subject 404 / 40401; Confluent
  answers 404 / 40408 for both.
- Schemas come back as registered, whitespace and all, not in Avro's canonical form, and
  with `"schemaType": "AVRO"`, which Confluent leaves out for Avro.
- The 409's `message` is Apicurio's rule violation ("Incompatible artifact: ..., list of
  diff types: [...]"), not Confluent's wording.
- Ids rise but are not contiguous: registering a known schema under another subject uses
  up an id. `GET /mode` is 404 (Confluent: `{"mode": "READWRITE"}`).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

from dvstack import processes
from dvstack.artefacts import java
from dvstack.settings import APICURIO_VERSION, Settings
from dvstack.testing import schema_registry_client
from dvstack.testing.waiting import wait_for

REGISTRY_NAME = "schema-registry"
_HEAP = "-Xmx384m"
API_PATH = "/apis/ccompat/v7"
RUNNER = f"apicurio-registry-app-{APICURIO_VERSION}-runner.jar"
DEFAULT_COMPATIBILITY = "BACKWARD"
"""Confluent's default level for subjects without their own."""
READY_TIMEOUT = 180.0
"""Ready in 18-45 s beside a test suite on 2 cores; a slower machine gets room."""


def base_url(settings: Settings) -> str:
    return f"http://{settings.host}:{settings.schema_registry_port}"


def registry_url(settings: Settings) -> str:
    """The Confluent-compatible API: what a Confluent client takes as `schema.registry.url`."""
    return f"{base_url(settings)}{API_PATH}"


def health_url(settings: Settings) -> str:
    """Quarkus's readiness check (storage included); Apicurio serves it at the root."""
    return f"{base_url(settings)}/health/ready"


def work_dir(settings: Settings) -> Path:
    return settings.state_dir / REGISTRY_NAME


def render_properties(settings: Settings) -> dict[str, str]:
    """Our application.properties: the stack's address and port, Confluent's default
    compatibility, quieter logs and a small connection pool."""
    return {
        "quarkus.http.host": settings.host,
        "quarkus.http.port": str(settings.schema_registry_port),
        # Apicurio has no global rule by default (NONE), a Confluent registry checks BACKWARD:
        # this is the level when none is stored (`wait_registry` stores it, so GET /config says it).
        "apicurio.rules.global.compatibility": DEFAULT_COMPATIBILITY,
        # Apicurio logs every storage call at DEBUG by default, with dates like 2026-11+00-28.
        'quarkus.log.category."io.apicurio".level': "INFO",
        "quarkus.log.console.format": "%d{yyyy-MM-dd HH:mm:ss} %p [%c{3.}] (%t) %m%n",
        # 20 pooled H2 connections by default, for a registry a few tests talk to.
        "apicurio.datasource.jdbc.initial-size": "2",
        "apicurio.datasource.jdbc.min-size": "2",
        "apicurio.datasource.jdbc.max-size": "20",
    }


def registry_command(home: Path, java_bin: str, work: Path) -> list[str]:
    """The registry's JVM: Quarkus's runner jar, which finds `lib/` beside itself. The
    client compiler alone and the serial collector halve the CPU its start takes (17 s to
    8 s), which `up` spends while the other components start; a few schemas need no more.
    Its temporary files (Vert.x's cache, otherwise a world-writable `vertx-cache` in the
    system's temporary directory) stay in its working directory."""
    return [java_bin, _HEAP, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            f"-Djava.io.tmpdir={work / 'tmp'}", "-jar", str(home / RUNNER)]


def _runner(home: Path) -> Path:
    runner = home / RUNNER
    if not runner.is_file():
        raise SystemExit(f"no {RUNNER} in {home}: delete that directory (the cache's "
                         f"apicurio-registry-{APICURIO_VERSION}) and run `up` again")
    return runner


def _write_config(settings: Settings) -> bool:
    """`config/application.properties` in the working directory (beside its `tmp/`); True
    when it changed."""
    config = work_dir(settings) / "config"
    config.mkdir(parents=True, exist_ok=True)
    (work_dir(settings) / "tmp").mkdir(exist_ok=True)
    return processes.write_properties(config / "application.properties",
                                      render_properties(settings))


def start_registry(settings: Settings, home: Path, *, wait: bool = True) -> None:
    """Start the registry (or reuse it; restart it when its properties changed). With
    `wait=False` it is only launched, so `up` starts the other components while its JVM
    boots and calls `wait_registry` afterwards."""
    _runner(home)
    java_bin = java()
    changed = _write_config(settings)
    if changed and processes.running(settings, REGISTRY_NAME):
        print("the schema registry's configuration changed: restarting it", flush=True)
        stop_registry(settings)
    if not processes.running(settings, REGISTRY_NAME):
        processes.start(settings, REGISTRY_NAME, registry_command(home, java_bin, work_dir(settings)),
                        cwd=work_dir(settings))
    if wait:
        wait_registry(settings)


def _ready(settings: Settings) -> bool:
    if not processes.running(settings, REGISTRY_NAME):
        raise SystemExit("the schema registry exited while starting\n"
                         f"{processes.tail(processes.log_file(settings, REGISTRY_NAME))}")
    try:
        with urllib.request.urlopen(health_url(settings), timeout=5) as resp:
            status = json.loads(resp.read()).get("status")
    except urllib.error.HTTPError as exc:  # 503 while a check is still DOWN
        exc.close()
        return False
    return bool(status == "UP")


def wait_registry(settings: Settings) -> None:
    """Until Quarkus reports the registry ready (its storage included); then the global
    compatibility level is stored, as a Confluent registry reports it."""
    wait_for(lambda: _ready(settings), timeout=READY_TIMEOUT, interval=0.5,
             what=f"the schema registry at {base_url(settings)} to report ready",
             on_timeout=lambda: processes.tail(processes.log_file(settings, REGISTRY_NAME)))
    schema_registry_client.call(registry_url(settings), "PUT", "config",
                                {"compatibility": DEFAULT_COMPATIBILITY})


def stop_registry(settings: Settings) -> None:
    processes.stop(settings, REGISTRY_NAME, timeout=30)
