"""The real Spark Operator as the stack builds it and installs it with its own chart."""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

import pytest
import yaml

from dvstack.settings import Settings, load
from dvstack.spark import kubeflow_operator as so


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return dataclasses.replace(load(), cache_dir=tmp_path / "cache", state_dir=tmp_path / "state",
                               apiserver_port=16443)


def test_the_binary_lives_in_the_versioned_cache_dir(settings: Settings) -> None:
    assert so.binary_path(settings) == (settings.cache_dir / "spark-operator-v2.5.2" / "bin"
                                        / "spark-operator")


def test_a_built_binary_is_reused_without_go(settings: Settings,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    built = so.binary_path(settings)
    built.parent.mkdir(parents=True)
    built.write_text("")
    monkeypatch.setenv("PATH", str(settings.cache_dir / "empty"))
    assert so.operator_binary(settings) == built


def test_without_go_the_error_says_what_to_install(settings: Settings,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(settings.cache_dir / "empty"))
    with pytest.raises(SystemExit, match="install Go"):
        so.operator_binary(settings)


def test_the_build_is_static_stripped_and_stamped_with_the_version(tmp_path: Path) -> None:
    argv = so.build_argv("go", tmp_path / "out")
    assert argv[:4] == ["go", "build", "-trimpath", "-buildvcs=false"]
    assert argv[-3:] == ["-o", str(tmp_path / "out"), "./cmd/operator"]
    ldflags = argv[argv.index("-ldflags") + 1].split()
    assert ldflags[:2] == ["-s", "-w"]
    assert "k8s.io/component-base/version.gitVersion=v2.5.2" in ldflags
    assert f"k8s.io/component-base/version.gitCommit={so.COMMIT}" in ldflags


def test_the_values_name_our_image_never_pulled_and_keep_the_charts_defaults() -> None:
    values = so.chart_values("localhost/dv-spark-operator:abc123def456",
                             namespace_selector="derivedviews.io/real-node=true")
    assert values["image"] == {"registry": "localhost", "repository": "dv-spark-operator",
                               "tag": "abc123def456", "pullPolicy": "Never"}
    # the selector alone: the chart's default jobNamespaces (["default"]) would add `default`
    assert values["spark"] == {"jobNamespaces": [],
                               "jobNamespaceSelector": "derivedviews.io/real-node=true"}
    assert values["controller"] == {"uiService": {"enable": False}}
    assert set(values) == {"image", "controller", "spark"}  # webhook, RBAC, leader election: the chart's


def test_without_a_selector_the_values_serve_every_namespace() -> None:
    assert so.chart_values("localhost/x:1")["spark"] == {"jobNamespaces": [],
                                                         "jobNamespaceSelector": ""}


MUTATING = """\
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: spark-operator-webhook}
webhooks:
- name: mutate--v1-pod.sparkoperator.k8s.io
  clientConfig: {service: {name: spark-operator-webhook-svc, namespace: spark-operator}}
  objectSelector: {matchLabels: {sparkoperator.k8s.io/launched-by-spark-operator: "true"}}
- name: mutate-sparkoperator-k8s-io-v1beta2-sparkapplication.sparkoperator.k8s.io
  namespaceSelector:
    matchExpressions: [{key: kubernetes.io/metadata.name, operator: In, values: [jobs]}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: spark-operator-webhook}
webhooks:
- name: validate-sparkoperator-k8s-io-v1beta2-sparkapplication.sparkoperator.k8s.io
---
apiVersion: v1
kind: Service
metadata: {name: spark-operator-webhook-svc}
spec: {selector: {app: webhook}}
"""


def test_the_post_renderer_scopes_both_webhook_configurations_as_the_controller() -> None:
    out = [d for d in yaml.safe_load_all(so.scope_webhooks(MUTATING, "a.io/b=true,c=d")) if d]
    assert [d["kind"] for d in out] == ["MutatingWebhookConfiguration",
                                        "ValidatingWebhookConfiguration", "Service"]
    pod, app = out[0]["webhooks"]
    assert pod["namespaceSelector"] == {"matchLabels": {"a.io/b": "true", "c": "d"}}
    assert pod["objectSelector"]  # the chart's own, kept
    # a webhook the chart scoped itself (jobNamespaces) keeps the chart's selector
    assert app["namespaceSelector"]["matchExpressions"][0]["values"] == ["jobs"]
    assert out[1]["webhooks"][0]["namespaceSelector"] == {
        "matchLabels": {"a.io/b": "true", "c": "d"}}
    assert out[2] == yaml.safe_load(MUTATING.split("---")[2])  # others untouched


def test_a_selector_that_is_not_key_value_is_refused() -> None:
    for bad in ("derivedviews.io/real-node", "", "=x", "a=b,c"):
        with pytest.raises(ValueError, match="key=value"):
            so.scope_webhooks(MUTATING, bad)


def test_helm_installs_with_the_stacks_crds_waits_and_post_renders(tmp_path: Path) -> None:
    argv = so.helm_argv(Path("/h/helm"), tmp_path / "kubeconfig", tmp_path / "chart",
                        tmp_path / "values.json", "derivedviews.io/real-node=true")
    assert argv[:7] == ["/h/helm", "--kubeconfig", str(tmp_path / "kubeconfig"), "upgrade",
                        "--install", "spark-operator", str(tmp_path / "chart")]
    assert {"--skip-crds", "--wait", "--create-namespace"} <= set(argv)
    assert argv[argv.index("--namespace") + 1] == "spark-operator"
    renderer = argv[argv.index("--post-renderer") + 1]
    args = [argv[i + 1] for i, a in enumerate(argv) if a == "--post-renderer-args"]
    assert [renderer, *args] == [sys.executable, "-m", "dvstack.spark.kubeflow_operator", "post-render",
                                 "--namespace-selector=derivedviews.io/real-node=true"]
    plain = so.helm_argv(Path("/h/helm"), tmp_path / "k", tmp_path / "c", tmp_path / "v", None)
    assert "--post-renderer" not in plain


def test_the_webhook_is_callable_once_every_hook_of_both_configurations_has_its_ca() -> None:
    def config(*bundles: str) -> dict[str, object]:
        return {"webhooks": [{"clientConfig": {"caBundle": b} if b else {}} for b in bundles]}

    assert so.ca_bundles_set([config("Q0E=", "Q0E="), config("Q0E=")])
    assert not so.ca_bundles_set([config("Q0E=", ""), config("Q0E=")])  # still writing
    assert not so.ca_bundles_set([config("Q0E=")])  # one configuration not there yet
    assert not so.ca_bundles_set([])


def test_module_files_are_copied_once_and_the_entrypoint_made_executable(
        settings: Settings) -> None:
    home = so.home(settings)
    home.mkdir(parents=True)
    (home / so.ENTRYPOINT).write_text("#!/bin/bash\n")
    (home / so.ENTRYPOINT).chmod(0o444)  # as the module cache extracts it
    assert so.entrypoint(settings) == home / so.ENTRYPOINT  # cached: no `go` asked
    assert os.access(home / so.ENTRYPOINT, os.X_OK)
    (home / "chart").mkdir()
    assert so.chart_dir(settings) == home / "chart"


def test_operator_crds_are_the_three_kinds(settings: Settings) -> None:
    home = so.home(settings)
    home.mkdir(parents=True)
    for name in so.CRD_FILES:
        (home / name).write_text("kind: CustomResourceDefinition\n")
    assert [p.name for p in so.operator_crds(settings)] == list(so.CRD_FILES)
