"""Helpers of the fault suite: the operator as a killable process, a reader that reconnects,
a view whose migrations are numbered, and the per-scenario result files.

Every scenario runs a producer at a fixed rate for its whole length and ends by
comparing the alias with the test's own recomputation of every produced record.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client

from derived_views.core.judges.tenancy import DEFAULT_SPARK_CONF_ALLOW
from derived_views.process.failpoints import BEFORE_SWITCH_ENV
from dvjob.failpoints import BEFORE_COMMIT_CONF
from dvstack.testing import replay
from dvstack.testing.traffic import AliasReader, LiveProducer
from dvstack.testing.waiting import TimedOut, wait_for
from support.e2e.operator import operator_env
from support.e2e.views import G, P, V, ViewHandle, alias_rows, expected_rows

RATE = 20  # records/s during every scenario (a 2-core machine shared with other jobs)
BACKLOG = 6_000  # records in the topic before the view exists, written an hour ago
BACKLOG_AGE_SECONDS = 3600  # older than the gate: a candidate builds until it holds them all
MAX_OFFSETS_PER_TRIGGER = 2_000  # several batches per replay: room to land a fault in one
COLUMNS = ["orders", "revenue", "variant"]
BUILDING = ("Pending", "Backfilling", "CaughtUp")


def sql(variant: int) -> str:
    """The view's SQL; `variant` is a constant column, so each variant is its own revision
    with the same columns (the alias keeps its shape across migrations)."""
    return ("SELECT customer_id, count(*) AS orders, sum(amount) AS revenue, "
            f"{variant} AS variant FROM events GROUP BY customer_id")


def view_body(namespace: str, name: str, bootstrap: str, topic: str, table: str,
              variant: int, spark_conf: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "source": {"kafka": {"bootstrapServers": bootstrap}, "topics": [topic],
                   "schema": replay.ORDER_SCHEMA, "maxOffsetsPerTrigger": MAX_OFFSETS_PER_TRIGGER},
        "transform": {"sql": sql(variant)},
        "sink": {"postgres": {"secretRef": {"name": "views-db"}, "table": table},
                 "primaryKey": ["customer_id"]},
        # the gate in time: batches take tens of seconds on a loaded machine
        "cutover": {"stableForSeconds": 2, "maxLagSeconds": 90, "retainPreviousSeconds": 15},
        "deletionPolicy": "Delete"}
    if spark_conf:
        spec["spark"] = {"sparkConf": spark_conf}
    return {"apiVersion": f"{G}/{V}", "kind": "DerivedView",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


class OperatorProcess:
    """`derived-views-operator -n NAMESPACE` as its own process, which a scenario kills and
    restarts; watching only the test's namespace, so scenarios may run side by side.

    Every process it starts carries the before-switch failpoint's variable; it stays
    inert until a test arms its file (`arm_switch_hold`).
    """

    def __init__(self, stack: Any, namespace: str, log_path: Path, hook_dir: Path,
                 checkpoint_prefix: str):
        self.stack = stack
        self.namespace = namespace
        self.log_path = log_path
        self.hook_file = hook_dir / "hold-before-switch"
        self.env = operator_env(stack, checkpoint_prefix, **{
            BEFORE_SWITCH_ENV: str(self.hook_file),
            # the job's failpoint is a sparkConf key the default policy refuses
            "DV_TENANCY_POLICY": json.dumps({"sparkConf": {"allow": [
                *DEFAULT_SPARK_CONF_ALLOW, "spark.derivedviews.failpoint.*"]}})})
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> OperatorProcess:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "derived_views.main", "-n", self.namespace], stdout=log,
                stderr=subprocess.STDOUT, env=self.env)
        self.starts += 1
        return self

    def kill(self) -> None:
        """SIGKILL: no handler, no cleanup, like a node lost under the pod."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        """SIGTERM and wait, as Kubernetes stops a pod it replaces."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)

    def kill_and_restart(self) -> None:
        self.kill()
        self.start()

    def arm_switch_hold(self) -> None:
        for leftover in (Path(f"{self.hook_file}.held"), Path(f"{self.hook_file}.release")):
            leftover.unlink(missing_ok=True)
        self.hook_file.write_text("")

    def switch_held(self) -> bool:
        return Path(f"{self.hook_file}.held").exists()

    def release_switch(self) -> None:
        Path(f"{self.hook_file}.release").write_text("")


@dataclass
class Migrations:
    """One view under test and the revisions its variants produced."""

    handle: ViewHandle
    custom: client.CustomObjectsApi
    variant: int = 1

    def revision(self) -> str | None:
        status = self.handle.status()
        if status.get("observedGeneration") != self.handle.get()["metadata"]["generation"]:
            return None
        revision: str | None = status.get("revision")
        return revision

    def start_next(self) -> tuple[str, str]:
        """Edit the SQL to the next variant; returns (serving revision, new revision)."""
        old = self.handle.active()
        assert old is not None
        self.variant += 1
        self.handle.patch({"spec": {"transform": {"sql": sql(self.variant)}}})
        wait_for(lambda: self.revision() not in (None, old), timeout=300, interval=0.1,
                 what=f"variant {self.variant}'s revision to be recorded")
        new = self.revision()
        assert new is not None
        return old, new

    def phase(self, revision: str) -> str | None:
        return self.handle.phases().get(revision)

    def wait_phase(self, revision: str, phases: tuple[str, ...], timeout: float = 900) -> str:
        wait_for(lambda: self.phase(revision) in phases, timeout=timeout, interval=0.1,
                 what=f"revision {revision} to reach {' or '.join(phases)}")
        phase = self.phase(revision)
        assert phase is not None
        return phase

    def wait_serving(self, revision: str, timeout: float = 1200) -> float:
        """Wait until `revision` serves and the view is Ready; returns the time.monotonic()."""
        wait_for(lambda: self.handle.active() == revision and self.handle.ready(),
                 timeout=timeout, interval=0.5, what=f"revision {revision} to serve, Ready")
        return time.monotonic()


def seeded_topic(stack: Any, core: client.CoreV1Api, namespace: str, seed: int
                 ) -> tuple[str, list[dict[str, Any]]]:
    topic = f"faults-{uuid.uuid4().hex[:8]}"
    replay.create_topic(stack.kafka_bootstrap, topic, 3)
    backlog = replay.make_orders(BACKLOG, seed=seed)
    replay.produce(stack.kafka_bootstrap, topic, backlog, age_seconds=BACKLOG_AGE_SECONDS)
    replay.ensure_namespace_and_sink_secret(core, namespace, "views-db", stack.pg)
    return topic, backlog


def loss_and_duplicates(expected: dict[str, tuple[Any, ...]], got: dict[str, tuple[Any, ...]]
                        ) -> tuple[int, int]:
    """Records missing from / counted twice in the index, from each key's order count."""
    lost = sum(max(exp[0] - got.get(k, (0,))[0], 0) for k, exp in expected.items())
    duplicated = sum(max(row[0] - expected.get(k, (0,))[0], 0) for k, row in got.items())
    return int(lost), int(duplicated)


def converge(dsn: str, table: str, events: list[dict[str, Any]], variant: int,
             timeout: float = 600) -> tuple[bool, int, int]:
    """Wait until the alias equals the recomputation of `events` (served by `variant`);
    returns (converged, rows lost, rows duplicated) as measured at the end."""
    expected = {k: (*v, float(variant)) for k, v in
                expected_rows(events, COLUMNS[:2]).items()}
    try:
        wait_for(lambda: alias_rows(dsn, table, COLUMNS) == expected, timeout=timeout,
                 interval=1, what="the alias to equal the recomputation of every record")
        converged = True
    except TimedOut:
        converged = False
    lost, duplicated = loss_and_duplicates(expected, alias_rows(dsn, table, COLUMNS))
    return converged, lost, duplicated


@dataclass
class ScenarioResult:
    """One row of docs/reliability.md."""

    scenario: str
    runs: int
    converged: int
    seconds_to_converge: list[float]
    rows_lost: int
    rows_duplicated: int
    reader_errors: int
    reader_errors_expected: bool = False
    note: str = ""

    def write(self, results_dir: Path) -> None:
        results_dir.mkdir(parents=True, exist_ok=True)
        slug = "".join(c if c.isalnum() else "_" for c in self.scenario.lower())
        (results_dir / f"{slug}.json").write_text(json.dumps(
            {**self.__dict__, "finished_at": time.time(),
             "load_average": round(os.getloadavg()[0], 1), "cpus": os.cpu_count()}, indent=2))


def results_dir(stack: Any) -> Path:
    return Path(stack.state_dir) / "results" / "faults"


def delete_view(custom: client.CustomObjectsApi, handle: ViewHandle) -> None:
    custom.delete_namespaced_custom_object(G, V, handle.namespace, P, handle.name)
    wait_for(handle.gone, timeout=180, interval=1, what="the view to be deleted")


def driver_process_group(core: client.CoreV1Api, custom: client.CustomObjectsApi,
                         namespace: str, app: str) -> int | None:
    """The running driver's process group (the stand-in's containerID is `local://PID`)."""
    obj = custom.get_namespaced_custom_object("sparkoperator.k8s.io", "v1beta2", namespace,
                                              "sparkapplications", app)
    pod = ((obj.get("status") or {}).get("driverInfo") or {}).get("podName")
    if not pod:
        return None
    for status in core.read_namespaced_pod(pod, namespace).status.container_statuses or []:
        cid = status.container_id or ""
        if status.state and status.state.running and cid.startswith("local://"):
            return int(cid.removeprefix("local://"))
    return None


def kill_driver(core: client.CoreV1Api, custom: client.CustomObjectsApi, namespace: str,
                app: str) -> None:
    """SIGKILL the driver's whole process group, like the node dying under its pod."""
    pgid: int | None = None

    def running() -> bool:
        nonlocal pgid
        pgid = driver_process_group(core, custom, namespace, app)
        return pgid is not None

    wait_for(running, timeout=120, interval=0.2, what=f"the driver of {app} to run")
    assert pgid is not None
    os.killpg(pgid, signal.SIGKILL)


class JobHold:
    """The job's hold-before-commit failpoint file (see dvjob.failpoints)."""

    def __init__(self, directory: Path):
        self.path = directory / "hold-before-commit"

    def conf(self) -> dict[str, str]:
        return {BEFORE_COMMIT_CONF: str(self.path)}

    def arm(self, revision: str) -> None:
        Path(f"{self.path}.held").unlink(missing_ok=True)
        self.path.write_text(revision)

    def held(self) -> bool:
        return Path(f"{self.path}.held").exists()


@dataclass
class Scene:
    """A view serving its first revision under live traffic, watched by a reader."""

    stack: Any
    core: client.CoreV1Api
    custom: client.CustomObjectsApi
    namespace: str
    table: str
    backlog: list[dict[str, Any]]
    producer: Any
    reader: AliasReader
    views: Migrations

    @classmethod
    def start(cls, stack: Any, kube_api_client: Any, namespace: str, seed: int,
              spark_conf: dict[str, str] | None = None) -> Scene:
        core = client.CoreV1Api(kube_api_client)
        custom = client.CustomObjectsApi(kube_api_client)
        topic, backlog = seeded_topic(stack, core, namespace, seed)
        table = f"faults_{uuid.uuid4().hex[:8]}"
        producer = LiveProducer(stack.kafka_bootstrap, topic, rate=RATE, seed=seed + 1).start()
        custom.create_namespaced_custom_object(G, V, namespace, P, view_body(
            namespace, "orders", stack.kafka_bootstrap, topic, table, 1, spark_conf))
        views = Migrations(ViewHandle(custom, namespace, "orders"), custom)
        try:
            wait_for(lambda: views.revision() is not None, timeout=300, interval=0.2,
                     what="the first revision to be recorded")
            first = views.revision()
            assert first is not None
            views.wait_serving(first)
        except BaseException:
            producer.stop()
            raise
        reader = AliasReader(stack.pg_dsn, table).start()
        return cls(stack, core, custom, namespace, table, backlog, producer, reader, views)

    def stop_traffic(self) -> list[dict[str, Any]]:
        """Stop the producer and the reader; every produced record (backlog included)."""
        live: list[dict[str, Any]] = self.producer.stop()
        self.reader.stop()
        return self.backlog + live

    def finish(self) -> tuple[bool, int, int]:
        """Stop the traffic and wait for the alias to equal the recomputation."""
        events = self.stop_traffic()
        assert self.producer.failures == [], self.producer.failures[:3]
        return converge(self.stack.pg_dsn, self.table, events, self.views.variant)

    def app_of(self, revision: str) -> str:
        app: str = self.views.handle.record(revision)["sparkApplication"]
        return app
