"""The README tutorial, step by step: helm install -> a view -> a finished migration, via the CLI.

It runs what the README tells a user to type — `dvstack helm install`, a token
for the chart's ServiceAccount, the operator started with that token (there is
no kubelet to run the chart's pod, so the process stands in for the pod but
holds exactly the pod's RBAC), `dvstack sample-orders`, `kubectl apply` of
`docs/tutorial/orders-by-customer.yaml`, `dv watch`, a changed SQL, `kubectl get
dv` mid-migration, `dv status`, `dv plot` — with unique names so it can run
beside other tests. Every command's output is kept under
`.stack/results/tutorial/` so the README shows real output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families

from dvstack.processes import free_port
from dvstack.testing import replay
from dvstack.testing.waiting import wait_for
from support.e2e.checkpoints import checkpoint_env
from support.e2e.views import ViewHandle, expected_rows, wait_alias_equals
from support.paths import REPO

# the tutorial's operator watches all namespaces, as the chart installs it: it would
# reconcile the views of the tests running beside it
pytestmark = pytest.mark.all_namespaces

TUTORIAL = REPO / "docs" / "tutorial"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class Shell:
    """Runs commands as the tutorial's user and keeps a transcript per step."""

    def __init__(self, out_dir: Path, env: dict[str, str]) -> None:
        self.out_dir, self.env = out_dir, env
        out_dir.mkdir(parents=True, exist_ok=True)

    def run(self, step: str, *cmd: str, ok: tuple[int, ...] = (0,),
            stdin: str | None = None, timeout: float = 600,
            env: dict[str, str] | None = None) -> str:
        proc = subprocess.run(list(cmd), input=stdin, capture_output=True, text=True,
                              env={**self.env, **(env or {})}, timeout=timeout)
        self.save(step, cmd, proc.stdout + proc.stderr)
        assert proc.returncode in ok, f"{step}: {' '.join(cmd)} -> {proc.returncode}\n" \
                                      f"{proc.stdout}\n{proc.stderr}"
        return proc.stdout

    def save(self, step: str, cmd: tuple[str, ...] | list[str], output: str) -> None:
        shown = " ".join(Path(c).name if i == 0 else c for i, c in enumerate(cmd))
        (self.out_dir / f"{step}.txt").write_text(f"$ {shown}\n{output}")


def _view_manifest(file: str, namespace: str, topic: str, table: str, bootstrap: str) -> str:
    """The tutorial's YAML with this run's names; everything else as the README shows it."""
    view = yaml.safe_load((TUTORIAL / file).read_text())
    view["metadata"]["namespace"] = namespace
    view["spec"]["source"]["kafka"]["bootstrapServers"] = bootstrap
    view["spec"]["source"]["topics"] = [topic]
    view["spec"]["sink"]["postgres"]["table"] = table
    return yaml.safe_dump(view)


def test_readme_tutorial(stack: Any, kube_api_client: Any, tmp_path: Path) -> None:
    run_id = uuid.uuid4().hex[:6]
    release, release_ns = "dv", f"derived-views-{run_id}"
    shop, topic, table = f"shop-{run_id}", f"orders-{run_id}", f"orders_by_customer_{run_id}"
    bin_dir = Path(sys.executable).parent
    out = Path(stack.state_dir) / "results" / "tutorial"
    admin_env = {**os.environ, "KUBECONFIG": stack.kubeconfig,
                 "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    sh = Shell(out, admin_env)
    custom = client.CustomObjectsApi(kube_api_client)
    view = ViewHandle(custom, shop, "orders-by-customer")
    operator: subprocess.Popen[bytes] | None = None
    try:
        # 1. Install the chart: CRDs, RBAC, the ServiceAccount, the (pod-less) StatefulSet.
        # The README's stack is on 127.0.0.1, which the chart's default policy lists; beside
        # the real node the stack's Kafka is on the node address, listed as a platform would.
        kafka_policy = replay.kafka_tenancy_env(stack.kafka_bootstrap).get("DV_TENANCY_POLICY")
        listed = (["--set-json", "tenancy.kafka.clusters="
                   + json.dumps(json.loads(kafka_policy)["kafka"]["clusters"])]
                  if kafka_policy else [])
        sh.run("01-helm-install", sys.executable, "-m", "dvstack", "helm", "install", release,
               str(REPO / "charts" / "derived-views"), "-n", release_ns, "--create-namespace",
               "--set", "replicaCount=1", *listed)
        sa = f"{release}-derived-views"
        peering = f"{release_ns}-{sa}"

        # 2. The operator with the chart's ServiceAccount token: the pod's RBAC, nothing more.
        token = sh.run("02-token", "kubectl", "-n", release_ns, "create", "token", sa,
                       "--duration=1h").strip()
        op_kubeconfig = tmp_path / "operator.kubeconfig"
        op_kubeconfig.write_text(Path(stack.kubeconfig).read_text())
        op_env = {"KUBECONFIG": str(op_kubeconfig)}
        sh.run("02-set-credentials", "kubectl", "config", "set-credentials", "dv-operator",
               f"--token={token}", env=op_env)
        sh.run("02-use-credentials", "kubectl", "config", "set-context", "--current",
               "--user=dv-operator", env=op_env)
        whoami = sh.run("02-whoami", "kubectl", "auth", "whoami", env=op_env)
        assert f"system:serviceaccount:{release_ns}:{sa}" in whoami
        metrics_port = free_port()
        log_path = Path(stack.logs_dir) / f"operator-tutorial-{run_id}.log"
        with open(log_path, "ab") as log:
            operator = subprocess.Popen(
                [str(bin_dir / "derived-views-operator"), "--all-namespaces",
                 f"--peering={peering}", "--priority=1"],
                stdout=log, stderr=subprocess.STDOUT,
                env={**admin_env, **op_env, "DV_LAG_POLL_SECONDS": "1",
                     "DV_METRICS_PORT": str(metrics_port),
                     "DV_LAG_HISTORY_SECONDS": "1",
                     **checkpoint_env(stack, "checkpoints"),
                     **replay.kafka_tenancy_env(stack.kafka_bootstrap)})

        # 3. Events and the sink Secret, then the view.
        sh.run("03-sample-orders", sys.executable, "-m", "dvstack", "sample-orders",
               "--namespace", shop, "--topic", topic, "--events", "100000")
        events = replay.make_orders(100_000, seed=7)
        sh.run("04-apply-v1", "kubectl", "apply", "-f", "-",
               stdin=_view_manifest("orders-by-customer.yaml", shop, topic, table,
                                    stack.kafka_bootstrap))
        sh.run("05-watch-v1", "dv", "watch", "orders-by-customer", "-n", shop,
               "--timeout", "600")
        v1 = view.active()
        assert v1 is not None and view.ready()
        wait_alias_equals(stack.pg_dsn, table, events, ["orders", "revenue"],
                          "v1's alias to hold every event")

        # 4. Change the SQL: a candidate replays beside v1, then takes over.
        sh.run("06-apply-v2", "kubectl", "apply", "-f", "-",
               stdin=_view_manifest("orders-by-customer-v2.yaml", shop, topic, table,
                                    stack.kafka_bootstrap))
        watch = subprocess.Popen(["dv", "watch", "orders-by-customer", "-n", shop,
                                  "--timeout", "600"], env=admin_env, text=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

        def mid_migration() -> bool:
            candidate = (view.status().get("candidate") or {}).get("revision")
            lag = (view.status().get("candidate") or {}).get("lag") or {}
            return candidate is not None and int(lag.get("messages") or 0) > 0

        wait_for(mid_migration, timeout=300, interval=0.2, what="the candidate to report lag")
        sh.run("07-get-dv-mid-migration", "kubectl", "get", "dv", "-n", shop)
        sh.run("08-status-mid-migration", "dv", "status", "-n", shop)
        watched, _ = watch.communicate(timeout=600)
        sh.save("09-watch-v2", ["dv", "watch", "orders-by-customer", "-n", shop,
                                "--timeout", "600"], watched)
        assert watch.returncode == 0, watched
        v2 = view.active()
        assert v2 not in (None, v1) and view.ready()
        wait_alias_equals(stack.pg_dsn, table, events, ["orders", "revenue", "biggest"],
                          "v2's alias to hold every event")

        # 5. After: the table, the detail, the picture.
        sh.run("10-get-dv-after", "kubectl", "get", "dv", "-n", shop)
        sh.run("11-status-detail", "dv", "status", "orders-by-customer", "-n", shop)
        png = out / "lag.png"
        sh.run("12-plot", "dv", "plot", "orders-by-customer", "-n", shop, "-o", str(png))
        assert png.read_bytes()[:8] == PNG_SIGNATURE

        # 6. The operator's metrics: two alias switches (v1's creation, v1 -> v2), v2's rows.
        scraped = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics",
                                         timeout=10).read().decode()
        (out / "13-metrics.txt").write_text(scraped)
        samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
                   for f in text_string_to_metric_families(scraped) for s in f.samples}
        view_labels = (("view", "orders-by-customer"), ("view_namespace", shop))
        assert samples[("derived_views_cutovers_total", view_labels)] == 2.0
        assert samples[("derived_views_ready", view_labels)] == 1.0
        rows_v2 = samples[("derived_views_index_rows", tuple(sorted(
            (*view_labels, ("revision", v2), ("index", f"{table}__{v2}")))))]
        assert rows_v2 == len(expected_rows(events, ["orders"]))

        # 7. The operator's log says what happened, not that the lag poll ran
        # (hundreds of polls above at DV_LAG_POLL_SECONDS=1).
        text = log_path.read_text(errors="replace")
        assert "Handler 'on_change' succeeded" in text, text[-3000:]
        passes = samples[("derived_views_reconcile_duration_seconds_count", ())]
        lines = text.count("orders-by-customer")
        assert lines < passes / 2, f"{lines} log lines name the view in {passes:.0f} passes"
    finally:
        try:
            custom.delete_namespaced_custom_object("derivedviews.io", "v1alpha1", shop,
                                                   "derivedviews", "orders-by-customer")
            if operator is not None:
                wait_for(view.gone, timeout=120, interval=0.5, what="the view's deletion")
        except Exception as exc:  # cleanup must not hide the test's own failure
            print(f"tutorial cleanup: {exc!r}")
        if operator is not None:
            operator.terminate()
            operator.wait(timeout=30)
        subprocess.run([sys.executable, "-m", "dvstack", "helm", "uninstall", release, "-n",
                        release_ns], env=admin_env, capture_output=True, timeout=300)
        subprocess.run(["kubectl", "delete", "namespace", release_ns, shop, "--wait=false"],
                       env=admin_env, capture_output=True, timeout=120)
