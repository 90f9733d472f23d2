"""The real Kubeflow Spark Operator v2.5.2, built from its Go module and run outside any pod.

`operator_binary` builds `cmd/operator` once into `<cache>/spark-operator-v2.5.2/bin/`;
the rest are the argv, environment and Kubernetes objects of its two processes. Read in
github.com/kubeflow/spark-operator/v2@v2.5.2 (module-relative paths):

Flags (`cmd/operator/{controller,webhook}/start.go`). Both: `--kubeconfig` (controller-runtime;
without it $KUBECONFIG, in-cluster, ~/.kube/config), `--namespaces` (none = all),
`--leader-election` (default off), `--health-probe-bind-address` (both default :8081),
`--metrics-bind-address` (0 = off), `--zap-*`. Controller: `--controller-threads`,
`--enable-ui-service` (default on: a ClusterIP Service per application),
`--driver-pod-creation-grace-period` (10s), `--workqueue-ratelimiter-*`. Webhook:
`--webhook-port` (9443; every interface, no host flag), `--webhook-cert-dir`,
`--webhook-secret-name/-namespace`, `--webhook-svc-name/-namespace`,
`--mutating-webhook-name`, `--validating-webhook-name`. Both exit at once unless the CRDs
are installed (their caches map SparkApplication, ScheduledSparkApplication, SparkConnect).

Controller environment (`internal/controller/sparkapplication/submission.go`,
`pkg/util/util.go`): it runs `$SPARK_HOME/bin/spark-submit` (never PATH) with its own
environment, `--master k8s://https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT`
(`GetMasterURL`: unset, every submission is SUBMISSION_FAILED), so spark-submit's fabric8
client needs `KUBECONFIG` for credentials. Pod templates go to `/tmp/spark/<submissionID>/`.

Webhook certificates (`pkg/certificate/`, `internal/controller/*webhookconfiguration/`): it
creates or reuses the Secret `--webhook-secret-name` (keys ca-cert.pem, ca-key.pem,
server-cert.pem, server-key.pem; its namespace must exist) holding a self-signed CA and a
server certificate for DNS `localhost` and `<svc>.<svc-ns>.svc` only, writes tls.crt/tls.key
into the cert dir, and sets `caBundle` on every webhook of the two configurations named by
the flags, which it never creates (the chart does) and whose `clientConfig` it never reads:
`url: https://localhost:<port>/<path>` therefore works outside a pod.

Fields our SparkApplications use (type, mode, image, mainApplicationFile, arguments,
sparkConf, hadoopConf, deps, driver/executor cores, memory, instances, labels,
serviceAccount, secrets) all become spark-submit `--conf`s; the pod webhook
(`internal/webhook/sparkpod_defaulter.go`) is needed only for env, envFrom, volumes,
configMaps, affinity, tolerations, nodeSelector, securityContext, sidecars and the like.
The application defaulter (`api/v1beta2/defaults.go`) sets `onSubmissionFailureRetryInterval`
(5s), without which an `Always` application stays SUBMISSION_FAILED with a reconcile error.

States and restart policy: as `dvstack.spark_app_states` models them (same sources). RBAC
(chart `templates/{controller,webhook,spark}/rbac.yaml`): controller - pods, configmaps,
services (create/update/delete; spark-submit creates the driver pod, its ConfigMap and
Service with the controller's identity), events, ingresses, sparkapplications (+/status,
/finalizers), scheduledsparkapplications, sparkconnects (read, /status); webhook - its
Secret, list/watch pods and sparkapplications, get/update its two webhook configurations;
driver service account - pods, services, configmaps, persistentvolumeclaims in its namespace.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import urllib3

from dvstack import processes, spark_crd
from dvstack.settings import Settings, env_port, load
from dvstack.waiting import http_ok, wait_for

VERSION = spark_crd.VERSION
COMMIT = "43afb8bbd32463037d8fb6e414e252c69081882b"
"""The commit the module proxy records for the v2.5.2 tag (`go mod download -json`'s Origin)."""
BINARY = "spark-operator"

CONTROLLER = "spark-operator-controller"
"""Process name (pid and log files) of `spark-operator controller start`."""
WEBHOOK = "spark-operator-webhook"
"""Process name of `spark-operator webhook start`."""

NAMESPACE = "spark-operator"
"""Where the webhook keeps its certificate Secret (the chart's release namespace)."""
WEBHOOK_NAME = "spark-operator-webhook"
"""Both webhook configurations' name: the chart's `<release>-webhook` for release spark-operator."""
WEBHOOK_SECRET = "spark-operator-webhook-certs"
WEBHOOK_SERVICE = "spark-operator-webhook-svc"
"""Only names the certificate (`<svc>.<ns>.svc`); no Service exists, the API server uses a URL."""
WEBHOOK_HOST = "localhost"
"""The only host name in the webhook's certificate that reaches a process on this machine."""
CA_CERT_KEY = "ca-cert.pem"
WEBHOOK_SECRET_KEYS = ("ca-key.pem", CA_CERT_KEY, "server-key.pem", "server-cert.pem")
LAUNCHED_BY_LABEL = "sparkoperator.k8s.io/launched-by-spark-operator"
CRD_FILES = ("sparkoperator.k8s.io_sparkapplications.yaml",
             "sparkoperator.k8s.io_scheduledsparkapplications.yaml",
             "sparkoperator.k8s.io_sparkconnects.yaml")
"""Both processes map these kinds when they start, and exit if a CRD is missing."""

# What the chart's webhooks admit, in its order: (apiGroup, apiVersion, resource[, operations]).
_POD_RULE = ("", "v1", "pods", ("CREATE",))
_CR_RULES = (("sparkoperator.k8s.io", "v1beta2", "sparkapplications"),
             ("sparkoperator.k8s.io", "v1beta2", "scheduledsparkapplications"),
             ("sparkoperator.k8s.io", "v1alpha1", "sparkconnects"))


@dataclass(frozen=True)
class Ports:
    """Loopback ports of the two processes (env DV_SPARK_*_PORT overrides, see `ports`)."""

    webhook: int = 16451
    webhook_health: int = 16452
    controller_health: int = 16453
    controller_metrics: int | None = None
    """None: no metrics server (the binary's default)."""


def ports() -> Ports:
    """The defaults, each overridable as the stack's other ports are."""
    defaults = Ports()
    metrics = os.environ.get("DV_SPARK_CONTROLLER_METRICS_PORT")
    return Ports(
        webhook=env_port("DV_SPARK_WEBHOOK_PORT", defaults.webhook),
        webhook_health=env_port("DV_SPARK_WEBHOOK_HEALTH_PORT", defaults.webhook_health),
        controller_health=env_port("DV_SPARK_CONTROLLER_HEALTH_PORT", defaults.controller_health),
        controller_metrics=(env_port("DV_SPARK_CONTROLLER_METRICS_PORT", 0)
                            if metrics is not None else None),
    )


# --- the binary -----------------------------------------------------------------------------

def home(settings: Settings) -> Path:
    """The pinned operator's directory in the cache (the CRD lives there too)."""
    return settings.cache_dir / f"spark-operator-{VERSION}"


def binary_path(settings: Settings) -> Path:
    return home(settings) / "bin" / BINARY


def build_ldflags() -> str:
    """Strip symbols and stamp the version as upstream's Makefile does (`LDFLAGS`)."""
    base = "k8s.io/component-base/version"
    return " ".join(["-s", "-w", f"-X {base}.gitVersion={VERSION}",
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
                         f"to build the Spark Operator {VERSION}")
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
    print(f"building the Spark Operator {VERSION} from the Go module proxy (first run only; "
          "takes several minutes)...", file=sys.stderr, flush=True)
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=readonly", "GO111MODULE": "on"}
    proc = subprocess.run(build_argv(go, partial), cwd=src, env=env, capture_output=True,
                          text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"building the Spark Operator {VERSION} failed:\n{proc.stderr}")
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


def spark_home_for(spark_submit: Path) -> Path:
    """The SPARK_HOME whose `bin/spark-submit` the controller runs, from a spark-submit path.

    A Spark distribution's `bin/spark-submit` gives its parent; pip's copy in a virtualenv's
    bin/ gives the pyspark package, as its own `find_spark_home.py` resolves it."""
    bin_dir = spark_submit.parent
    finder = bin_dir / "find_spark_home.py"
    if finder.is_file():
        python = bin_dir / "python"
        env = {k: v for k, v in os.environ.items() if k != "SPARK_HOME"}
        proc = subprocess.run([str(python if python.is_file() else sys.executable), str(finder)],
                              capture_output=True, text=True, env=env, check=False)
        found = Path(proc.stdout.strip()) if proc.returncode == 0 else None
    else:
        found = bin_dir.parent
    if found is None or not (found / "bin" / "spark-submit").is_file():
        raise SystemExit(f"no SPARK_HOME with bin/spark-submit found for {spark_submit}")
    return found


# --- processes ------------------------------------------------------------------------------

def webhook_cert_dir(settings: Settings) -> Path:
    """Where `webhook start` writes tls.crt/tls.key (its default is under /etc)."""
    return settings.state_dir / "spark-operator" / "webhook-certs"


def _common_flags(settings: Settings, health_port: int,
                  namespaces: Iterable[str]) -> list[str]:
    flags = [f"--kubeconfig={settings.kubeconfig}", "--leader-election=false",
             f"--health-probe-bind-address=127.0.0.1:{health_port}",
             "--zap-log-level=info", "--zap-encoder=console"]
    chosen = sorted(set(namespaces))
    if chosen:
        flags.append(f"--namespaces={','.join(chosen)}")
    return flags


def controller_argv(settings: Settings, binary: Path, port_set: Ports, *,
                    namespaces: Iterable[str] = (), namespace_selector: str | None = None,
                    ui_service: bool = False, threads: int = 10) -> list[str]:
    """`spark-operator controller start` for the stack.

    `ui_service` is off by default: each application's `<app>-ui-svc` takes a ClusterIP, and
    once the API server's service range (a /24 here) is spent the controller fails every
    SUBMITTED reconcile before it records RUNNING."""
    metrics = port_set.controller_metrics
    return [str(binary), "controller", "start",
            *_common_flags(settings, port_set.controller_health, namespaces),
            *([f"--namespace-selector={namespace_selector}"] if namespace_selector else []),
            f"--controller-threads={threads}",
            f"--enable-ui-service={str(ui_service).lower()}",
            # The chart's values (the binary's own are 10, 100 and no cap on the backoff).
            "--workqueue-ratelimiter-bucket-qps=50", "--workqueue-ratelimiter-bucket-size=500",
            "--workqueue-ratelimiter-max-delay=6h",
            *([f"--metrics-bind-address=127.0.0.1:{metrics}", "--enable-metrics=true"]
              if metrics else ["--metrics-bind-address=0"])]


def controller_env(settings: Settings, spark_home: Path) -> dict[str, str]:
    """What the controller and the spark-submit it runs need on top of the stack's environment."""
    return {
        "SPARK_HOME": str(spark_home),
        # GetMasterURL: spark-submit --master k8s://https://HOST:PORT (a pod gets these
        # from the kubelet); the API server's certificate names the stack's address.
        "KUBERNETES_SERVICE_HOST": settings.host,
        "KUBERNETES_SERVICE_PORT": str(settings.apiserver_port),
        # spark-submit's fabric8 client reads credentials and CA from here, not from a flag.
        "KUBECONFIG": str(settings.kubeconfig),
    }


def webhook_argv(settings: Settings, binary: Path, port_set: Ports, *,
                 namespaces: Iterable[str] = ()) -> list[str]:
    """`spark-operator webhook start` for the stack (certificates in the state directory)."""
    return [str(binary), "webhook", "start",
            *_common_flags(settings, port_set.webhook_health, namespaces),
            f"--webhook-port={port_set.webhook}",
            f"--webhook-cert-dir={webhook_cert_dir(settings)}",
            f"--webhook-secret-name={WEBHOOK_SECRET}", f"--webhook-secret-namespace={NAMESPACE}",
            f"--webhook-svc-name={WEBHOOK_SERVICE}", f"--webhook-svc-namespace={NAMESPACE}",
            f"--mutating-webhook-name={WEBHOOK_NAME}",
            f"--validating-webhook-name={WEBHOOK_NAME}",
            "--metrics-bind-address=0"]


def webhook_env(settings: Settings) -> dict[str, str]:
    return {"KUBECONFIG": str(settings.kubeconfig)}


def readyz_url(health_port: int) -> str:
    """controller-runtime's readiness endpoint (the webhook's: its TLS server is serving)."""
    return f"http://127.0.0.1:{health_port}/readyz"


# --- Kubernetes objects ---------------------------------------------------------------------

def namespace_object() -> dict[str, Any]:
    """The webhook's Secret lives here; it must exist before `webhook start`."""
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}


def ca_bundle(secret: Mapping[str, Any]) -> str | None:
    """The webhook CA as a `caBundle` value, once the webhook has filled its Secret.

    The Secret's `data` values are base64 of PEM, which is what `caBundle` holds in JSON."""
    data = secret.get("data") or {}
    if not all(data.get(key) for key in WEBHOOK_SECRET_KEYS):
        return None
    return str(data[CA_CERT_KEY])


def _webhook(path: str, group: str, version: str, resource: str,
             operations: tuple[str, ...], port: int, bundle: str | None,
             namespaces: Iterable[str], selector: str | None) -> dict[str, Any]:
    client: dict[str, Any] = {"url": f"https://{WEBHOOK_HOST}:{port}{path}"}
    if bundle:
        client["caBundle"] = bundle
    hook: dict[str, Any] = {
        "name": f"{path.lstrip('/')}.sparkoperator.k8s.io",
        "admissionReviewVersions": ["v1"],
        "clientConfig": client,
        "sideEffects": "None",
        "failurePolicy": "Fail",
        "rules": [{"apiGroups": [group], "apiVersions": [version], "resources": [resource],
                   "operations": list(operations)}],
        "timeoutSeconds": 10,
    }
    chosen = sorted(set(namespaces))
    if chosen:
        hook["namespaceSelector"] = {"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": chosen}]}
    elif selector:
        hook["namespaceSelector"] = {"matchLabels": _labels(selector)}
    if resource == "pods":  # Spark's pods only, by the label spark-submit gives them
        hook["objectSelector"] = {"matchLabels": {LAUNCHED_BY_LABEL: "true"}}
    return hook


def _labels(selector: str) -> dict[str, str]:
    """`key=value,...` (the only selector form the stack passes) as `matchLabels`."""
    pairs = [item.split("=", 1) for item in selector.split(",") if item]
    if any(len(pair) != 2 for pair in pairs):
        raise ValueError(f"namespace selector {selector!r}: use key=value[,key=value]")
    return {key.strip(): value.strip() for key, value in pairs}


def _config(kind: str, webhooks: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
            "metadata": {"name": WEBHOOK_NAME,
                         "labels": {"app.kubernetes.io/name": "spark-operator",
                                    "app.kubernetes.io/component": "webhook"}},
            "webhooks": webhooks}


def mutating_webhook_configuration(port: int, bundle: str | None = None, *,
                                   namespaces: Iterable[str] = (),
                                   selector: str | None = None) -> dict[str, Any]:
    """The chart's MutatingWebhookConfiguration with a loopback URL in place of its Service.

    The chart scopes it by `spark.jobNamespaces` only; with a `selector` (the controller's
    `--namespace-selector`) the stack scopes it by the same labels, so the namespaces the
    stand-in serves never meet the real webhook."""
    group, version, resource, operations = _POD_RULE
    names = list(namespaces)
    hooks = [_webhook("/mutate--v1-pod", group, version, resource, operations, port,
                      bundle, names, selector)]
    for group, version, resource in _CR_RULES:
        path = f"/mutate-{group.replace('.', '-')}-{version}-{resource[:-1]}"
        hooks.append(_webhook(path, group, version, resource, ("CREATE", "UPDATE"),
                              port, bundle, names, selector))
    return _config("MutatingWebhookConfiguration", hooks)


def validating_webhook_configuration(port: int, bundle: str | None = None, *,
                                     namespaces: Iterable[str] = (),
                                     selector: str | None = None) -> dict[str, Any]:
    """The chart's ValidatingWebhookConfiguration with a loopback URL in place of its Service
    (scoped as `mutating_webhook_configuration` is)."""
    names = list(namespaces)
    hooks = []
    for group, version, resource in _CR_RULES:
        path = f"/validate-{group.replace('.', '-')}-{version}-{resource[:-1]}"
        hooks.append(_webhook(path, group, version, resource, ("CREATE", "UPDATE"),
                              port, bundle, names, selector))
    return _config("ValidatingWebhookConfiguration", hooks)


# --- start and stop -------------------------------------------------------------------------

def start(settings: Settings, spark_submit: Path,
          apply_crds: Callable[[Any, list[Path]], None], *,
          namespace_selector: str | None = None) -> None:
    """The webhook first, its CA in both webhook configurations, then the controller: no
    SparkApplication write meets a webhook the API server cannot call yet. With a
    `namespace_selector`, both serve only the namespaces whose labels match it."""
    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException

    api_client = config.new_client_from_config(config_file=str(settings.kubeconfig))
    binary = operator_binary(settings)
    apply_crds(api_client, operator_crds(settings))
    core = client.CoreV1Api(api_client)
    try:
        core.create_namespace(namespace_object())
    except ApiException as exc:
        if exc.status != 409:
            raise
    port_set = ports()
    if not processes.running(settings, WEBHOOK):
        processes.start(settings, WEBHOOK, webhook_argv(settings, binary, port_set),
                        env=webhook_env(settings))
    log = processes.log_file(settings, WEBHOOK)

    def bundle() -> str | None:
        if not http_ok(readyz_url(port_set.webhook_health)):
            return None
        try:
            secret = core.read_namespaced_secret(WEBHOOK_SECRET, NAMESPACE)
        except ApiException:
            return None
        return ca_bundle(api_client.sanitize_for_serialization(secret))

    wait_for(lambda: bundle() is not None, timeout=120,
             what="the Spark Operator's webhook to serve with its certificate",
             on_timeout=lambda: processes.tail(log))
    ca = bundle()
    admission = client.AdmissionregistrationV1Api(api_client)
    for body, read, create, replace in (
        (mutating_webhook_configuration(port_set.webhook, ca, selector=namespace_selector),
         admission.read_mutating_webhook_configuration,
         admission.create_mutating_webhook_configuration,
         admission.replace_mutating_webhook_configuration),
        (validating_webhook_configuration(port_set.webhook, ca, selector=namespace_selector),
         admission.read_validating_webhook_configuration,
         admission.create_validating_webhook_configuration,
         admission.replace_validating_webhook_configuration),
    ):
        try:
            current = read(WEBHOOK_NAME)
        except ApiException as exc:
            if exc.status != 404:
                raise
            create(body)
        else:
            body["metadata"]["resourceVersion"] = current.metadata.resource_version
            replace(WEBHOOK_NAME, body)
    if not processes.running(settings, CONTROLLER):
        spark_home = spark_home_for(spark_submit)
        processes.start(settings, CONTROLLER, controller_argv(
            settings, binary, port_set, namespace_selector=namespace_selector),
                        env=controller_env(settings, spark_home))
    wait_for(lambda: http_ok(readyz_url(port_set.controller_health)), timeout=120,
             what="the Spark Operator's controller to be ready",
             on_timeout=lambda: processes.tail(processes.log_file(settings, CONTROLLER)))


def remove_webhooks(settings: Settings) -> None:
    """Both webhook configurations go before the webhook does: with `failurePolicy: Fail`
    they would refuse every SparkApplication write once nothing answers them."""
    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException

    if not settings.kubeconfig.is_file():
        return
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


def stop(settings: Settings) -> None:
    """Nothing to do for a stack that runs the stand-in (no webhook of ours is configured)."""
    if not (processes.running(settings, WEBHOOK) or processes.running(settings, CONTROLLER)):
        return
    processes.stop(settings, CONTROLLER)
    remove_webhooks(settings)
    processes.stop(settings, WEBHOOK)


def main() -> None:
    """`python -m dvstack.spark_operator`: build (or find) the binary and print its path."""
    print(operator_binary(load()))


if __name__ == "__main__":
    main()
