"""The real Spark Operator's processes and webhook objects, as the stack runs them outside a pod."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from dvstack import spark_operator as so
from dvstack.settings import Settings, load

BINARY = Path("/opt/bin/spark-operator")


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return dataclasses.replace(load(), cache_dir=tmp_path / "cache", state_dir=tmp_path / "state",
                               apiserver_port=16443)


def flags(argv: list[str]) -> dict[str, str]:
    return dict(arg[2:].split("=", 1) for arg in argv if arg.startswith("--"))


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


def test_controller_flags(settings: Settings) -> None:
    argv = so.controller_argv(settings, BINARY, so.Ports())
    assert argv[:3] == [str(BINARY), "controller", "start"]
    got = flags(argv)
    assert got["kubeconfig"] == str(settings.kubeconfig)
    assert got["leader-election"] == "false"
    assert got["health-probe-bind-address"] == "127.0.0.1:16453"
    assert got["metrics-bind-address"] == "0"
    assert got["enable-ui-service"] == "false"
    assert "namespaces" not in got  # all namespaces
    assert "enable-metrics" not in got


def test_controller_namespaces_metrics_and_ui_service(settings: Settings) -> None:
    argv = so.controller_argv(settings, BINARY, so.Ports(controller_metrics=16454),
                              namespaces=["b", "a", "b"], ui_service=True, threads=3)
    got = flags(argv)
    assert got["namespaces"] == "a,b"
    assert got["metrics-bind-address"] == "127.0.0.1:16454"
    assert got["enable-metrics"] == "true"
    assert got["enable-ui-service"] == "true"
    assert got["controller-threads"] == "3"


def test_every_flag_is_one_argument(settings: Settings) -> None:
    """`--flag=value`: a boolean flag given as `--flag false` would take `false` as an argument."""
    for argv in (so.controller_argv(settings, BINARY, so.Ports()),
                 so.webhook_argv(settings, BINARY, so.Ports())):
        assert all(arg.startswith("--") and "=" in arg for arg in argv[3:])


def test_controller_env_points_spark_submit_at_the_stack(settings: Settings) -> None:
    env = so.controller_env(settings, Path("/opt/spark"))
    assert env == {"SPARK_HOME": "/opt/spark", "KUBERNETES_SERVICE_HOST": "127.0.0.1",
                   "KUBERNETES_SERVICE_PORT": "16443", "KUBECONFIG": str(settings.kubeconfig)}


def test_webhook_flags_match_the_objects_it_patches(settings: Settings) -> None:
    argv = so.webhook_argv(settings, BINARY, so.Ports(webhook=17000), namespaces=["jobs"])
    assert argv[:3] == [str(BINARY), "webhook", "start"]
    got = flags(argv)
    assert got["webhook-port"] == "17000"
    assert got["webhook-cert-dir"] == str(so.webhook_cert_dir(settings))
    assert so.webhook_cert_dir(settings).is_relative_to(settings.state_dir)
    assert got["webhook-secret-namespace"] == got["webhook-svc-namespace"] == so.NAMESPACE
    assert got["webhook-secret-name"] == so.WEBHOOK_SECRET
    name = so.mutating_webhook_configuration(17000)["metadata"]["name"]
    assert got["mutating-webhook-name"] == name
    assert got["validating-webhook-name"] == (
        so.validating_webhook_configuration(17000)["metadata"]["name"])
    assert got["namespaces"] == "jobs"
    assert got["health-probe-bind-address"] == "127.0.0.1:16452"
    assert so.webhook_env(settings) == {"KUBECONFIG": str(settings.kubeconfig)}


def test_the_two_processes_never_share_a_port() -> None:
    ports = so.Ports()
    assert len({ports.webhook, ports.webhook_health, ports.controller_health}) == 3


def test_ports_follow_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DV_SPARK_WEBHOOK_PORT", "18001")
    monkeypatch.setenv("DV_SPARK_CONTROLLER_METRICS_PORT", "18002")
    assert so.ports() == dataclasses.replace(so.Ports(), webhook=18001, controller_metrics=18002)
    monkeypatch.setenv("DV_SPARK_WEBHOOK_HEALTH_PORT", "x")
    with pytest.raises(SystemExit, match="DV_SPARK_WEBHOOK_HEALTH_PORT"):
        so.ports()


def test_mutating_webhooks_are_the_charts_with_a_loopback_url() -> None:
    config = so.mutating_webhook_configuration(16451)
    assert config["kind"] == "MutatingWebhookConfiguration"
    hooks = {h["name"]: h for h in config["webhooks"]}
    assert list(hooks) == [
        "mutate--v1-pod.sparkoperator.k8s.io",
        "mutate-sparkoperator-k8s-io-v1beta2-sparkapplication.sparkoperator.k8s.io",
        "mutate-sparkoperator-k8s-io-v1beta2-scheduledsparkapplication.sparkoperator.k8s.io",
        "mutate-sparkoperator-k8s-io-v1alpha1-sparkconnect.sparkoperator.k8s.io",
    ]
    pod = hooks["mutate--v1-pod.sparkoperator.k8s.io"]
    assert pod["clientConfig"] == {"url": "https://localhost:16451/mutate--v1-pod"}
    assert pod["objectSelector"] == {"matchLabels": {
        "sparkoperator.k8s.io/launched-by-spark-operator": "true"}}
    assert pod["rules"] == [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"],
                             "operations": ["CREATE"]}]
    app = hooks["mutate-sparkoperator-k8s-io-v1beta2-sparkapplication.sparkoperator.k8s.io"]
    assert app["rules"][0]["operations"] == ["CREATE", "UPDATE"]
    assert "objectSelector" not in app
    for hook in config["webhooks"]:
        assert hook["failurePolicy"] == "Fail"
        assert hook["sideEffects"] == "None"
        assert hook["timeoutSeconds"] == 10
        assert "namespaceSelector" not in hook
        assert "service" not in hook["clientConfig"]


def test_validating_webhooks_cover_the_three_kinds() -> None:
    config = so.validating_webhook_configuration(16451)
    assert config["kind"] == "ValidatingWebhookConfiguration"
    assert [h["clientConfig"]["url"] for h in config["webhooks"]] == [
        "https://localhost:16451/validate-sparkoperator-k8s-io-v1beta2-sparkapplication",
        "https://localhost:16451/validate-sparkoperator-k8s-io-v1beta2-scheduledsparkapplication",
        "https://localhost:16451/validate-sparkoperator-k8s-io-v1alpha1-sparkconnect",
    ]
    assert [h["rules"][0]["resources"] for h in config["webhooks"]] == [
        ["sparkapplications"], ["scheduledsparkapplications"], ["sparkconnects"]]


def test_job_namespaces_select_by_name_and_the_ca_bundle_is_set() -> None:
    for build in (so.mutating_webhook_configuration, so.validating_webhook_configuration):
        config = build(16451, "Q0E=", namespaces=["b", "a"])
        for hook in config["webhooks"]:
            assert hook["clientConfig"]["caBundle"] == "Q0E="
            assert hook["namespaceSelector"] == {"matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["a", "b"]}]}


def test_a_namespace_selector_scopes_the_controller_and_both_webhooks_alike(
        settings: Settings) -> None:
    got = flags(so.controller_argv(settings, BINARY, so.Ports(),
                                   namespace_selector="derivedviews.io/real-node=true"))
    assert got["namespace-selector"] == "derivedviews.io/real-node=true"
    assert "namespaces" not in got
    for build in (so.mutating_webhook_configuration, so.validating_webhook_configuration):
        config = build(16451, selector="derivedviews.io/real-node=true")
        for hook in config["webhooks"]:
            assert hook["namespaceSelector"] == {
                "matchLabels": {"derivedviews.io/real-node": "true"}}
    with pytest.raises(ValueError, match="key=value"):
        so.mutating_webhook_configuration(16451, selector="derivedviews.io/real-node")


def test_ca_bundle_waits_for_every_key_of_the_webhook_secret() -> None:
    full = {key: "eA==" for key in so.WEBHOOK_SECRET_KEYS} | {"ca-cert.pem": "Q0E="}
    assert so.ca_bundle({"data": full}) == "Q0E="
    assert so.ca_bundle({"metadata": {"name": so.WEBHOOK_SECRET}}) is None  # just created
    assert so.ca_bundle({"data": {**full, "server-key.pem": ""}}) is None


def test_namespace_object() -> None:
    assert so.namespace_object() == {"apiVersion": "v1", "kind": "Namespace",
                                     "metadata": {"name": "spark-operator"}}


def test_readyz_url() -> None:
    assert so.readyz_url(16453) == "http://127.0.0.1:16453/readyz"


def test_spark_home_of_a_distribution(tmp_path: Path) -> None:
    submit = tmp_path / "spark" / "bin" / "spark-submit"
    submit.parent.mkdir(parents=True)
    submit.write_text("")
    assert so.spark_home_for(submit) == tmp_path / "spark"


def test_spark_home_of_a_pip_install(tmp_path: Path) -> None:
    """pip puts spark-submit and find_spark_home.py in the virtualenv's bin/."""
    home = tmp_path / "site-packages" / "pyspark"
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "spark-submit").write_text("")
    venv_bin = tmp_path / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "spark-submit").write_text("")
    (venv_bin / "find_spark_home.py").write_text(f"print({str(home)!r})\n")
    assert so.spark_home_for(venv_bin / "spark-submit") == home


def test_spark_home_without_spark_submit_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="no SPARK_HOME"):
        so.spark_home_for(tmp_path / "bin" / "spark-submit")


def test_operator_crds_are_the_three_kinds(settings: Settings) -> None:
    home = so.home(settings)
    home.mkdir(parents=True)
    for name in so.CRD_FILES:
        (home / name).write_text("kind: CustomResourceDefinition\n")
    assert [p.name for p in so.operator_crds(settings)] == list(so.CRD_FILES)
