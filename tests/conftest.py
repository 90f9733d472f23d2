"""Shared fixtures: the running local stack, as described by `dvstack up`.

Integration and e2e tests need the real services; when the stack is not up
they fail with the command to run, rather than skipping silently.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parent
pytest_plugins = ["support.suite_timing"]
from support.results import FILE_SECONDS, PHASE_ENV  # noqa: E402

OFFLINE = ("unit", "stack", "chart", "benchmarks")
"""Folders of tests that never touch the running stack: `dvstack test` runs them beside the
exclusive phase. Those under `unit` test the product and never import the stack (dvstack):
its fixtures and helpers are imported where a test asks for them."""
SERVICES_ONLY = ("integration/spark_job",)
"""Folders of tests that use the stack's services (Kafka, PostgreSQL, S3, OpenSearch, the
registry) but no Kubernetes object: `dvstack test` runs them beside the `all_namespaces`
tests, which touch every namespace's views and nothing else."""


FOLDER_ORDER = ("faults", "e2e", "integration", "unit")
"""Longest files first when no earlier run says how long each takes (a fresh clone)."""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: minutes of work beyond the usual integration test "
                                       "(deselect with -m 'not slow')")
    config.addinivalue_line("markers", "exclusive: needs the stack to itself (restarts a shared "
                                       "component, or needs the machine quiet); `dvstack test` "
                                       "runs these last")
    config.addinivalue_line("markers", "all_namespaces: touches every namespace's DerivedViews "
                                       "(an operator over all namespaces, or the CRD replaced); "
                                       "`dvstack test` runs these after the parallel phase, "
                                       "beside the tests of SERVICES_ONLY folders only")
    config.addinivalue_line("markers", "product_defaults: the test's operator keeps every "
                                       "product default (the e2e operator otherwise sets a "
                                       "longer trigger interval, e2e_operator.TRIGGER_SECONDS)")
    config.addinivalue_line("markers", "job_namespaces: the test's operator runs views' jobs "
                                       "in job namespaces (DV_JOB_NAMESPACE), which the "
                                       "operator_process fixture makes as the chart does")
    config.addinivalue_line("markers", "real_node: where the stack has the real node, the "
                                       "test's namespace is labelled for it, so the real Spark "
                                       "Operator runs its jobs as pods (elsewhere the stand-in)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark tests by folder so `-m "not e2e"` and friends work without boilerplate; keep
    the phase's tests (see dvstack.testing.phases), longest files first."""
    for item in items:
        path = Path(str(item.fspath))
        if TESTS / "integration" in path.parents:
            item.add_marker(pytest.mark.integration)
        if TESTS / "e2e" in path.parents:
            item.add_marker(pytest.mark.e2e)
    phase = os.environ.get(PHASE_ENV, "")
    if phase:
        from dvstack.testing.phases import in_phase

        def under(item: pytest.Item, folders: tuple[str, ...]) -> bool:
            parents = Path(str(item.fspath)).parents
            return any(TESTS / folder in parents for folder in folders)

        keep = [i for i in items if in_phase(
            phase, exclusive=i.get_closest_marker("exclusive") is not None,
            all_namespaces=i.get_closest_marker("all_namespaces") is not None,
            unit=under(i, OFFLINE), services_only=under(i, SERVICES_ONLY))]
        kept = set(keep)
        config.hook.pytest_deselected(items=[i for i in items if i not in kept])
        items[:] = keep
    items[:] = longest_files_first(items)
    if phase == "exclusive":  # the restarts last: what they leave behind touches no other test
        items.sort(key=lambda i: i.get_closest_marker("faults") is not None)


def longest_files_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """Whole files, the slowest first by the last run's table (else by folder), each file's
    tests in their own order: parallel workers then end together instead of one running a
    long e2e file alone at the end. Deterministic, as every xdist worker must collect alike."""
    seconds = _last_file_seconds()
    first_seen: dict[str, int] = {}
    for item in items:
        first_seen.setdefault(item.nodeid.split("::", 1)[0], len(first_seen))

    def folder_rank(file: str) -> int:
        parts = Path(file).parts
        return next((n for n, f in enumerate(FOLDER_ORDER) if f in parts[:2]), len(FOLDER_ORDER))

    def key(item: pytest.Item) -> tuple[float, int, int]:
        file = item.nodeid.split("::", 1)[0]
        return (-seconds.get(file, 0.0), folder_rank(file), first_seen[file])

    return sorted(items, key=key)  # stable: a file's tests keep their order


def _last_file_seconds() -> dict[str, float]:
    """This machine's last run, else the table committed beside this file (a full run on
    the 2-core machine), so that a fresh clone (CI) also starts its longest files first."""
    from support.results import results_dir

    try:
        places = [results_dir() / FILE_SECONDS]
    except OSError:
        places = []
    for place in [*places, TESTS / FILE_SECONDS]:
        try:
            known = json.loads(place.read_text())
            return {str(name): float(value) for name, value in known.items()}
        except (OSError, ValueError, AttributeError, TypeError):
            continue
    return {}


@dataclass(frozen=True)
class Stack:
    """Endpoints of the local stack (see dvstack.cli.up)."""

    kubeconfig: str
    apiserver: str
    kafka_bootstrap: str
    kafka_sasl: dict[str, str]  # bootstrap, mechanism, security_protocol, username, password
    kafka_connect: str
    """Kafka Connect's REST API (standalone worker with the Debezium PostgreSQL connector)."""
    pg_dsn: str
    pg: dict[str, Any]
    s3: dict[str, str]
    """S3Proxy: endpoint, bucket, access_key, secret_key, region."""
    spark_jars: list[str]
    image_app_root: str
    repo: str
    logs_dir: str
    state_dir: str
    opensearch: str = ""
    """OpenSearch's REST API (single node, no security plugin); "" in a stack.json from before
    OpenSearch joined the stack."""
    schema_registry_url: str = ""
    """The schema registry's Confluent-compatible API (Apicurio, `/apis/ccompat/v7`); "" in a
    stack.json from before the registry joined the stack."""
    node: bool = False
    """A real node runs beside the stand-in: the real Spark Operator runs the jobs of the
    namespaces labelled for it (marker `real_node`) as pods on it."""
    images: dict[str, str] = field(default_factory=dict)
    """With the node: the project's images by name (operator, spark), imported into it."""
    spark_template: str = ""
    """With the node: the SparkApplication template its jobs use (cores requested in part)."""


@pytest.fixture(scope="session")
def stack() -> Stack:
    from dvstack.settings import load

    stack_file = load().stack_file
    if not stack_file.is_file():
        pytest.fail(f"the local stack is not up ({stack_file} is missing): run `make stack-up`, "
                    "or run the tests with `make test`", pytrace=False)
    info = json.loads(stack_file.read_text())
    return Stack(**{k: info[k] for k in Stack.__dataclass_fields__ if k in info})


@pytest.fixture(scope="session")
def kube_api_client(stack: Stack) -> Any:
    from kubernetes import config

    return config.new_client_from_config(config_file=stack.kubeconfig)


@pytest.fixture()
def jobs_on_node(request: pytest.FixtureRequest, stack: Stack) -> bool:
    """Whether the test's jobs run on the real node: it asks (`real_node`) and there is one."""
    return stack.node and request.node.get_closest_marker("real_node") is not None


@pytest.fixture()
def real_node(jobs_on_node: bool) -> None:
    """For a test that means nothing without the node: skipped where the stack has none."""
    if not jobs_on_node:
        pytest.skip("the stack runs without the real node (`make stack-up` says why)")


@pytest.fixture()
def namespace(jobs_on_node: bool, kube_api_client: Any) -> Iterator[str]:
    """A fresh namespace per test, deleted afterwards (the controller manager empties it).
    On the real node (`jobs_on_node`) it is labelled for the real Spark Operator and holds the
    Spark jobs' ServiceAccount, as the chart makes it."""
    from kubernetes import client

    from dvstack.node.support import NAMESPACE_LABEL
    from dvstack.testing import replay
    from dvstack.testing.waiting import wait_for

    core = client.CoreV1Api(kube_api_client)
    name = f"t-{uuid.uuid4().hex[:10]}"
    core.create_namespace({"metadata": {"name": name, "labels": (
        {NAMESPACE_LABEL: "true"} if jobs_on_node else {})}})
    # As on a real cluster, where a namespace has its `default` ServiceAccount long before
    # anything runs in it: the controller manager creates it asynchronously (later still while
    # it relists after an API server restart), and a pod created before is forbidden.
    wait_for(lambda: core.list_namespaced_service_account(
        name, field_selector="metadata.name=default").items, timeout=120,
        what=f"the default ServiceAccount of namespace {name}")
    if jobs_on_node:
        replay.spark_job_account(kube_api_client, name)
    yield name
    core.delete_namespace(name)

