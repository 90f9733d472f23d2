"""Fixtures for installing the Helm chart into the local API server.

Each test gets fresh namespaces and release names; whatever it installs is
uninstalled and its namespaces deleted afterwards, even when it fails. The
operator pods never run here (their default image is in no registry this
machine reaches; tests/e2e/test_chart_on_node.py runs them from the project's
image): tests check objects through the API, never wait on pods.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from dvstack.chart import Helm, Kubectl, Release, contained, kubectl_binary, short_id
from dvstack.helm import helm_binary
from dvstack.settings import load
from dvstack.testing import replay


@pytest.fixture(scope="session")
def helm_cli(stack: Any) -> Helm:
    return Helm(helm_binary(load()), stack.kubeconfig)


@pytest.fixture(scope="session")
def kubectl(stack: Any) -> Kubectl:
    return Kubectl(kubectl_binary(), stack.kubeconfig)


@pytest.fixture()
def make_namespace(kubectl: Kubectl) -> Iterator[Callable[[str], str]]:
    """`make_namespace("w")` -> a fresh namespace name like `dv-w-1a2b3c4d`, deleted afterwards."""
    created: list[str] = []

    def make(role: str) -> str:
        name = f"dv-{role}-{short_id()}"
        kubectl.create_namespace(name)
        created.append(name)
        return name

    yield make
    for name in created:
        kubectl.delete_namespace(name)


def with_stack_kafka(values: dict[str, Any], bootstrap: str) -> dict[str, Any]:
    """A release's values listing the stack's Kafka where the chart's default (loopback only)
    would refuse it, as beside the real node; a test's own `tenancy.kafka` is kept."""
    policy = replay.kafka_tenancy_env(bootstrap).get("DV_TENANCY_POLICY")
    tenancy = values.get("tenancy") or {}
    if policy is None or "kafka" in tenancy:
        return values
    return {**values, "tenancy": {**tenancy, "kafka": json.loads(policy)["kafka"]}}


@pytest.fixture
def install(helm_cli: Helm, stack: Any) -> Iterator[Callable[..., Release]]:
    """`install(namespace, values, name=None)`: a helm release, uninstalled after the test."""
    installed: list[Release] = []

    def run(namespace: str, values: dict[str, Any], name: str | None = None) -> Release:
        release = Release(name or f"dv-{short_id()}", namespace)
        installed.append(release)
        helm_cli.install(release.name, namespace,
                         contained(with_stack_kafka(values, stack.kafka_bootstrap)))
        return release

    yield run
    for release in reversed(installed):
        helm_cli.uninstall(release.name, release.namespace)
