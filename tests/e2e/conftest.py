"""e2e fixtures: the operator as a user runs it, as its own process, checkpointing to S3.

Jobs checkpoint to the stack's S3 store (s3a://), as they must on a cluster,
where a restarted driver keeps nothing of its pod's filesystem.
"""

from __future__ import annotations

import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_operator import operator_env, watched

from dvstack import replay
from dvstack.cli import apply_crds
from dvstack.processes import free_port
from dvstack.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
OPERATOR_START_SECONDS = 300
"""A failure detector, not a pace: beside the fault suites on 2 cores the operator's imports
alone took over a minute (CI), and a test's first deadline must not count them."""


def wait_until_live(proc: subprocess.Popen[bytes], probe: str, log_path: Path) -> None:
    """Until the operator answers Kopf's liveness probe (as the chart's probes ask it), so a
    test's deadlines start with an operator that runs; an operator that exits fails here."""
    def answered() -> bool:
        if proc.poll() is not None:
            return True
        try:
            with urllib.request.urlopen(probe, timeout=2):
                return True
        except OSError:
            return False

    wait_for(answered, timeout=OPERATOR_START_SECONDS, interval=0.5,
             what="the operator to answer its liveness probe")
    assert proc.poll() is None, f"the operator exited with {proc.returncode}; see {log_path}"


@pytest.fixture()
def checkpoint_secret(stack: Any, kube_api_client: Any, namespace: str) -> str:
    """The checkpoint Secret (S3 credentials from stack.json) in the test's namespace."""
    from kubernetes import client

    replay.ensure_checkpoint_secret(client.CoreV1Api(kube_api_client), namespace, stack.s3)
    return replay.CHECKPOINT_SECRET


@pytest.fixture()
def operator_process(request: pytest.FixtureRequest, stack: Any, kube_api_client: Any,
                     tmp_path: Path, namespace: str, checkpoint_secret: str,
                     jobs_on_node: bool) -> Iterator[Path]:
    """`derived-views-operator` against the local stack, watching the test's namespaces
    (`watched`); yields its log file."""
    apply_crds(kube_api_client, [REPO / "crds" / "derivedviews.io_derivedviews.yaml"])
    # a test that runs alone may watch every namespace, as the chart's default does
    alone = request.node.get_closest_marker("exclusive") is not None
    namespaces = ["--all-namespaces"] if alone else watched(namespace)
    log_path = Path(stack.logs_dir) / f"operator-e2e-{tmp_path.name}.log"
    log = open(log_path, "ab")  # noqa: SIM115
    probe = f"http://127.0.0.1:{free_port()}/healthz"
    proc = subprocess.Popen(
        [sys.executable, "-m", "derived_views.main", f"--liveness={probe}", *namespaces],
        stdout=log, stderr=subprocess.STDOUT,
        env=operator_env(stack, f"e2e/{tmp_path.name}", product_trigger=request.node.
                         get_closest_marker("product_defaults") is not None,
                         node=jobs_on_node))
    wait_until_live(proc, probe, log_path)
    yield log_path
    proc.terminate()
    proc.wait(timeout=30)
    log.close()
