"""A settled view is off the lag poll, yet its operator still sees new records and a lost
job at once.

The operator runs with a settled-view timer of an hour, so a prompt reaction can only come
from the wakes under test: the end-offsets watch (records arrived) and the SparkApplication
watch (its driver pod was deleted). The index is compared with the test's own
recomputation of every record produced, live traffic included.

Its replay threshold is set low (core.job.stages), so the view's 3,000-record backlog
replays in the replay stage with 3 executors (one per 1,000 records), and its job restarts
from its checkpoint in the steady stage, its tasks in its driver, before the view serves: the index
then holds every record exactly once (an aggregate that counts orders: a record lost or
read twice changes a count), and the job restarted after the lost driver is still steady.
The replay's aggregate state is in 3 partitions (its executors' cores); the steady job is
given 1 (its one task slot) and must resume the checkpoint's 3, as Spark keeps a checkpoint's.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from dvstack.cli import apply_crds
from dvstack.processes import free_port
from dvstack.testing.traffic import LiveProducer
from dvstack.testing.waiting import wait_for
from support.e2e.operator import GATE_SECONDS, operator_env, watched
from support.e2e.views import (
    G,
    P,
    V,
    ViewHandle,
    delete_views,
    orders_backlog,
    view_body,
    wait_alias_equals,
)
from support.paths import REPO

SPARK = ("sparkoperator.k8s.io", "v1beta2", "sparkapplications")
COLUMNS = ["orders", "revenue"]
REPLAY_STAGE_ENV = {"DV_REPLAY_MIN_BACKLOG": "2000", "DV_REPLAY_RECORDS_PER_EXECUTOR": "1000"}
STAGE_LABEL = "derivedviews.io/job-stage"


def job_of(custom: Any, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        return dict(custom.get_namespaced_custom_object(*SPARK[:2], namespace, SPARK[2], name))
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def stage_of(job: dict[str, Any]) -> tuple[str, int, str | None, str | None]:
    """(stage label, executor pods, spark.python.use.daemon, shuffle partitions) of a
    SparkApplication; 0 pods: its tasks run in the driver (no executor count is given)."""
    spec = job["spec"]
    conf = spec.get("sparkConf") or {}
    executors = (0 if conf.get("spark.derivedviews.tasksInDriver") == "true"
                 else spec["executor"]["instances"])
    return (job["metadata"]["labels"].get(STAGE_LABEL, ""), executors,
            conf.get("spark.python.use.daemon"), conf.get("spark.sql.shuffle.partitions"))


@pytest.fixture()
def slow_settled_operator(stack: Any, kube_api_client: Any, tmp_path: Path, namespace: str,
                          checkpoint_secret: str) -> Iterator[int]:
    """The operator with an hour-long settled-view timer; yields its metrics port."""
    apply_crds(kube_api_client, [REPO / "crds" / "derivedviews.io_derivedviews.yaml"])
    port = free_port()
    with open(Path(stack.logs_dir) / f"operator-e2e-{tmp_path.name}.log", "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "derived_views.main", *watched(namespace)], stdout=log,
            stderr=subprocess.STDOUT,
            env=operator_env(stack, f"e2e/{tmp_path.name}", DV_SETTLED_POLL_SECONDS="3600",
                             DV_METRICS_PORT=str(port), **REPLAY_STAGE_ENV))
        try:
            yield port
        finally:
            try:
                delete_views(kube_api_client, namespace)
            finally:
                proc.terminate()
                proc.wait(timeout=30)


def settled_views(port: int) -> float | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            text = response.read().decode()
    except OSError:
        return None
    found = re.search(r"^derived_views_settled_views (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else None


def ends_seen(handle: ViewHandle) -> int:
    """Records in the topic when the operator last measured the served revision's lag."""
    lag = (handle.status().get("active") or {}).get("lag") or {}
    return sum((lag.get("endOffsets") or {}).values())


def test_a_settled_view_wakes_on_new_records_and_on_a_lost_driver(
        stack: Any, kube_api_client: Any, namespace: str, slow_settled_operator: int) -> None:
    core, custom = client.CoreV1Api(kube_api_client), client.CustomObjectsApi(kube_api_client)
    topic, backlog = orders_backlog(stack, core, namespace, 3_000, seed=43)
    table = f"settled_{uuid.uuid4().hex[:8]}"
    custom.create_namespaced_custom_object(
        G, V, namespace, P, view_body(namespace, "quiet", stack.kafka_bootstrap, topic, table,
                                      max_lag_seconds=GATE_SECONDS))
    handle = ViewHandle(custom, namespace, "quiet")
    replaying: dict[str, Any] = {}

    def replay_job() -> bool:
        building = (handle.status().get("candidate") or {}).get("revision")
        job = (job_of(custom, namespace, handle.record(building)["sparkApplication"])
               if building else None)
        if job is not None:
            replaying.update(job)
        return job is not None

    wait_for(replay_job, timeout=120, interval=0.5, what="the first revision's job")
    # its state in 3 partitions, one per executor core, fixed in its checkpoint
    assert stage_of(replaying) == ("replay", 3, None, "3")
    replay_seen = time.monotonic()
    revision = handle.wait_serving_new(None, "the view to serve its first revision", timeout=600)
    replay_to_ready = time.monotonic() - replay_seen
    # restarted from its checkpoint with the steady size before it served, and exact: given
    # one partition (its one task slot), it resumes the checkpoint's three
    serving = job_of(custom, namespace, handle.record(revision)["sparkApplication"])
    assert serving is not None and stage_of(serving) == ("steady", 0, "false", "1")
    assert serving["metadata"]["uid"] != replaying["metadata"]["uid"]

    def resumed_three_partitions() -> bool:
        """Spark's own word, in the steady driver's log (its job runs at the switch, but with
        nothing left to read its first batch may come after it)."""
        logs = (Path(stack.logs_dir) / "spark").glob(
            f"{namespace}_{serving['metadata']['name']}-driver_*.log")
        return any("'spark.sql.shuffle.partitions' in current session from '1' to '3'"
                   in log.read_text(errors="replace") for log in logs)

    wait_for(resumed_three_partitions, timeout=120, interval=0.5,
             what="the steady job to resume the checkpoint's 3 state partitions")
    assert handle.record(revision).get("stage") == "steady"
    told = core.list_namespaced_event(namespace, field_selector="reason=SteadyStageStarted")
    assert [e.involved_object.name for e in told.items] == ["quiet"]
    wait_alias_equals(stack.pg_dsn, table, backlog, COLUMNS,
                      "the index to hold each backlog record once after the stage restart")
    port = slow_settled_operator

    def settled() -> bool:
        return settled_views(port) == 1.0

    wait_for(settled, timeout=120, interval=0.5, what="the caught-up view to settle")
    assert ends_seen(handle) == len(backlog)

    # records arrive: the offsets watch wakes the view
    producer = LiveProducer(stack.kafka_bootstrap, topic, rate=50, seed=431).start()
    try:
        wait_for(lambda: producer.count() > 0, timeout=30, interval=0.1,
                 what="the first live record")
        first = time.monotonic()
        wait_for(lambda: ends_seen(handle) > len(backlog), timeout=30, interval=0.2,
                 what="the settled view's status to count the new records")
        noticed = time.monotonic() - first
        wait_for(lambda: producer.count() >= 250, timeout=60, interval=0.2,
                 what="5 s of live traffic")
    finally:
        live = producer.stop()
    assert producer.failures == []
    wait_alias_equals(stack.pg_dsn, table, backlog + live, COLUMNS,
                      "the index to hold every record, the live ones included")
    wait_for(settled, timeout=120, interval=0.5, what="the view to settle again")

    # its driver pod is deleted: the SparkApplication watch wakes the view
    app_name = handle.record(revision)["sparkApplication"]
    before = handle.record(revision)
    app = custom.get_namespaced_custom_object(*SPARK[:2], namespace, SPARK[2], app_name)
    pod = (app.get("status") or {}).get("driverInfo", {}).get("podName")
    assert pod, app.get("status")
    core.delete_namespaced_pod(pod, namespace)
    deleted = time.monotonic()

    def job_change_recorded() -> bool:
        now = handle.record(revision)
        return (now.get("jobState") != "RUNNING"
                or now.get("executionAttempts") != before.get("executionAttempts"))

    wait_for(job_change_recorded, timeout=60, interval=0.2,
             what="the view's status to record its job's loss")
    reacted = time.monotonic() - deleted
    assert noticed < 15, f"new records noticed after {noticed:.1f}s"
    assert reacted < 30, f"the lost driver recorded after {reacted:.1f}s"

    # it recovers under traffic, and the index is exact
    producer = LiveProducer(stack.kafka_bootstrap, topic, rate=50, seed=432).start()
    try:
        wait_for(lambda: handle.record(revision).get("jobState") == "RUNNING" and handle.ready(),
                 timeout=300, interval=1, what="the job to run again and the view to be Ready")
        wait_for(lambda: producer.count() >= 250, timeout=60, interval=0.2,
                 what="5 s of live traffic")
    finally:
        more = producer.stop()
    assert producer.failures == []
    wait_alias_equals(stack.pg_dsn, table, backlog + live + more, COLUMNS,
                      "the index to hold every record after the job's restart")
    recovered = job_of(custom, namespace, app_name)
    assert recovered is not None and stage_of(recovered) == ("steady", 0, "false", "1")
    wait_for(settled, timeout=120, interval=0.5, what="the recovered view to settle")
    print(f"settled view: replay-stage job to Ready (through the steady restart) "
          f"{replay_to_ready:.1f}s, new records noticed after {noticed:.2f}s, lost driver "
          f"recorded after {reacted:.2f}s")
