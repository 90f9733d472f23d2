"""What the dv CLI integration tests share: the test's namespace and account, the specs."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client

REPO = Path(__file__).resolve().parents[2]
G, V, P = "derivedviews.io", "v1alpha1", "derivedviews"


def wait_for(check: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


@dataclass(frozen=True)
class CliEnv:
    """A shielded namespace, a kubeconfig for it and a client acting as its account."""

    namespace: str
    kubeconfig: str
    as_account: Any
    admin: Any

    def dv(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "derived_views.cli", "--kubeconfig",
                               self.kubeconfig, *args], capture_output=True, text=True,
                              timeout=timeout, env=cli_environment(), check=False)

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-m", "derived_views.cli", "--kubeconfig",
                                 self.kubeconfig, *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=cli_environment())

    def view(self, name: str = "orders") -> dict[str, Any]:
        got: dict[str, Any] = client.CustomObjectsApi(self.admin).get_namespaced_custom_object(
            G, V, self.namespace, P, name)
        return got

    def create_view(self, spec: dict[str, Any], name: str = "orders",
                    annotations: dict[str, str] | None = None) -> dict[str, Any]:
        body = {"apiVersion": f"{G}/{V}", "kind": "DerivedView",
                "metadata": {"name": name, "annotations": annotations or {}}, "spec": spec}
        created: dict[str, Any] = client.CustomObjectsApi(
            self.as_account).create_namespaced_custom_object(G, V, self.namespace, P, body)
        return created

    def write_status(self, status: dict[str, Any], name: str = "orders") -> None:
        """What the operator would do: a merge patch of the status subresource."""
        client.CustomObjectsApi(self.as_account).patch_namespaced_custom_object_status(
            G, V, self.namespace, P, name, {"status": status})


def cli_environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO / "operator"), *filter(None, [env.get("PYTHONPATH")])])
    env.pop("KUBECONFIG", None)
    return env


SQL_V1 = "SELECT order_id, amount FROM events"
SQL_V2 = "SELECT order_id, amount, currency FROM events"


def spec_v1(mode: str = "auto") -> dict[str, Any]:
    return {
        "source": {"kafka": {"bootstrapServers": "127.0.0.1:9"}, "topics": ["orders"],
                   "format": "json", "schema": "order_id STRING, amount DOUBLE, currency STRING"},
        "transform": {"sql": SQL_V1},
        "sink": {"postgres": {"secretRef": {"name": "views-db"}, "table": "orders"},
                 "primaryKey": ["order_id"]},
        "cutover": {"mode": mode, "stableForSeconds": 5},
    }


def spec_v2(mode: str = "auto") -> dict[str, Any]:
    spec = spec_v1(mode)
    spec["transform"] = {"sql": SQL_V2}
    return spec


OPERATOR = "dv-operator"
"""The StatefulSet `installed_operator` makes: `dv plan --operator-name` names it."""


def installed_operator(api_client: Any, namespace: str, bootstrap: str,
                       reader: str | None = None) -> list[str]:
    """The operator's settings where the chart puts them, without running it: a StatefulSet of
    no replicas whose container's env is the tests' operators' tenancy policy (beside the real
    node the stack's Kafka and registry are on the node's address, which only that policy
    lists, not the chart's default). `reader`: a ServiceAccount of `namespace` given get on
    it, as a pipeline's account is. Returns dv plan's options that name it."""
    from dvstack.testing import replay

    env = [{"name": k, "value": v} for k, v in replay.kafka_tenancy_env(bootstrap).items()]
    labels = {"app": OPERATOR}
    client.AppsV1Api(api_client).create_namespaced_stateful_set(namespace, {
        "metadata": {"name": OPERATOR},
        "spec": {"replicas": 0, "serviceName": OPERATOR, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": {"containers": [
                     {"name": "operator", "image": "derived-views", "env": env}]}}}})
    if reader is not None:
        rbac = client.RbacAuthorizationV1Api(api_client)
        name = f"{OPERATOR}-reader"
        rbac.create_namespaced_role(namespace, {"metadata": {"name": name}, "rules": [
            {"apiGroups": ["apps"], "resources": ["statefulsets"], "verbs": ["get", "list"]}]})
        rbac.create_namespaced_role_binding(namespace, {
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": reader, "namespace": namespace}]})
    return ["--operator-namespace", namespace, "--operator-name", OPERATOR]
