"""Two operator replicas as the chart runs them: one active, one standby, failover on exit.

No kubelet runs pods here, so the test starts the two replicas as local
processes with exactly what the installed StatefulSet gives each pod: its
args and env (the `$(DV_PEERING_PRIORITY)` its pod-index label supplies),
authenticated as the chart's ServiceAccount by a TokenRequest token. So this
also proves the chart's least-privilege RBAC is enough for Kopf and the
operator: nothing may be refused.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from dvstack.chart import Kubectl, Release, short_id
from dvstack.processes import free_port
from dvstack.testing.waiting import wait_for

TIMEOUT = 90
PAUSED = ("Pausing operations", "Pausing all operators")
RESUMED = "Resuming operations"


class Replica:
    def __init__(self, index: int, proc: subprocess.Popen[bytes], log: Path, port: int) -> None:
        self.index, self.proc, self.log, self.port = index, proc, log, port

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def paused(self) -> bool:
        """From the log: the last pause/resume decision.

        With a mandatory peering (--peering) Kopf starts paused and logs only
        changes, so a replica that first sees a higher-priority peer stays
        paused without a word: no decision logged means paused.
        """
        state = True
        for line in self.text().splitlines():
            if any(p in line for p in PAUSED):
                state = True
            elif RESUMED in line:
                state = False
        return state

    def healthy(self) -> bool:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=2) as rsp:
            return bool(rsp.status == 200)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)


def service_account_kubeconfig(kubectl: Kubectl, release: Release, path: Path) -> Path:
    token = kubectl.run("create", "token", release.fullname, "-n", release.namespace,
                        "--duration=1h").stdout.strip()
    config = yaml.safe_load(Path(kubectl.kubeconfig).read_text())
    context = next(c for c in config["contexts"] if c["name"] == config["current-context"])
    user = context["context"]["user"]
    config["users"] = [{"name": user, "user": {"token": token}}]
    path.write_text(json.dumps(config))
    path.chmod(0o600)
    return path


@pytest.fixture()
def start_replica(tmp_path: Path) -> Iterator[Callable[..., Replica]]:
    started: list[Replica] = []

    def start(index: int, sts: dict[str, Any], kubeconfig: Path) -> Replica:
        container = sts["spec"]["template"]["spec"]["containers"][0]
        port = free_port()
        args = []
        for arg in container["args"]:
            if arg.startswith("--liveness="):
                arg = f"--liveness=http://127.0.0.1:{port}/healthz"
            args.append(arg.replace("$(DV_PEERING_PRIORITY)", str(index)))
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("KUBERNETES_", "KUBECONFIG", "DV_", "POD_"))}
        env.update({e["name"]: e["value"] for e in container["env"] if "value" in e})
        # Pods have a network namespace each; local processes share one, so
        # each replica gets its own metrics port as it gets its own probe port.
        env.update({"KUBECONFIG": str(kubeconfig), "DV_PEERING_PRIORITY": str(index),
                    "DV_METRICS_PORT": str(free_port()),
                    "POD_ID": f"{sts['metadata']['name']}-{index}"})
        log = tmp_path / f"replica-{index}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen([sys.executable, "-m", "derived_views.main", *args], env=env,
                                    stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        replica = Replica(index, proc, log, port)
        started.append(replica)
        return replica

    yield start
    for replica in started:
        replica.stop()


def test_one_replica_works_the_other_stands_by_and_takes_over(
        stack: Any, kubectl: Kubectl, make_namespace: Callable[[str], str], install: Callable[..., Release],
        start_replica: Callable[..., Replica], tmp_path: Path) -> None:
    ns, watched = make_namespace("op"), make_namespace("w")
    release = install(ns, {"watch": {"mode": "namespaces", "namespaces": [watched]}})
    sts = kubectl.get_json("statefulset", release.fullname, "-n", ns)
    assert sts is not None
    kubeconfig = service_account_kubeconfig(kubectl, release, tmp_path / "sa.kubeconfig")
    views = ["probe-before", "probe-after"]

    def logs() -> str:
        return "\n".join(f"--- replica {r.index} ---\n{r.text()[-3000:]}" for r in replicas)

    def apply_view(name: str) -> str:
        """A view of a topic that does not exist, with a Secret that does not exist: the
        operator can do nothing for it, but handles it (finalizer, log lines), quickly."""
        manifest = tmp_path / f"{name}.yaml"
        manifest.write_text(yaml.safe_dump({
            "apiVersion": "derivedviews.io/v1alpha1", "kind": "DerivedView",
            "metadata": {"name": name, "namespace": watched},
            "spec": {"source": {"kafka": {"bootstrapServers": stack.kafka_bootstrap},
                                "topics": [f"absent-{short_id()}"], "format": "json", "schema": "k STRING"},
                     "transform": {"sql": "SELECT k FROM events"},
                     "sink": {"postgres": {"secretRef": {"name": "missing"}, "table": name.replace("-", "_")},
                              "primaryKey": ["k"]}}}))
        kubectl.run("apply", "-f", str(manifest))
        return f"{watched}/{name}"  # Kopf and the operator both log "<ns>/<name>"

    def handled_by(replica: Replica, name: str, marker: str) -> bool:
        obj = kubectl.get_json("derivedview.derivedviews.io", name, "-n", watched)
        return bool(obj and obj["metadata"].get("finalizers") and marker in replica.text())

    replicas = [start_replica(i, sts, kubeconfig) for i in (0, 1)]
    low, high = replicas
    try:
        # Both keep-alives land in the release's KopfPeering; the lower priority pauses.
        def peers() -> set[str] | None:
            obj = kubectl.get_json("kopfpeering.kopf.dev", release.unique_name, "-n", watched)
            found = set((obj or {}).get("status") or {})
            return found if len(found) == 2 else None

        wait_for(peers, timeout=TIMEOUT, what="both replicas in the peering object", on_timeout=logs)
        wait_for(lambda: low.paused() and not high.paused(), timeout=TIMEOUT,
                 what="replica 0 paused in favour of replica 1", on_timeout=logs)
        # A standby is alive and ready too (its probes must not restart it).
        for r in replicas:
            wait_for(r.healthy, timeout=TIMEOUT, what=f"replica {r.index}'s /healthz",
                     on_timeout=logs)

        # Only the active replica handles a new view.
        before = apply_view(views[0])
        wait_for(lambda: handled_by(high, views[0], before), timeout=TIMEOUT,
                 what="the active replica to handle the view", on_timeout=logs)
        assert before not in low.text(), "the standby replica handled the view too:\n" + logs()

        # Graceful exit of the active replica: the standby resumes and takes new work.
        high.stop()
        wait_for(lambda: not low.paused(), timeout=TIMEOUT,
                 what="replica 0 to resume after replica 1 exited", on_timeout=logs)
        after = apply_view(views[1])
        wait_for(lambda: handled_by(low, views[1], after), timeout=TIMEOUT,
                 what="the former standby to handle a new view", on_timeout=logs)

        for r in replicas:
            text = r.text()
            assert "Forbidden" not in text and " 403" not in text, (
                f"replica {r.index} was refused something by RBAC:\n{logs()}")
    finally:
        for r in replicas:
            r.stop()
        # Never strand a finalizer: the namespace could not be deleted.
        for name in views:
            kubectl.run("patch", "derivedview.derivedviews.io", name, "-n", watched,
                        "--type=merge", "-p", '{"metadata":{"finalizers":null}}', check=False)
