"""The real Kubeflow Spark Operator v2.5.2 on the node, installed by its own Helm chart.

On a real cluster a platform runs `helm install spark-operator` of the project's chart; the
stack does the same with that chart at the pinned version, taken from the Go module (the
chart is `charts/spark-operator-chart/` in github.com/kubeflow/spark-operator/v2@v2.5.2),
so the controller and the webhook run as pods under the chart's own ServiceAccounts and
RBAC, with leader election, spark-submit from inside the controller's pod, and the webhook
reached through its Service. No registry serves the upstream image here, so the stack
builds its equivalent (`stack/images/spark-operator.Containerfile`, as the module's
Dockerfile builds its final stage): `operator_binary` builds `cmd/operator` once into
`<cache>/spark-operator-v2.5.2/bin/`, and the image puts it with the module's
`entrypoint.sh` on the stack's Spark base.

Read in the module (module-relative paths): `Dockerfile`, `entrypoint.sh`;
`charts/spark-operator-chart/values.yaml` and `templates/{controller,webhook,spark}/`
(deployment flags, RBAC, the webhook configurations, which the chart scopes by
`spark.jobNamespaces` names only); `cmd/operator/{controller,webhook}/start.go` (both exit
at once unless the CRDs are installed: their caches map SparkApplication,
ScheduledSparkApplication and SparkConnect); `pkg/certificate/` (the webhook makes its own
CA and a certificate for `<svc>.<ns>.svc`, and writes the CA into both configurations'
`caBundle`); `api/v1beta2/defaults.go` (the defaults only the webhook applies).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import urllib3
import yaml

from dvstack.settings import Settings, load
from dvstack.spark import crd as spark_crd
from dvstack.testing.waiting import wait_for

COMMIT = "43afb8bbd32463037d8fb6e414e252c69081882b"
"""The commit the module proxy records for the v2.5.2 tag (`go mod download -json`'s Origin)."""
BINARY = "spark-operator"
IMAGE = "spark-operator"
"""The stack's image of it (`dvstack.images.build.IMAGE_COMPONENTS`)."""

RELEASE = "spark-operator"
_NAMESPACE = "spark-operator"
"""The release and its namespace, as the upstream chart's README installs it."""
WEBHOOK_NAME = "spark-operator-webhook"
"""Both webhook configurations' name: the chart's `<release>-webhook`."""
DEPLOYMENTS = ("spark-operator-controller", "spark-operator-webhook")
CRD_FILES = ("sparkoperator.k8s.io_sparkapplications.yaml",
             "sparkoperator.k8s.io_scheduledsparkapplications.yaml",
             "sparkoperator.k8s.io_sparkconnects.yaml")
"""Both processes map these kinds when they start, and exit if a CRD is missing."""
SPARK_OPERATOR_CHART = Path("charts") / "spark-operator-chart"
ENTRYPOINT = "entrypoint.sh"
INSTALL_TIMEOUT_SECONDS = 300
_WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")


# --- the binary -----------------------------------------------------------------------------

def home(settings: Settings) -> Path:
    """The pinned operator's directory in the cache (the CRD lives there too)."""
    return settings.cache_dir / f"spark-operator-{spark_crd.VERSION}"


def binary_path(settings: Settings) -> Path:
    return home(settings) / "bin" / BINARY


def build_ldflags() -> str:
    """Strip symbols and stamp the version as upstream's Makefile does (`LDFLAGS`)."""
    base = "k8s.io/component-base/version"
    return " ".join(["-s", "-w", f"-X {base}.gitVersion={spark_crd.VERSION}",
                     f"-X {base}.gitCommit={COMMIT}", f"-X {base}.gitTreeState=clean"])


def build_argv(go: str, output: Path) -> list[str]:
    """`go build` of the operator's main package, run inside the module's sources."""
    return [go, "build", "-trimpath", "-buildvcs=false", "-ldflags", build_ldflags(),
            "-o", str(output), "./cmd/operator"]


def operator_binary(settings: Settings) -> Path:
    """`spark-operator` built from the pinned module's `cmd/operator`, once; then the cached file.

    The module's go.mod pins the k8s.io staging modules with `replace` directives, which
    only a main module's go.mod may carry, so the build runs inside a writable copy of the
    module's sources (the module cache is read-only) rather than from a wrapper module."""
    built = binary_path(settings)
    if built.is_file():
        return built
    go = shutil.which("go")
    if go is None:
        raise SystemExit(f"'go' was not found on PATH: install Go >= 1.24 (Debian: golang-go) "
                         f"to build the Spark Operator {spark_crd.VERSION}")
    root = home(settings)
    root.mkdir(parents=True, exist_ok=True)
    source = spark_crd.module_dir(root)
    src = root / "src"
    if src.exists():
        _make_writable(src)
        shutil.rmtree(src)
    shutil.copytree(source, src, copy_function=shutil.copyfile)
    _make_writable(src)
    built.parent.mkdir(parents=True, exist_ok=True)
    partial = built.with_name(BINARY + ".partial")
    print(f"building the Spark Operator {spark_crd.VERSION} from the Go module proxy (first run only; "
          "takes several minutes)...", file=sys.stderr, flush=True)
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=readonly", "GO111MODULE": "on"}
    proc = subprocess.run(build_argv(go, partial), cwd=src, env=env, capture_output=True,
                          text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"building the Spark Operator {spark_crd.VERSION} failed:\n{proc.stderr}")
    # Renamed into place last, so an interrupted build is never taken for a finished one.
    partial.replace(built)
    return built


def _make_writable(tree: Path) -> None:
    """Copies of the module cache keep its read-only directory modes; make them removable."""
    for directory, _, _ in os.walk(tree):
        path = Path(directory)
        path.chmod(path.stat().st_mode | stat.S_IWUSR)


def operator_crds(settings: Settings) -> list[Path]:
    """The three CRDs the controller watches, from the pinned module, cached beside the binary."""
    first = spark_crd.sparkapplications_crd(settings)
    wanted = [home(settings) / name for name in CRD_FILES]
    missing = [path for path in wanted if not path.is_file()]
    if missing:
        source = spark_crd.module_dir(home(settings)) / spark_crd.CHART_CRDS
        for path in missing:
            partial = path.with_suffix(".partial")
            shutil.copyfile(source / path.name, partial)
            partial.replace(path)
    return [first, *(path for path in wanted if path != first)]


# --- the chart, its values and the image -----------------------------------------------------

def _from_module(settings: Settings, relative: Path, target: Path) -> Path:
    """A file or tree of the pinned module, copied once into the cache (later runs need no
    `go`); renamed into place last, so a copy cut short is never taken for a whole one."""
    if target.exists():
        return target
    source = spark_crd.module_dir(home(settings)) / relative
    if not source.exists():
        raise SystemExit(f"{spark_crd.MODULE}@{spark_crd.VERSION} has no {relative}: the pin is wrong")
    partial = target.with_name(target.name + ".partial")
    if partial.is_dir():
        _make_writable(partial)
        shutil.rmtree(partial)
    if source.is_dir():
        shutil.copytree(source, partial, copy_function=shutil.copyfile)
        _make_writable(partial)
    else:
        shutil.copyfile(source, partial)
    partial.replace(target)
    return target


def chart_dir(settings: Settings) -> Path:
    """The module's chart, as released with the operator at this version."""
    return _from_module(settings, SPARK_OPERATOR_CHART, home(settings) / "chart")


def entrypoint(settings: Settings) -> Path:
    """The module's `entrypoint.sh`, executable (module files are extracted read-only and
    without their modes)."""
    path = _from_module(settings, Path(ENTRYPOINT), home(settings) / ENTRYPOINT)
    path.chmod(0o755)
    return path


def image(settings: Settings) -> tuple[str, Path]:
    """(tag, OCI archive) of the stack's Spark Operator image, built once per content."""
    from dvstack.images import build as images

    return images.component_image(settings, IMAGE, {
        BINARY: operator_binary(settings), ENTRYPOINT: entrypoint(settings)})


def chart_values(image_tag: str, *, namespace_selector: str | None = None) -> dict[str, Any]:
    """The chart's values for the stack: its defaults but for the image (ours, never
    pulled), the namespaces it serves and the UI Service.

    `namespace_selector` (the chart's `spark.jobNamespaceSelector`, passed to the
    controller as `--namespace-selector`) with no `jobNamespaces`; the chart's default
    serves `default` only. The UI Service is off: each application's `<app>-ui-svc` takes a
    ClusterIP, and once the API server's service range (a /24 here) is spent the controller
    fails every SUBMITTED reconcile before it records RUNNING."""
    repository, tag = image_tag.rsplit(":", 1)
    registry, _, name = repository.partition("/")
    return {
        "image": {"registry": registry, "repository": name, "tag": tag,
                  "pullPolicy": "Never"},
        "controller": {"uiService": {"enable": False}},
        "spark": {"jobNamespaces": [], "jobNamespaceSelector": namespace_selector or ""},
    }


def selector_labels(selector: str) -> dict[str, str]:
    """`key=value,...` (the only selector form the stack passes) as `matchLabels`."""
    pairs = [item.split("=", 1) for item in selector.split(",") if item]
    if not pairs or any(len(pair) != 2 or not pair[0].strip() for pair in pairs):
        raise ValueError(f"namespace selector {selector!r}: use key=value[,key=value]")
    return {key.strip(): value.strip() for key, value in pairs}


def scope_webhooks(manifests: str, selector: str) -> str:
    """The chart's rendered manifests with both webhook configurations scoped to the
    namespaces `selector` matches, as the controller is (`--namespace-selector`).

    The chart scopes its webhooks by `spark.jobNamespaces` names only, so with a selector
    alone they would admit every namespace's SparkApplications and Spark pods, the
    stand-in's among them, which must never meet them. A webhook the chart already scoped
    keeps its own selector. Helm runs this as its post-renderer (`run_spark_operator`)."""
    labels = selector_labels(selector)
    documents = [d for d in yaml.safe_load_all(manifests) if d]
    for document in documents:
        if document.get("kind") not in _WEBHOOK_KINDS:
            continue
        for hook in document.get("webhooks") or []:
            hook.setdefault("namespaceSelector", {"matchLabels": dict(labels)})
    return yaml.safe_dump_all(documents, sort_keys=False)


def helm_argv(helm: Path, kubeconfig: Path, chart: Path, values_file: Path,
              namespace_selector: str | None) -> list[str]:
    """`helm upgrade --install` of the release: the stack installs the CRDs itself (the
    stand-in needs them too), and Helm waits for both Deployments to be ready."""
    argv = [str(helm), "--kubeconfig", str(kubeconfig), "upgrade", "--install", RELEASE,
            str(chart), "--namespace", _NAMESPACE, "--create-namespace", "--skip-crds",
            "--values", str(values_file), "--wait", "--timeout",
            f"{INSTALL_TIMEOUT_SECONDS}s"]
    return argv + post_renderer_flags(namespace_selector)


def post_renderer_flags(namespace_selector: str | None) -> list[str]:
    """Helm's flags that run `scope_webhooks` on what the chart renders (none without a
    selector: the chart's own scoping stands)."""
    if not namespace_selector:
        return []
    return ["--post-renderer", sys.executable,
            *(a for arg in ("-m", "dvstack.spark.kubeflow_operator", "post-render",
                            f"--namespace-selector={namespace_selector}")
              for a in ("--post-renderer-args", arg))]


def ca_bundles_set(configurations: Iterable[Mapping[str, Any]]) -> bool:
    """Every webhook of both configurations carries the CA the webhook made: until then the
    API server cannot call it, and every SparkApplication write fails."""
    found = list(configurations)
    return len(found) == len(_WEBHOOK_KINDS) and all(
        (hook.get("clientConfig") or {}).get("caBundle")
        for configuration in found for hook in configuration.get("webhooks") or [])


# --- start and stop -------------------------------------------------------------------------

def start_spark_operator(settings: Settings, helm: Path, image_tag: str,
          apply_crds: Callable[[Any, list[Path]], None], *,
          namespace_selector: str | None = None) -> None:
    """Install (or upgrade to) the release and wait until its webhook can be called. With a
    `namespace_selector`, both controller and webhooks serve only the namespaces whose
    labels match it."""
    from kubernetes import client, config

    api_client = config.new_client_from_config(config_file=str(settings.kubeconfig))
    apply_crds(api_client, operator_crds(settings))
    with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="spark-operator-") as values:
        json.dump(chart_values(image_tag, namespace_selector=namespace_selector), values)
        values.flush()
        proc = subprocess.run(
            helm_argv(helm, settings.kubeconfig, chart_dir(settings), Path(values.name),
                      namespace_selector),
            capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"helm could not install the Spark Operator {spark_crd.VERSION} "
                         f"({proc.returncode}):\n{proc.stdout}{proc.stderr}\n"
                         f"its pods: kubectl -n {_NAMESPACE} get pods; their logs: "
                         f"kubectl -n {_NAMESPACE} logs deploy/{DEPLOYMENTS[0]}")
    admission = client.AdmissionregistrationV1Api(api_client)

    def configurations() -> list[dict[str, Any]]:
        found = []
        for read in (admission.read_mutating_webhook_configuration,
                     admission.read_validating_webhook_configuration):
            try:
                found.append(api_client.sanitize_for_serialization(read(WEBHOOK_NAME)))
            except client.exceptions.ApiException as exc:
                if exc.status != 404:
                    raise
        return found

    wait_for(lambda: ca_bundles_set(configurations()), timeout=120, interval=0.5,
             what="the Spark Operator's webhook to put its CA into both configurations")


def deployment_states(settings: Settings) -> dict[str, tuple[int, int] | None]:
    """(ready, wanted) replicas of each of the release's Deployments, None for one not
    there, for `dvstack status` (they are pods, not processes of the stack)."""
    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException

    apps = client.AppsV1Api(config.new_client_from_config(config_file=str(settings.kubeconfig)))
    states: dict[str, tuple[int, int] | None] = {}
    for name in DEPLOYMENTS:
        try:
            deployment = apps.read_namespaced_deployment(name, _NAMESPACE)
        except ApiException as exc:
            if exc.status != 404:
                raise
            states[name] = None
            continue
        states[name] = (deployment.status.ready_replicas or 0, deployment.spec.replicas or 0)
    return states


def stop_spark_operator(settings: Settings, helm: Path | None) -> None:
    """Uninstall the release while the API server and the node still run: its webhook
    configurations (`failurePolicy: Fail`) would otherwise outlive the webhook and refuse
    every SparkApplication write of a later stack. Nothing to do without a kubeconfig or
    once the API server is gone."""
    if helm is None or not settings.kubeconfig.is_file():
        return
    subprocess.run([str(helm), "--kubeconfig", str(settings.kubeconfig), "uninstall", RELEASE,
                    "--namespace", _NAMESPACE, "--ignore-not-found", "--wait", "--timeout",
                    "120s"], capture_output=True, text=True, check=False)
    remove_webhooks(settings)


def remove_webhooks(settings: Settings) -> None:
    """Both webhook configurations gone, whatever Helm managed (it may have found the
    release half installed)."""
    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException

    admission = client.AdmissionregistrationV1Api(
        config.new_client_from_config(config_file=str(settings.kubeconfig)))
    for delete in (admission.delete_mutating_webhook_configuration,
                   admission.delete_validating_webhook_configuration):
        try:
            delete(WEBHOOK_NAME)
        except ApiException as exc:
            if exc.status != 404:
                raise
        except (OSError, urllib3.exceptions.HTTPError):
            return  # the API server is down already: nothing can reach them


def run_spark_operator(argv: list[str] | None = None) -> None:
    """`python -m dvstack.spark.kubeflow_operator [binary|image]`: build (or find) the binary or the
    image and print it; `post-render --namespace-selector=S`: Helm's post-renderer."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m dvstack.spark.kubeflow_operator")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("binary", help="the spark-operator binary (the default)")
    sub.add_parser("image", help="the stack's Spark Operator image and its archive")
    post = sub.add_parser("post-render", help="scope the chart's webhooks (stdin to stdout)")
    post.add_argument("--namespace-selector", required=True)
    args = parser.parse_args(argv)
    if args.command == "post-render":
        sys.stdout.write(scope_webhooks(sys.stdin.read(), args.namespace_selector))
    elif args.command == "image":
        print("\t".join(str(part) for part in image(load())))
    else:
        print(operator_binary(load()))


if __name__ == "__main__":
    run_spark_operator()
