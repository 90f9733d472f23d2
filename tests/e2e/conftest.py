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

from dvstack.cli import apply_crds
from dvstack.processes import free_port
from dvstack.testing import replay
from dvstack.testing.waiting import wait_for
from support.e2e.operator import (
    JOB_NAMESPACE,
    jobs_of,
    operator_env,
    operator_namespace,
    second_namespace,
    watched,
)
from support.e2e.views import delete_views
from support.paths import REPO

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
def job_namespaces(request: pytest.FixtureRequest, kube_api_client: Any, namespace: str
                   ) -> Iterator[bool]:
    """For a test marked `job_namespaces`: the job namespaces of its two namespaces, labelled
    as the chart makes them, and the operator's namespace; deleted after the test."""
    if request.node.get_closest_marker("job_namespaces") is None:
        yield False
        return
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    from derived_views.api.constants import JOBS_FOR_LABEL

    core = client.CoreV1Api(kube_api_client)
    made = {operator_namespace(namespace): {}}
    for tenant in (namespace, second_namespace(namespace)):
        made[jobs_of(tenant)] = {JOBS_FOR_LABEL: tenant}
    for name, labels in made.items():
        core.create_namespace({"metadata": {"name": name, "labels": labels}})
    yield True
    for name in made:
        try:
            core.delete_namespace(name)
        except ApiException as exc:
            if exc.status != 404:
                raise


@pytest.fixture()
def checkpoint_secret(stack: Any, kube_api_client: Any, namespace: str,
                      job_namespaces: bool) -> str:
    """The checkpoint Secret (S3 credentials from stack.json) in the test's namespace, or in
    the operator's when jobs run in job namespaces (tenants never hold it then)."""
    from kubernetes import client

    where = operator_namespace(namespace) if job_namespaces else namespace
    replay.ensure_checkpoint_secret(client.CoreV1Api(kube_api_client), where, stack.s3)
    return replay.CHECKPOINT_SECRET


@pytest.fixture()
def operator_process(request: pytest.FixtureRequest, stack: Any, kube_api_client: Any,
                     tmp_path: Path, namespace: str, checkpoint_secret: str,
                     jobs_on_node: bool, job_namespaces: bool) -> Iterator[Path]:
    """`derived-views-operator` against the local stack, watching the test's namespaces
    (`watched`); yields its log file."""
    apply_crds(kube_api_client, [REPO / "crds" / "derivedviews.io_derivedviews.yaml"])
    # a test that no other test's views run beside may watch every namespace, as the
    # chart's default does
    alone = any(request.node.get_closest_marker(m) is not None
                for m in ("exclusive", "all_namespaces"))
    namespaces = ["--all-namespaces"] if alone else watched(namespace, jobs=job_namespaces)
    log_path = Path(stack.logs_dir) / f"operator-e2e-{tmp_path.name}.log"
    log = open(log_path, "ab")  # noqa: SIM115
    probe = f"http://127.0.0.1:{free_port()}/healthz"
    placement = ({"DV_JOB_NAMESPACE": JOB_NAMESPACE,
                  "DV_OPERATOR_NAMESPACE": operator_namespace(namespace)}
                 if job_namespaces else {})
    proc = subprocess.Popen(
        [sys.executable, "-m", "derived_views.main", f"--liveness={probe}", *namespaces],
        stdout=log, stderr=subprocess.STDOUT,
        env=operator_env(stack, f"e2e/{tmp_path.name}", product_trigger=request.node.
                         get_closest_marker("product_defaults") is not None,
                         node=jobs_on_node, **placement))
    wait_until_live(proc, probe, log_path)
    try:
        yield log_path
    finally:
        try:
            if proc.poll() is None:
                delete_views(kube_api_client, namespace)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
            log.close()
