"""Stop one stack component and start it again with its state: the fault suite's restarts.

A restart keeps the component's data (Kafka's log, PostgreSQL's cluster, etcd
behind the API server), like a pod restarted on the same volume, so what a
test sees afterwards is what a client sees after a real restart.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from dvstack import artefacts, processes
from dvstack.services import kafka_broker, kube_api, postgres_server
from dvstack.settings import Settings

RESTARTABLE = ("kafka", "postgres", "apiserver")


def _stop_apiserver(settings: Settings) -> None:
    processes.stop(settings, "kube-apiserver")


def _start_apiserver(settings: Settings) -> None:
    # start() reuses the running etcd and controller manager and waits for /readyz
    kube_api.start_kube_api(settings, artefacts.kube_binaries(settings))


def _start_kafka(settings: Settings) -> None:
    kafka_broker.start_kafka(settings, artefacts.kafka_libs(settings))


STEPS: dict[str, tuple[Callable[[Settings], None], Callable[[Settings], None]]] = {
    "kafka": (kafka_broker.stop_kafka, _start_kafka),
    "postgres": (postgres_server.stop_postgres, postgres_server.start_postgres),
    "apiserver": (_stop_apiserver, _start_apiserver),
}


def restart(settings: Settings, component: str, *, down_seconds: float = 0.0) -> float:
    """Stop `component`, keep it down `down_seconds` (the outage), start it and wait until it
    serves again; returns the seconds from the stop to serving."""
    if component not in STEPS:
        raise SystemExit(f"cannot restart {component!r}: choose one of {', '.join(RESTARTABLE)}")
    stop, start = STEPS[component]
    began = time.monotonic()
    stop(settings)
    time.sleep(down_seconds)  # the outage itself, not a synchronisation
    start(settings)
    return time.monotonic() - began
