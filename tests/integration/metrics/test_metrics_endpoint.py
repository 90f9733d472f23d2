"""The operator's /metrics endpoint over real HTTP, parsed as Prometheus would."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from derived_views.api.status import DerivedViewStatus
from derived_views.process.metrics import Metrics
from dvstack.processes import free_port
from dvstack.testing.waiting import wait_for


def test_served_metrics_parse_and_carry_the_view() -> None:
    metrics = Metrics()
    port = free_port()
    metrics.serve(port, addr="127.0.0.1")
    status = DerivedViewStatus.model_validate({
        "active": {"revision": "r1", "index": "orders__r1", "since": "2026-11-23T08:00:00Z",
                   "lag": {"messages": 7, "seconds": 2, "partitions": {}}}})
    metrics.observe_view("shop", "orders", status, {})
    metrics.cutover("shop", "orders", 0.004)

    def scrape() -> str | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
                return str(resp.read().decode())
        except OSError:
            return None

    text = wait_for(scrape, timeout=30, interval=0.2, what="the metrics endpoint")
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for f in text_string_to_metric_families(text) for s in f.samples}
    labels = (("revision", "r1"), ("role", "active"), ("view", "orders"),
              ("view_namespace", "shop"))
    assert samples[("derived_views_lag_messages", labels)] == 7.0
    assert samples[("derived_views_lag_seconds", labels)] == 2.0
    assert samples[("derived_views_cutovers_total",
                    (("view", "orders"), ("view_namespace", "shop")))] == 1.0


def test_operator_stops_with_the_reason_when_the_metrics_port_is_taken(
        stack: Any, tmp_path: Path) -> None:
    """A port clash never heals by retrying: the operator exits and says what to change."""
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DV_", "KUBECONFIG"))}
        env.update({"KUBECONFIG": stack.kubeconfig, "DV_METRICS_PORT": str(port)})
        log = tmp_path / "operator.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "derived_views.main", "--namespace", "metrics-port-taken"],
                env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_for(lambda: proc.poll() is not None, timeout=60,
                     what="the operator to exit", on_timeout=lambda: log.read_text())
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
    text = log.read_text()
    assert proc.returncode != 0, text
    assert f"cannot serve metrics on port {port}" in text, text
    assert "DV_METRICS_PORT" in text, text
