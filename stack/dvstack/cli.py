"""`python -m dvstack up|down|status|env|restart|test`: the local stack's entry points.

`up` is idempotent: a component already running is reused, not restarted.
`test` brings the stack up, runs pytest, and takes down what it started.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import yaml

from dvstack import artefacts, processes
from dvstack.demo import sample
from dvstack.helm import cached_helm, helm_binary
from dvstack.node import daemons as node
from dvstack.node import host as node_host
from dvstack.node import support as node_support
from dvstack.services import (
    kafka_broker,
    kafka_connect,
    kube_api,
    opensearch_server,
    postgres_server,
    restarts,
    s3_store,
    schema_registry,
)
from dvstack.settings import AUTO, Settings, load
from dvstack.spark import crd as spark_crd
from dvstack.spark import jvm as spark_jvm
from dvstack.spark import kubeflow_operator as spark_operator
from dvstack.testing import phases as test_phases
from dvstack.testing.waiting import wait_for

COMPONENTS = ("postgres", "etcd", "kube-apiserver", "kube-controller-manager", "kafka",
              kafka_connect.CONNECT_NAME, s3_store.S3_NAME, opensearch_server.OPENSEARCH_NAME, schema_registry.REGISTRY_NAME,
              "spark-executor", *node.DAEMONS)
SPARK_EXECUTOR = "spark-executor"
# The components only the node's mode runs (the stand-in runs in both, for speed); the
# Spark Operator runs as pods on the node, installed by its chart.
_NODE_ONLY = frozenset(node.DAEMONS)
# Where the Spark job image keeps the project; the executor maps it to this checkout.
IMAGE_APP_ROOT = "/opt/derived-views"


def _install_crds(settings: Settings) -> None:
    """The CRDs of what the stack stands in for: the real, pinned Spark Operator CRD."""
    from kubernetes import config

    api_client = config.new_client_from_config(config_file=str(settings.kubeconfig))
    apply_crds(api_client, [spark_crd.sparkapplications_crd(settings)])


def apply_crds(api_client: Any, paths: list[Path]) -> None:
    """Create or replace CRDs from YAML files and wait until the API server serves them."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    ext = client.ApiextensionsV1Api(api_client)
    names = []
    for path in paths:
        body = yaml.safe_load(path.read_text())
        name = body["metadata"]["name"]
        names.append(name)
        # Test workers apply the same CRDs at the same moment: a create that lost the race
        # (409 AlreadyExists) or a replace of a version another worker just replaced
        # (409 Conflict) reads again and retries.
        for attempt in range(5):
            try:
                try:
                    current = ext.read_custom_resource_definition(name)
                except ApiException as exc:
                    if exc.status != 404:
                        raise
                    body["metadata"].pop("resourceVersion", None)
                    ext.create_custom_resource_definition(body)
                else:
                    body["metadata"]["resourceVersion"] = current.metadata.resource_version
                    ext.replace_custom_resource_definition(name, body)
                break
            except ApiException as exc:
                if exc.status != 409 or attempt == 4:
                    raise

    def established() -> bool:
        for name in names:
            conds = ext.read_custom_resource_definition(name).status.conditions or []
            if not any(c.type == "Established" and c.status == "True" for c in conds):
                return False
        return True

    wait_for(established, timeout=60, what=f"CRDs {', '.join(names)} to be established")


def _spark_submit() -> Path:
    spark_submit = Path(sys.executable).parent / "spark-submit"
    if not spark_submit.is_file():
        raise SystemExit(f"spark-submit not found next to {sys.executable}: install the project "
                         "with its dev extras (make setup) so PySpark is present")
    return spark_submit


def _start_executor(settings: Settings, spark_submit: Path, jars: list[Path],
                    java_options: str) -> None:
    if processes.running(settings, SPARK_EXECUTOR):
        return
    processes.start(settings, SPARK_EXECUTOR, [
        sys.executable, "-m", "dvstack.spark.stand_in",
        "--kubeconfig", str(settings.kubeconfig),
        "--spark-submit", str(spark_submit),
        "--jars", ",".join(str(j) for j in jars),
        "--logs-dir", str(settings.logs_dir / "spark"),
        "--work-dir", str(settings.state_dir / "spark"),
        "--path-map", f"{IMAGE_APP_ROOT}={settings.repo}",
        "--python", sys.executable,
        # beside the node, the namespaces the real Spark Operator serves are not the stand-in's
        *(["--skip-namespaces-labelled", node_support.NAMESPACE_SELECTOR]
          if settings.node else []),
    ], env={"PYTHONUNBUFFERED": "1", "SPARK_SUBMIT_OPTS": java_options})
    log = processes.log_file(settings, SPARK_EXECUTOR)
    wait_for(lambda: "executor (stand-in for the Spark Operator) started" in log.read_text(),
             timeout=60, what="the local SparkApplication executor to start",
             on_timeout=lambda: processes.tail(log))


def _check_ports(settings: Settings) -> None:
    """A port taken by something else gives a clear error, not a daemon's log line."""
    import socket

    wanted = {"postgres": [settings.pg_port], "etcd": [settings.etcd_port, settings.etcd_peer_port],
              "kube-apiserver": [settings.apiserver_port],
              "kube-controller-manager": [settings.controller_manager_port],
              "kafka": [settings.kafka_port, settings.kafka_controller_port,
                        settings.kafka_sasl_port],
              kafka_connect.CONNECT_NAME: [settings.connect_port], s3_store.S3_NAME: [settings.s3_port],
              opensearch_server.OPENSEARCH_NAME: [settings.opensearch_port,
                                       settings.opensearch_transport_port],
              schema_registry.REGISTRY_NAME: [settings.schema_registry_port]}
    for name, ports in wanted.items():
        ours = (postgres_server.running_pid(settings) if name == "postgres"
                else processes.running(settings, name))
        if ours:
            continue
        for port in ports:
            with socket.socket() as sock:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    sock.bind((settings.host, port))
                except OSError:
                    raise SystemExit(
                        f"port {port} (for {name}) is already in use by another process: stop it "
                        "or choose other ports with DV_*_PORT (see README)") from None


def up(settings: Settings) -> dict[str, Any]:
    t0 = time.monotonic()
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    _check_mode(settings)
    if settings.node:
        node.prepare_host(settings)  # its packages; the node address before anything binds it
    bins = artefacts.kube_binaries(settings)
    node_builds = _NodeBuilds(settings) if settings.node else None
    kafka_libs = artefacts.kafka_libs(settings)
    connect_libs = artefacts.kafka_connect_libs(settings)
    spark_jars = (artefacts.spark_kafka_jars(settings) + artefacts.spark_s3_jars(settings)
                  + artefacts.spark_avro_jars(settings))
    s3proxy_jar = artefacts.s3proxy_jar(settings)
    opensearch_home = artefacts.opensearch_home(settings)
    registry_home = artefacts.apicurio_registry_home(settings)
    spark_submit = _spark_submit()
    java_options = spark_jvm.driver_java_options(
        spark_jvm.ensure_archive(settings, spark_submit, spark_jars))
    t_artefacts = time.monotonic() - t0
    t1 = time.monotonic()
    _check_ports(settings)
    # Launched first and awaited last: their JVMs boot while the others start.
    opensearch_server.start_opensearch(settings, opensearch_home, wait=False)
    schema_registry.start_registry(settings, registry_home, wait=False)
    postgres_server.start_postgres(settings)
    kube_api.start_kube_api(settings, bins)
    _install_crds(settings)
    kafka_broker.start_kafka(settings, kafka_libs)
    kafka_connect.start_connect(settings, connect_libs)
    s3_store.start_s3(settings, s3proxy_jar)
    node_info: dict[str, Any] = {}
    if node_builds is not None:
        node_builds.wait()
        node.start_node(settings)
        node_info = _node_images(settings)
        spark_operator.start_spark_operator(settings, helm_binary(settings),
                             node_info["images"][spark_operator.IMAGE], apply_crds,
                             namespace_selector=node_support.NAMESPACE_SELECTOR)
    elif os.environ.get("DV_NODE", "").strip().lower() == AUTO:
        reason = (node_support.auto_reason()
                  or "the stack runs without it already (`make stack-down` first)")
        print(f"no real node: {reason}; the SparkApplication stand-in runs every job",
              file=sys.stderr)
    _start_executor(settings, spark_submit, spark_jars, java_options)
    opensearch_server.wait_opensearch(settings)
    schema_registry.wait_registry(settings)
    info: dict[str, Any] = {
        "node": settings.node,
        "kubeconfig": str(settings.kubeconfig),
        "apiserver": kube_api.server_url(settings),
        "kafka_bootstrap": kafka_broker.bootstrap(settings),
        "kafka_sasl": kafka_broker.sasl_info(settings),
        "pg_dsn": postgres_server.conninfo(settings),
        "pg": {"host": settings.host, "port": settings.pg_port,
               "database": postgres_server.DATABASE, "user": postgres_server.SUPERUSER,
               "password": postgres_server.password(settings)},
        "kafka_connect": kafka_connect.rest_url(settings),
        "s3": s3_store.info(settings),
        "opensearch": opensearch_server.opensearch_url(settings),
        "schema_registry": schema_registry.registry_url(settings),
        "schema_registry_url": schema_registry.registry_url(settings),  # the tests' Stack field
        "spark_submit": str(spark_submit),
        "spark_jars": [str(j) for j in spark_jars],
        "spark_java_options": java_options,
        "image_app_root": IMAGE_APP_ROOT,
        "repo": str(settings.repo),
        "state_dir": str(settings.state_dir),
        "logs_dir": str(settings.logs_dir),
        "cache_dir": str(settings.cache_dir),
        **node_info,
    }
    settings.stack_file.write_text(json.dumps(info, indent=2))
    settings.stack_file.chmod(0o600)
    print(f"stack is up (artefacts {t_artefacts:.1f}s, services {time.monotonic() - t1:.1f}s); "
          f"logs in {settings.logs_dir}", flush=True)
    print(f"  export KUBECONFIG={settings.kubeconfig}")
    return info


class _NodeBuilds:
    """The node's cold builds, begun while the stack's artefacts download and its services
    start: the Go builds (kubelet and co., CoreDNS, the Spark Operator) take both cores,
    the images' Debian bases mostly wait on the package mirror, so the two run side by side."""

    def __init__(self, settings: Settings) -> None:
        from concurrent.futures import ThreadPoolExecutor

        from dvstack.images import build as images

        self.pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="node-build")
        self.futures: list[Future[Any]] = [
            self.pool.submit(lambda: (node.binaries(settings), helm_binary(settings),
                                      spark_operator.image(settings))),
            self.pool.submit(images.build_images, settings),
        ]

    def wait(self) -> None:
        """Both done; the first failure raised here, on the caller's thread."""
        try:
            for future in self.futures:
                future.result()
        finally:
            self.pool.shutdown(wait=True, cancel_futures=True)


def _node_images(settings: Settings) -> dict[str, Any]:
    """The project's two images, built from its Dockerfiles (cached by content), and the
    Spark Operator's, imported into the node; and the job template a two-core node can
    schedule."""
    from dvstack.images import build as images

    built = {**images.build_images(settings),
             spark_operator.IMAGE: spark_operator.image(settings)}
    for tag, archive in built.values():
        node.import_image(settings, tag, archive)
    template = yaml.safe_load((settings.repo / "spark_templates" / "sparkapplication.yaml")
                              .read_text())
    # A pod requests its Spark cores whole by default: two views' drivers and executors
    # (a migration) would ask four CPUs of this two-core node and stay Pending.
    for role in ("driver", "executor"):
        template["spec"].setdefault(role, {})["coreRequest"] = "250m"
    path = node._layout(settings).root / "sparkapplication.yaml"
    path.write_text(yaml.safe_dump(template, sort_keys=False))
    return {"images": {name: tag for name, (tag, _) in built.items()},
            "spark_template": str(path)}


def _check_mode(settings: Settings) -> None:
    """A stack that runs keeps the mode it started in: the API server's address, Kafka's
    listeners and who runs SparkApplications all follow it."""
    if not settings.stack_file.is_file() or not any_running(settings):
        return
    running_node = bool(json.loads(settings.stack_file.read_text()).get("node", False))
    if running_node != settings.node:
        raise SystemExit(
            f"the stack runs {'with' if running_node else 'without'} the real node, but "
            f"DV_NODE={'1' if settings.node else '0'} asks for the other: run "
            "`make stack-down` first")


def down(settings: Settings) -> list[str]:
    """Stop every component; returns what the node left changed on the host (printed)."""
    processes.stop(settings, SPARK_EXECUTOR)
    if settings.node:
        spark_operator.stop_spark_operator(settings, cached_helm(settings))
    host_changes = node.stop_node(settings)
    opensearch_server.stop_opensearch(settings)
    schema_registry.stop_registry(settings)
    s3_store.stop_s3(settings)
    kafka_connect.stop_connect(settings)
    kafka_broker.stop_kafka(settings)
    kube_api.stop_kube_api(settings)
    postgres_server.stop_postgres(settings)
    settings.stack_file.unlink(missing_ok=True)
    for change in host_changes:
        print(f"  the node left on the host: {change}")
    print("stack is down")
    return host_changes


def components(settings: Settings) -> tuple[str, ...]:
    """The components of the stack's mode: with the node, its daemons and the Spark
    Operator too."""
    return tuple(c for c in COMPONENTS if settings.node or c not in _NODE_ONLY)


def status(settings: Settings) -> int:
    missing = 0
    for name in components(settings):
        if name == "postgres":
            pid = postgres_server.running_pid(settings)
        else:
            pid = processes.running(settings, name)
        state = "running" if pid else "stopped"
        missing += state != "running"
        print(f"{name:26} {state:8} {pid or ''}")
    if settings.node and processes.running(settings, "kube-apiserver"):
        for name, replicas in spark_operator.deployment_states(settings).items():
            ready = replicas is not None and replicas[0] >= max(replicas[1], 1)
            missing += not ready
            shown = "missing" if replicas is None else f"{replicas[0]}/{replicas[1]} pods ready"
            print(f"{name:26} {'running' if ready else 'stopped':8} {shown}")
    if settings.node:  # whose node this machine runs, if any: one per machine
        claim = node_host.read_claim()
        owner = ("none" if claim is None else "this stack"
                 if claim.held_by(settings.state_dir) else claim.state_dir)
        print(f"{'node claimed by':26} {owner}")
    return 1 if missing else 0


def run_tests(settings: Settings, pytest_args: list[str]) -> int:
    was_down = not any_running(settings)
    try:
        info = up(settings)  # inside: a start that fails half-way stops what it started
        # the tests' own spark-submits and PySpark sessions start as the stand-in's drivers do
        env = {"SPARK_SUBMIT_OPTS": info["spark_java_options"], **os.environ}
        workers = int(os.environ.get(test_phases.WORKERS_ENV, test_phases.DEFAULT_WORKERS))
        steps = test_phases.phases(pytest_args, workers)
        statuses: list[int] = []
        named = [[phase for phase, _ in step] for step in steps]
        test_phases.clear_timings(settings.state_dir / "results", named)
        for step in steps:
            statuses += _run_step(settings, step, env)
        if len(steps) > 1:
            merged = test_phases.write_merged(settings.state_dir / "results", named)
            if merged:
                walls = ", ".join(f"{p} {s:.0f} s" for p, s in merged["phases"].items())
                print(f"dvstack test: pytest wall time {merged['wall_seconds']:.0f} s ({walls})")
        result = test_phases.exit_status(statuses)
    finally:
        left = (down(settings) if was_down and os.environ.get("KEEP_STACK") != "1" else [])
    if left:  # the host must be as it was: a run that changed it fails
        print(f"dvstack test: the node left {len(left)} change(s) on the host (above)")
        return result or 1
    return result


def _run_step(settings: Settings, step: list[tuple[str, list[str]]],
              env: dict[str, str]) -> list[int]:
    """The pytests of one step at the same time: the first one's output on the terminal,
    the others' in a file under results/, shown when the step ends."""
    if step[0][0]:
        names = " and ".join(phase for phase, _ in step)
        print(f"dvstack test: {names} phase{'s' if len(step) > 1 else ''}", flush=True)
    procs: list[tuple[subprocess.Popen[bytes], Path | None]] = []
    for n, (phase, args) in enumerate(step):
        log = None if n == 0 else settings.state_dir / "results" / f"pytest-{phase}.log"
        out = None if log is None else open(log, "wb")  # noqa: SIM115
        procs.append((subprocess.Popen(
            [sys.executable, "-m", "pytest", *args], cwd=settings.repo, stdout=out,
            stderr=subprocess.STDOUT if out else None,
            env={**env, test_phases.PHASE_ENV: phase}), log))
        if out is not None:
            out.close()
    statuses = [proc.wait() for proc, _ in procs]
    for (phase, _), (_, log) in zip(step, procs, strict=True):
        if log is not None:
            print(f"dvstack test: the {phase} phase's pytest, run beside the others:", flush=True)
            sys.stdout.write(log.read_text(errors="replace"))
            sys.stdout.flush()
    return statuses


def any_running(settings: Settings) -> bool:
    """Some component runs: the stack is in someone's use (a benchmark stops the stand-in
    executor on purpose), so tests bring up what is missing and leave it up afterwards."""
    return bool(postgres_server.running_pid(settings)) or any(
        processes.running(settings, n) for n in COMPONENTS if n != "postgres")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="dvstack", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("up", help="start (or reuse) every component and wait until ready")
    sub.add_parser("down", help="stop every component; leaves state and caches")
    sub.add_parser("status", help="show which components run")
    sub.add_parser("env", help="print the endpoints JSON written by `up`")
    r = sub.add_parser("restart", help="stop one component and start it again, keeping its "
                                        "state (the fault suite's outages)")
    r.add_argument("component", choices=restarts.RESTARTABLE)
    r.add_argument("--down-seconds", type=float, default=0.0,
                   help="how long it stays down before it starts again")
    t = sub.add_parser("test", help="up, pytest ARGS, then down if the whole stack was down before")
    t.add_argument("pytest_args", nargs=argparse.REMAINDER)
    h = sub.add_parser("helm", help="run the pinned helm (built on first use) against the stack")
    h.add_argument("helm_args", nargs=argparse.REMAINDER)
    s = sub.add_parser("sample-orders", help="order events on the local Kafka, a sink Secret")
    sample.add_arguments(s)
    args = parser.parse_args(argv)
    settings = load()
    if args.command == "up":
        up(settings)
    elif args.command == "down":
        sys.exit(1 if down(settings) else 0)
    elif args.command == "status":
        sys.exit(status(settings))
    elif args.command == "restart":
        took = restarts.restart(settings, args.component, down_seconds=args.down_seconds)
        print(f"{args.component} restarted: serving again {took:.1f}s after the stop")
    elif args.command == "env":
        print(settings.stack_file.read_text() if settings.stack_file.is_file() else "{}")
    elif args.command == "test":
        extra = [a for a in args.pytest_args if a != "--"]
        sys.exit(run_tests(settings, extra))
    elif args.command == "helm":
        helm_args = [a for a in args.helm_args if a != "--"] or ["--help"]
        kubeconfig = _running_stack(settings)["kubeconfig"]
        sys.exit(subprocess.run([str(helm_binary(settings)), *helm_args],
                                env={**os.environ, "KUBECONFIG": kubeconfig}).returncode)
    elif args.command == "sample-orders":
        sample.run_sample(_running_stack(settings), args)


def _running_stack(settings: Settings) -> dict[str, Any]:
    """The endpoints `up` wrote, for commands that need the stack running."""
    if not settings.stack_file.is_file():
        raise SystemExit("the local stack is not up: run `make stack-up` first")
    info: dict[str, Any] = json.loads(settings.stack_file.read_text())
    return info
