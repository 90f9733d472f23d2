"""A real Apache Kafka broker in KRaft mode (combined broker + controller).

Run straight from the Maven Central jars with a small heap; storage is
formatted once per state directory.  Two client listeners: PLAINTEXT, and
SASL_PLAINTEXT with SCRAM-SHA-512 for one user whose name and password are
generated once per state directory.  The user's SCRAM credential is upserted
through the Admin API (KIP-554) on every start, so a state directory formatted
before the SASL listener existed gains it without a re-format; a running
broker started with an older configuration is restarted to pick it up.
"""

from __future__ import annotations

import base64
import json
import secrets
import uuid
from collections.abc import Callable
from pathlib import Path

from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from dvstack import processes
from dvstack.artefacts import java, kafka_libs
from dvstack.settings import Settings
from dvstack.testing.waiting import wait_for

_HEAP = "-Xmx512m"
SASL_MECHANISM = "SCRAM-SHA-512"
SASL_PROTOCOL = "SASL_PLAINTEXT"
SCRAM_ITERATIONS = 8192


def kafka_dir(settings: Settings) -> Path:
    return settings.state_dir / "kafka"


def bootstrap(settings: Settings) -> str:
    return f"{settings.host}:{settings.kafka_port}"


def sasl_bootstrap(settings: Settings) -> str:
    return f"{settings.host}:{settings.kafka_sasl_port}"


def sasl_user(settings: Settings) -> dict[str, str]:
    """The SCRAM user of this state directory: generated on first use, then kept."""
    f = kafka_dir(settings) / "sasl-user.json"
    if not f.is_file():
        kafka_dir(settings).mkdir(parents=True, exist_ok=True)
        f.write_text(json.dumps({"username": f"dv-{secrets.token_hex(4)}",
                                 "password": secrets.token_urlsafe(24)}))
        f.chmod(0o600)
    user: dict[str, str] = json.loads(f.read_text())
    return user


def sasl_info(settings: Settings) -> dict[str, str]:
    """The SASL listener as `stack.json` describes it (`kafka_sasl`)."""
    return {"bootstrap": sasl_bootstrap(settings), "mechanism": SASL_MECHANISM,
            "security_protocol": SASL_PROTOCOL, **sasl_user(settings)}


def sasl_client_config(settings: Settings) -> dict[str, str]:
    """librdkafka settings of a client of the SASL listener, as the stack's user."""
    user = sasl_user(settings)
    return {"bootstrap.servers": sasl_bootstrap(settings), "security.protocol": SASL_PROTOCOL,
            "sasl.mechanism": SASL_MECHANISM, "sasl.username": user["username"],
            "sasl.password": user["password"]}


def _write_config(settings: Settings) -> tuple[Path, bool]:
    """server.properties (and the log4j2 configuration); True when the properties changed."""
    d = kafka_dir(settings)
    d.mkdir(parents=True, exist_ok=True)
    (d / "log4j2.yaml").write_text(
        "Configuration:\n"
        "  Appenders:\n"
        "    Console: {name: STDOUT, PatternLayout: {pattern: '[%d] %p %m (%c)%n'}}\n"
        "  Loggers:\n"
        "    Root: {level: INFO, AppenderRef: [{ref: STDOUT}]}\n"
        "    Logger:\n"
        "      - {name: kafka.log, level: WARN}\n"
        "      - {name: org.apache.kafka.storage, level: WARN}\n"
    )
    props = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@127.0.0.1:{settings.kafka_controller_port}",
        "listeners": (f"PLAINTEXT://{settings.host}:{settings.kafka_port},"
                      f"SASL_PLAINTEXT://{settings.host}:{settings.kafka_sasl_port},"
                      f"CONTROLLER://127.0.0.1:{settings.kafka_controller_port}"),
        "advertised.listeners": (f"PLAINTEXT://{settings.host}:{settings.kafka_port},"
                                 f"SASL_PLAINTEXT://{settings.host}:{settings.kafka_sasl_port}"),
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": ("PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                           "CONTROLLER:PLAINTEXT"),
        # SCRAM credentials live in the cluster metadata; the JAAS entry names the login module only.
        "sasl.enabled.mechanisms": SASL_MECHANISM,
        f"listener.name.sasl_plaintext.{SASL_MECHANISM.lower()}.sasl.jaas.config":
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        "log.dirs": str(d / "data"),
        "num.partitions": "3",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "3",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        "auto.create.topics.enable": "false",
    }
    path = d / "server.properties"
    return path, processes.write_properties(path, props)


def classpath(libs: Path) -> str:
    """Every jar of `libs`: the broker's, and kafka-tools' (stack/jars/kafka-broker), so
    Kafka's own command-line tools run from the same classpath."""
    return f"{libs}/*"


def tool_command(settings: Settings, main_class: str, *args: str) -> list[str]:
    """A command running one of Kafka's tools (e.g. org.apache.kafka.tools.ConsumerPerformance)
    with the broker's java and jars: a benchmark's baseline is then the broker's own client."""
    return [java(), _HEAP, "-cp", classpath(kafka_libs(settings)), main_class, *args]


def _ready(config: dict[str, str]) -> bool:
    admin = AdminClient({**config, "socket.timeout.ms": 2000, "log_level": 0})
    md = admin.list_topics(timeout=2)
    return bool(md.brokers)


def _upsert_scram_user(settings: Settings) -> None:
    """Create or refresh the SASL user's SCRAM credential (idempotent; plaintext listener)."""
    user = sasl_user(settings)
    admin = AdminClient({"bootstrap.servers": bootstrap(settings), "log_level": 0})
    upsert = UserScramCredentialUpsertion(
        user["username"], ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, SCRAM_ITERATIONS),
        user["password"].encode())
    for future in admin.alter_user_scram_credentials([upsert], request_timeout=30).values():
        future.result(timeout=30)


def new_cluster_id(random_bytes: Callable[[], bytes] = lambda: uuid.uuid4().bytes) -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding.

    One id in 64 would start with '-', which the storage tool's argument
    parser reads as an option ("--cluster-id: expected one argument"); like
    Kafka's own random ids, such a draw is thrown away.
    """
    while True:
        cluster_id = base64.urlsafe_b64encode(random_bytes()).rstrip(b"=").decode()
        if not cluster_id.startswith("-"):
            return cluster_id


def start_kafka(settings: Settings, libs: Path) -> None:
    config, changed = _write_config(settings)
    d = kafka_dir(settings)
    jvm = [java(), _HEAP, "-Xms128m", f"-Dlog4j2.configurationFile={d / 'log4j2.yaml'}",
           "-cp", classpath(libs)]
    if not (d / "data" / "meta.properties").is_file():
        processes.run([*jvm, "kafka.tools.StorageTool", "format", "-t", new_cluster_id(),
                       "-c", str(config)], what="formatting Kafka storage")
    if changed and processes.running(settings, "kafka"):
        print("Kafka's configuration changed (e.g. the SASL listener is new): restarting it",
              flush=True)
        stop_kafka(settings)
    if not processes.running(settings, "kafka"):
        processes.start(settings, "kafka", [*jvm, "kafka.Kafka", str(config)])
    wait_for(lambda: _ready({"bootstrap.servers": bootstrap(settings)}), timeout=120,
             interval=0.5, what=f"the Kafka broker at {bootstrap(settings)}",
             on_timeout=lambda: processes.tail(processes.log_file(settings, "kafka")))
    _upsert_scram_user(settings)
    wait_for(lambda: _ready(sasl_client_config(settings)), timeout=30, interval=0.5,
             what=f"the Kafka SASL listener at {sasl_bootstrap(settings)} to accept its user",
             on_timeout=lambda: processes.tail(processes.log_file(settings, "kafka")))


def stop_kafka(settings: Settings) -> None:
    processes.stop(settings, "kafka", timeout=45)
