"""The Spark Operator's own chart (v2.5.2, from its Go module) as the stack installs it:
rendered by the pinned helm with the stack's values and post-renderer, it must run our
image, serve exactly the namespaces the stand-in leaves alone, and keep the chart's own
security and RBAC defaults."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import yaml

from dvstack.helm import helm_binary
from dvstack.node import support as node_support
from dvstack.settings import load
from dvstack.spark import kubeflow_operator as spark_operator

TAG = "localhost/dv-spark-operator:0123456789ab"


def _render(tmp_path: Path) -> list[dict[str, Any]]:
    settings = load()
    values = tmp_path / "values.json"
    values.write_text(json.dumps(spark_operator.chart_values(
        TAG, namespace_selector=node_support.NAMESPACE_SELECTOR)))
    done = subprocess.run(
        [str(helm_binary(settings)), "template", spark_operator.RELEASE,
         str(spark_operator.chart_dir(settings)), "--namespace", spark_operator._NAMESPACE,
         "--values", str(values),
         *spark_operator.post_renderer_flags(node_support.NAMESPACE_SELECTOR)],
        capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def _by_kind(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def test_the_chart_runs_our_image_scoped_to_the_node_namespaces(tmp_path: Path) -> None:
    docs = _render(tmp_path)
    deployments = _by_kind(docs, "Deployment")
    assert set(deployments) == set(spark_operator.DEPLOYMENTS)
    for deployment in deployments.values():
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        assert container["image"] == TAG and container["imagePullPolicy"] == "Never"
        security = container["securityContext"]
        assert security["runAsNonRoot"] and security["readOnlyRootFilesystem"]
        assert security["capabilities"]["drop"] == ["ALL"]
    args = deployments["spark-operator-controller"]["spec"]["template"]["spec"][
        "containers"][0]["args"]
    assert args[:2] == ["controller", "start"]
    assert f"--namespace-selector={node_support.NAMESPACE_SELECTOR}" in args
    assert not [a for a in args if a.startswith("--namespaces")]  # the selector alone
    assert "--enable-ui-service=false" in args and "--leader-election=true" in args

    labels = spark_operator.selector_labels(node_support.NAMESPACE_SELECTOR)
    services = _by_kind(docs, "Service")
    configurations = [*_by_kind(docs, "MutatingWebhookConfiguration").values(),
                      *_by_kind(docs, "ValidatingWebhookConfiguration").values()]
    assert [c["metadata"]["name"] for c in configurations] == [spark_operator.WEBHOOK_NAME] * 2
    for configuration in configurations:
        for hook in configuration["webhooks"]:
            assert hook["namespaceSelector"] == {"matchLabels": labels}, hook["name"]
            assert hook["failurePolicy"] == "Fail"
            assert hook["clientConfig"]["service"]["name"] in services  # through its Service


def test_the_controller_may_submit_jobs_in_any_namespace_the_selector_finds(
        tmp_path: Path) -> None:
    """spark-submit runs in the controller's pod with its ServiceAccount: the chart's
    ClusterRole must let it create drivers and read namespaces for the selector."""
    docs = _render(tmp_path)
    role = _by_kind(docs, "ClusterRole")["spark-operator-controller"]
    rights = {(resource, verb) for rule in role["rules"] if "" in rule.get("apiGroups", [])
              for resource in rule.get("resources", []) for verb in rule.get("verbs", [])}
    assert {("pods", "create"), ("configmaps", "create"), ("services", "create"),
            ("namespaces", "list"), ("namespaces", "watch")} <= rights
    binding = _by_kind(docs, "ClusterRoleBinding")["spark-operator-controller"]
    (subject,) = binding["subjects"]
    deployment = _by_kind(docs, "Deployment")["spark-operator-controller"]
    assert subject["name"] == deployment["spec"]["template"]["spec"]["serviceAccountName"]
