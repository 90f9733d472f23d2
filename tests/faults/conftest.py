"""Fault-suite fixtures, and the hook that writes docs/reliability.md at the end of a run.

Each scenario leaves one JSON result in the stack's results/faults directory;
when a session ran at least one fault test, the results present there are
merged into the table of docs/reliability.md.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dvstack.cli import apply_crds
from dvstack.testing import replay
from support.faults.reliability_table import write_from
from support.faults.scenes import OperatorProcess, results_dir
from support.paths import REPO

FAULTS = Path(__file__).resolve().parent
SCENARIO_TIMEOUT_SECONDS = 3600
_RAN: list[str] = []  # fault tests that ran in this session


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if FAULTS in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.faults)
            item.add_marker(pytest.mark.e2e)
            item.add_marker(pytest.mark.slow)
            # a scenario is one or more migrations under load: longer than the default limit
            item.add_marker(pytest.mark.timeout(SCENARIO_TIMEOUT_SECONDS))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" and "faults" in report.keywords:
        _RAN.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not _RAN or hasattr(session.config, "workerinput"):  # the xdist controller writes it
        return
    from dvstack.settings import load

    write_from(load().state_dir / "results" / "faults", REPO / "docs" / "reliability.md")


@pytest.fixture()
def operator(stack: Any, kube_api_client: Any, namespace: str, tmp_path: Path
             ) -> Iterator[OperatorProcess]:
    """The operator as its own process (started), with the checkpoint Secret in place."""
    from kubernetes import client

    replay.ensure_checkpoint_secret(client.CoreV1Api(kube_api_client), namespace, stack.s3)
    apply_crds(kube_api_client, [REPO / "crds" / "derivedviews.io_derivedviews.yaml"])
    log_path = Path(stack.logs_dir) / f"operator-faults-{tmp_path.name}.log"
    process = OperatorProcess(stack, namespace, log_path, tmp_path,
                              f"faults/{tmp_path.name}").start()
    yield process
    _delete_views(kube_api_client, namespace, process)
    process.stop()


def _delete_views(kube_api_client: Any, namespace: str, process: OperatorProcess) -> None:
    """Delete what a failed scenario left, while an operator runs to release its finalizer
    (else the namespace's deletion would wait on it forever)."""
    from kubernetes import client

    from dvstack.testing.waiting import TimedOut, wait_for
    from support.e2e.views import G, P, V

    custom = client.CustomObjectsApi(kube_api_client)
    if process.proc is None or process.proc.poll() is not None:
        process.start()
    custom.delete_collection_namespaced_custom_object(G, V, namespace, P)
    # on a time-out the test's own failure says more; the namespace goes when the view does
    with contextlib.suppress(TimedOut):
        wait_for(lambda: not custom.list_namespaced_custom_object(G, V, namespace, P)["items"],
                 timeout=180, interval=1, what=f"the views of {namespace} to be deleted")


@pytest.fixture()
def results(stack: Any) -> Path:
    return results_dir(stack)
