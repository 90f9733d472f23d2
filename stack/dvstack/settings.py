"""Where the local stack lives and which loopback ports it uses.

Every location and port can be overridden by an environment variable so two
checkouts (or CI and a developer) can run side by side.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

KUBE_VERSION = "v1.34.4"
KAFKA_VERSION = "4.1.0"
DEBEZIUM_VERSION = "3.3.2.Final"
"""Built against Kafka 4.1.0 (stack/jars/kafka-connect/pom.xml pins both)."""
SPARK_VERSION = "4.0.0"
HADOOP_VERSION = "3.4.1"
"""PySpark 4.0.0's Hadoop (pyspark/jars/hadoop-client-api-*.jar); hadoop-aws must match it."""
S3PROXY_VERSION = "3.3.0"
"""The first release whose filesystem-nio2 backend lists directory markers as S3A needs."""
OPENSEARCH_VERSION = "2.19.3"
"""The sink the job writes to next (docs/sinks.md); stack/jars/opensearch/pom.xml pins it too."""
APICURIO_VERSION = "3.0.9"
"""The schema registry (Confluent-compatible API); 3.3 needs Java 21, the machine has 17.
stack/jars/apicurio-registry/pom.xml pins it too."""
NODE_ADDRESS = "10.217.0.1"
"""The stack's address on its own bridge (dvstack.node.daemons): where pods reach its services."""
LOOPBACK = "127.0.0.1"
AUTO = "auto"
"""`DV_NODE=auto`: the real node wherever the machine can run it (`make test`)."""


def env_port(name: str, default: int) -> int:
    """A port from the environment variable `name`, else `default`."""
    raw = os.environ.get(name, str(default))
    try:
        return int(raw)
    except ValueError:
        raise SystemExit(f"{name}={raw!r} is not a port number") from None


@dataclass(frozen=True)
class Settings:
    """Resolved paths and ports of one local stack."""

    repo: Path
    cache_dir: Path
    state_dir: Path
    etcd_port: int
    etcd_peer_port: int
    apiserver_port: int
    controller_manager_port: int
    kafka_port: int
    kafka_controller_port: int
    kafka_sasl_port: int
    pg_port: int
    s3_port: int
    connect_port: int
    opensearch_port: int
    opensearch_transport_port: int
    schema_registry_port: int
    node: bool = False
    """A real node runs pods: the services then listen on the node address (`node_mode`)."""

    @property
    def host(self) -> str:
        """The address every service of the stack listens on and advertises."""
        return NODE_ADDRESS if self.node else LOOPBACK

    @property
    def logs_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def run_dir(self) -> Path:
        return self.state_dir / "run"

    @property
    def stack_file(self) -> Path:
        """JSON written by `up` describing endpoints; read by tests and the demo."""
        return self.state_dir / "stack.json"

    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / "kube" / "kubeconfig"


def load() -> Settings:
    cache_default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "derived-views"
    state_dir = Path(os.environ.get("DV_STATE_DIR", REPO_ROOT / ".stack")).resolve()
    return Settings(
        repo=REPO_ROOT,
        cache_dir=Path(os.environ.get("DV_CACHE_DIR", cache_default)).resolve(),
        state_dir=state_dir,
        etcd_port=env_port("DV_ETCD_PORT", 23790),
        etcd_peer_port=env_port("DV_ETCD_PEER_PORT", 23800),
        apiserver_port=env_port("DV_APISERVER_PORT", 16443),
        controller_manager_port=env_port("DV_KCM_PORT", 16444),
        kafka_port=env_port("DV_KAFKA_PORT", 19092),
        kafka_controller_port=env_port("DV_KAFKA_CONTROLLER_PORT", 19093),
        kafka_sasl_port=env_port("DV_KAFKA_SASL_PORT", 19094),
        pg_port=env_port("DV_PG_PORT", 15432),
        s3_port=env_port("DV_S3_PORT", 19900),
        connect_port=env_port("DV_CONNECT_PORT", 18083),
        opensearch_port=env_port("DV_OPENSEARCH_PORT", 19200),
        opensearch_transport_port=env_port("DV_OPENSEARCH_TRANSPORT_PORT", 19300),
        schema_registry_port=env_port("DV_SCHEMA_REGISTRY_PORT", 18081),
        node=node_mode(state_dir),
    )


def node_mode(state_dir: Path) -> bool:
    """Whether the stack runs the real node: `DV_NODE=1` or `0` says so; otherwise the mode
    of the stack that runs from `state_dir`; otherwise, with `DV_NODE=auto` (what `make
    test` sets), wherever the machine can run it, and with `DV_NODE` unset, not (the
    stand-in alone starts faster, and keeps every service on 127.0.0.1)."""
    raw = os.environ.get("DV_NODE", "").strip().lower()
    if raw and raw != AUTO:
        return _flag("DV_NODE")
    try:
        return bool(json.loads((state_dir / "stack.json").read_text()).get("node", False))
    except (OSError, ValueError, AttributeError):
        pass
    if raw != AUTO:
        return False
    from dvstack.node import support as node_support

    return node_support.auto_reason() is None


def _flag(name: str) -> bool:
    raw = os.environ.get(name, "0").strip().lower()
    if raw not in ("0", "1", "", "false", "true", "off", "on"):
        raise SystemExit(f"{name}={raw!r}: use 1 (on), 0 (off) or {AUTO} (where it can)")
    return raw in ("1", "true", "on")
