"""A real Apache Kafka broker in KRaft mode (combined broker + controller).

Run straight from the Maven Central jars with a small heap; storage is
formatted once per state directory.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable
from pathlib import Path

from confluent_kafka.admin import AdminClient

from dvstack import processes
from dvstack.artefacts import java
from dvstack.settings import Settings
from dvstack.waiting import wait_for

HEAP = "-Xmx512m"


def kafka_dir(settings: Settings) -> Path:
    return settings.state_dir / "kafka"


def bootstrap(settings: Settings) -> str:
    return f"127.0.0.1:{settings.kafka_port}"


def _write_config(settings: Settings) -> Path:
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
        "listeners": (f"PLAINTEXT://127.0.0.1:{settings.kafka_port},"
                      f"CONTROLLER://127.0.0.1:{settings.kafka_controller_port}"),
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{settings.kafka_port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
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
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


def _classpath(libs: Path) -> str:
    return f"{libs}/*"


def _ready(settings: Settings) -> bool:
    admin = AdminClient({"bootstrap.servers": bootstrap(settings), "socket.timeout.ms": 2000,
                         "log_level": 0})
    md = admin.list_topics(timeout=2)
    return bool(md.brokers)


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


def start(settings: Settings, libs: Path) -> None:
    config = _write_config(settings)
    d = kafka_dir(settings)
    jvm = [java(), HEAP, "-Xms128m", f"-Dlog4j2.configurationFile={d / 'log4j2.yaml'}",
           "-cp", _classpath(libs)]
    if not (d / "data" / "meta.properties").is_file():
        processes.run([*jvm, "kafka.tools.StorageTool", "format", "-t", new_cluster_id(),
                       "-c", str(config)], what="formatting Kafka storage")
    if not processes.running(settings, "kafka"):
        processes.start(settings, "kafka", [*jvm, "kafka.Kafka", str(config)])
    wait_for(lambda: _ready(settings), timeout=120, interval=0.5,
             what=f"the Kafka broker at {bootstrap(settings)}",
             on_timeout=lambda: processes.tail(processes.log_file(settings, "kafka")))


def stop(settings: Settings) -> None:
    processes.stop(settings, "kafka", timeout=45)
