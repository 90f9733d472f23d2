"""Apply to Ready for a view over a 50,000-event topic, split into what the system records.

On the running stack, the real operator runs as its own process, started as the e2e
tests start it (tests/e2e/e2e_operator: the stack's API server, S3 checkpoints) but
with the product's pace: the jobs' trigger (DV_TRIGGER_SECONDS) and the lag poll
(DV_LAG_POLL_SECONDS) are left at their defaults, as the chart ships them, unless
--lag-poll-seconds says otherwise.  Each run creates a fresh 3-partition topic of
order events written an hour ago (a backlog: the cutover gate's staleness arm cannot
hold before the replay has every record, as it could on records a few seconds old),
applies the e2e tests' view (`view_body`: orders per customer, no cutover settings,
so every default), waits until it is Ready, reads the marks below, then deletes the
view and waits until it is gone.

Marks, each from what the system itself records (the apply from this script's
clock; the others are Kubernetes timestamps, whole seconds, or PostgreSQL's, so a
part next to a Kubernetes one may be off by up to a second):
  applied           this script's clock as it creates the view
  app_created       the SparkApplication's creationTimestamp
  driver_started    the driver pod's container state.running.startedAt (the stand-in kubelet)
  driver_first_log  the first timestamped line of the driver's log (the JVM is up)
  query_started     the driver log's "MicroBatchExecution: Starting" (Spark's session, the
                    Kafka source and the checkpoint are set up; the first batch begins)
  first_commit      dv_ledger.committed_at of the revision's first batch
  caught_up_commit  committed_at of the first batch whose end offsets cover the topic's ends
  gate_first_held   when the operator first saw the gate hold (lastCutover.gateHeldAt less
                    the stability window, none for a view's first revision)
  gate_held         lastCutover.gateHeldAt (the gate has held for the window)
  ready             lastCutover.switchedAt (the pass that switched the alias; the Ready
                    condition's lastTransitionTime is kept beside it)

The first batch's own `dvjob timing` line (executors staging, merge transaction)
splits the part that ends at its commit.  Results: .stack/results/apply_to_ready.json
(each run's marks and parts, the median of each part); benchmarks/report.py shows them.

With --beside-serving RATE, one more view serves a topic written at RATE events/s for the
whole run (Ready before the first run starts), as a platform's cluster has one: the goal is
then 40 s, and the results say whether that view stayed Ready through every run.

Usage: python benchmarks/apply_to_ready.py [--events 50000] [--runs 3]
       [--lag-poll-seconds S] [--lag-history-seconds S] [--watch-log FILE] [--plot FILE.png]
       [--beside-serving RATE] [--node] [--replay-executors N] [--save-as NAME]
       (the stack must be up)
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import itertools
import json
import os
import re
import statistics
import subprocess
import sys
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psycopg
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from derived_views.api.spec import Cutover
from derived_views.api.status import DerivedViewStatus
from derived_views.cli.plot import write_png
from derived_views.cli.plot_data import plot_data
from derived_views.process.environment import from_env
from dvstack.cli import apply_crds
from dvstack.settings import load
from dvstack.testing import replay
from dvstack.testing import results as results_file
from dvstack.testing.termination import clean_up_on_signals
from dvstack.testing.traffic import LiveProducer
from dvstack.testing.waiting import wait_for

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "spark_templates"))

from dvjob.batch_writer import TIMING_PREFIX  # noqa: E402
from support.e2e.operator import operator_process, product_pace_env  # noqa: E402
from support.e2e.views import ViewHandle, view_body  # noqa: E402

G, V, P = "derivedviews.io", "v1alpha1", "derivedviews"
SPARK = ("sparkoperator.k8s.io", "v1beta2", "sparkapplications")
EVENTS = 50_000
RUNS = 3
PARTITIONS = 3
GOAL_SECONDS = 25.0
"""Issue 29: apply to Ready for a 50,000-event topic under 25 s on the local stack."""
GOAL_BESIDE_SECONDS = 40.0
"""Issue 50: the same beside one view serving at 150 events/s."""
SERVING_BACKLOG = 20_000
HISTORY_AGE_SECONDS = 3600
SECRET = "views-db"
MARKS = ("applied", "app_created", "driver_started", "driver_first_log", "query_started",
         "first_commit", "caught_up_commit", "gate_first_held", "gate_held", "ready")
PART_NAMES = {
    "app_created": "apply → SparkApplication created",
    "driver_started": "→ driver process started",
    "driver_first_log": "→ driver's first log line (JVM up)",
    "query_started": "→ streaming query started (Spark session, source, checkpoint)",
    "first_commit": "→ first ledger commit (the first batch)",
    "caught_up_commit": "→ commit covering the end offsets",
    "gate_first_held": "→ operator sees the gate hold",
    "gate_held": "→ gate held for the stability window (none for a first revision)",
    "ready": "→ Ready (alias switched)",
}
"""Each part ends at its mark and starts at the mark before it."""
_LOG_TIME = re.compile(r"^(\d\d/\d\d/\d\d \d\d:\d\d:\d\d) ")
QUERY_STARTED = "MicroBatchExecution: Starting ["


# --- pure parts -------------------------------------------------------------------------------

def parse_time(value: object) -> dt.datetime | None:
    """A recorded time (Kubernetes' "...Z", an ISO string, a datetime) as an aware datetime."""
    if value is None or value == "":
        return None
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.astimezone()
    return dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def log_time(text: str, containing: str = "") -> dt.datetime | None:
    """The time of the first line Spark's log4j stamped (yy/MM/dd HH:mm:ss, the driver's local
    time: the driver runs on this machine, in its time zone) that holds `containing`."""
    for line in text.splitlines():
        match = _LOG_TIME.match(line)
        if match and containing in line:
            return dt.datetime.strptime(match.group(1), "%y/%m/%d %H:%M:%S").astimezone()
    return None


def batch_timing(text: str, batch: int) -> dict[str, float]:
    """The job's `dvjob timing` figures of one batch (seconds staging, in the transaction)."""
    for line in text.splitlines():
        if line.startswith(TIMING_PREFIX):
            found = json.loads(line[len(TIMING_PREFIX):])
            if found.get("batch") == batch:
                return {k: float(v) for k, v in found.items() if k.endswith("_seconds")}
    return {}


def covering_commit(ledger: Sequence[tuple[int, Mapping[str, Any], dt.datetime]], topic: str,
                    ends: Mapping[int, int]) -> dt.datetime | None:
    """committed_at of the first batch (ledger rows in batch order) whose end offsets reach
    the topic's end offsets on every partition."""
    for _batch, offsets, committed_at in ledger:
        got = {int(p): int(o) for p, o in (offsets.get(topic) or {}).items()}
        if all(got.get(p, 0) >= end for p, end in ends.items()):
            return committed_at
    return None


def parts(marks: Mapping[str, dt.datetime | None]) -> dict[str, float | None]:
    """Seconds from each mark to the next, and the total from apply to Ready."""
    out: dict[str, float | None] = {}
    for before, mark in itertools.pairwise(MARKS):
        start, end = marks.get(before), marks.get(mark)
        out[mark] = None if start is None or end is None else round(
            (end - start).total_seconds(), 2)
    start, end = marks.get("applied"), marks.get("ready")
    out["total"] = None if start is None or end is None else round(
        (end - start).total_seconds(), 2)
    return out


def medians(runs: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    """The median of each part (and of the first batch's phases) over the runs that have it."""
    out: dict[str, float | None] = {}
    for name in [*MARKS[1:], "total"]:
        values = [run["parts"][name] for run in runs if run["parts"].get(name) is not None]
        out[name] = round(statistics.median(values), 2) if values else None
    for name in sorted({k for run in runs for k in run.get("first_batch") or {}}):
        values = [run["first_batch"][name] for run in runs if name in run.get("first_batch", {})]
        out[f"first_batch_{name}"] = round(statistics.median(values), 2)
    return out


# --- one run ----------------------------------------------------------------------------------

def driver_log(logs_dir: Path, namespace: str, pod_name: str) -> str:
    """The newest log of the driver pod (a retried driver is a new pod uid: a new file)."""
    logs = sorted((logs_dir / "spark").glob(f"{namespace}_{pod_name}_*.log"),
                  key=lambda path: path.stat().st_mtime)
    return logs[-1].read_text(errors="replace") if logs else ""


def driver_started(core: Any, namespace: str, pod_name: str) -> dt.datetime | None:
    """The driver container's start as the (stand-in) kubelet recorded it."""
    try:
        pod = core.read_namespaced_pod(pod_name, namespace)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    for status in pod.status.container_statuses or []:
        if status.state and status.state.running:
            return parse_time(status.state.running.started_at)
    return None


@dataclass(frozen=True)
class Showing:
    """What a run also records for people: `dv watch`'s plain output while the view is
    built, and the PNG `dv plot` draws of its lag history once it is Ready."""

    watch_log: Path | None = None
    plot: Path | None = None


def watch_command(info: Mapping[str, Any], namespace: str, name: str) -> list[str]:
    return [sys.executable, "-m", "derived_views.cli", "--kubeconfig", info["kubeconfig"],
            "-n", namespace, "watch", name, "--interval", "1", "--timeout", "900"]


@dataclass
class Serving:
    """The view serving beside the runs (--beside-serving), and what the runs saw of it."""

    view: ViewHandle | None = None
    samples: int = 0
    not_ready: int = 0

    def sample(self) -> None:
        if self.view is not None:
            self.samples += 1
            self.not_ready += not self.view.ready()


@contextlib.contextmanager
def serving_view(info: Mapping[str, Any], api: Any, namespace: str, rate: float | None
                 ) -> Iterator[Serving]:
    """With `rate`: a view over a topic written at `rate` events/s, Ready before it yields;
    deleted with its topic afterwards."""
    if rate is None:
        yield Serving()
        return
    custom = client.CustomObjectsApi(api)
    run = uuid.uuid4().hex[:8]
    topic = name = f"serving-{run}"
    replay.create_topic(info["kafka_bootstrap"], topic, PARTITIONS)
    producer: LiveProducer | None = None
    view = ViewHandle(custom, namespace, name)
    try:
        replay.produce(info["kafka_bootstrap"], topic, replay.make_orders(SERVING_BACKLOG),
                       age_seconds=HISTORY_AGE_SECONDS)
        producer = LiveProducer(info["kafka_bootstrap"], topic, rate=rate, seed=500).start()
        custom.create_namespaced_custom_object(G, V, namespace, P, view_body(
            namespace, name, info["kafka_bootstrap"], topic, f"serving_{run}", SECRET))
        wait_for(view.ready, timeout=600, interval=1, what=f"the serving view {name} to be Ready",
                 on_timeout=view.brief)
        yield Serving(view)
    finally:
        if producer is not None:
            producer.stop()
        with contextlib.suppress(client.exceptions.ApiException):
            custom.delete_namespaced_custom_object(G, V, namespace, P, name)
        wait_for(view.gone, timeout=300, interval=0.5, what=f"view {name} to be deleted")
        replay.delete_topic(info["kafka_bootstrap"], topic)


def one_run(info: Mapping[str, Any], api: Any, namespace: str, events: int,
            stable_for: int, showing: Showing = Showing(),
            serving: Serving | None = None) -> dict[str, Any]:
    """Apply one view over a fresh topic, wait for Ready, read the marks, delete the view."""
    custom = client.CustomObjectsApi(api)
    run = uuid.uuid4().hex[:8]
    topic, name = f"ready-{run}", f"ready-{run}"
    replay.create_topic(info["kafka_bootstrap"], topic, PARTITIONS)
    try:
        replay.produce(info["kafka_bootstrap"], topic, replay.make_orders(events),
                       age_seconds=HISTORY_AGE_SECONDS)
        ends = replay.topic_end_offsets(info["kafka_bootstrap"], topic)
        view = ViewHandle(custom, namespace, name)
        body = view_body(namespace, name, info["kafka_bootstrap"], topic, f"ready_{run}", SECRET)
        applied = dt.datetime.now(dt.UTC)
        custom.create_namespaced_custom_object(G, V, namespace, P, body)
        watcher = None
        if showing.watch_log is not None:
            with showing.watch_log.open("w") as out:
                watcher = subprocess.Popen(watch_command(info, namespace, name), stdout=out,
                                           stderr=subprocess.STDOUT)
        seen: dict[str, Any] = {}

        def ready() -> bool:
            """Ready yet; the build's estimate kept as first seen (the status keeps it only
            while the revision builds)."""
            if serving is not None:
                serving.sample()
            status = view.status()
            for record in status.get("revisions") or []:
                if record.get("estimate") and "estimate" not in seen:
                    seen["estimate"] = record["estimate"]
            return view.ready()

        try:
            wait_for(ready, timeout=900, interval=0.25, what=f"view {name} to be Ready")
            if watcher is not None:
                watcher.wait(timeout=60)
            if showing.plot is not None:
                write_png(plot_data(DerivedViewStatus.model_validate(view.status())),
                          f"{namespace}/{name} lag: {events:,} events", showing.plot)
            return {"view": name, "topic": topic, **read_marks(info, api, view, applied, ends,
                                                                topic, stable_for,
                                                                seen.get("estimate"))}
        finally:
            if watcher is not None and watcher.poll() is None:
                watcher.kill()
                watcher.wait(timeout=30)
            custom.delete_namespaced_custom_object(G, V, namespace, P, name)
            wait_for(view.gone, timeout=300, interval=0.5, what=f"view {name} to be deleted")
    finally:
        replay.delete_topic(info["kafka_bootstrap"], topic)


def read_marks(info: Mapping[str, Any], api: Any, view: ViewHandle, applied: dt.datetime,
               ends: Mapping[int, int], topic: str, stable_for: int,
               estimate: Mapping[str, Any] | None = None) -> dict[str, Any]:
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    status = view.status()
    revision = (status.get("active") or {}).get("revision")
    cutover = status.get("lastCutover") or {}
    apps = custom.list_namespaced_custom_object(
        *SPARK[:2], view.namespace, SPARK[2],
        label_selector=f"derivedviews.io/view={view.name},derivedviews.io/revision={revision}"
    )["items"]
    app: dict[str, Any] = apps[0] if apps else {"metadata": {"name": ""}}
    with psycopg.connect(info["pg_dsn"]) as conn:
        ledger = conn.execute("SELECT batch_id, end_offsets, committed_at FROM dv_ledger "
                              "WHERE revision = %s ORDER BY batch_id", (revision,)).fetchall()
    gate_held = parse_time(cutover.get("gateHeldAt"))
    pod_name = ((app.get("status") or {}).get("driverInfo") or {}).get("podName") \
        or f"{app['metadata']['name']}-driver"
    log = driver_log(Path(info["logs_dir"]), view.namespace, pod_name)
    marks: dict[str, dt.datetime | None] = {
        "applied": applied,
        "app_created": parse_time(app["metadata"].get("creationTimestamp")),
        "driver_started": driver_started(core, view.namespace, pod_name),
        "driver_first_log": log_time(log),
        "query_started": log_time(log, QUERY_STARTED),
        "first_commit": ledger[0][2] if ledger else None,
        "caught_up_commit": covering_commit(ledger, topic, ends),
        "gate_first_held": None if gate_held is None
        else gate_held - dt.timedelta(seconds=stable_for),
        "gate_held": gate_held,
        "ready": parse_time(cutover.get("switchedAt")),
    }
    ready_condition = view.condition("Ready").get("lastTransitionTime")
    return {"revision": revision, "batches": len(ledger),
            "estimate": estimate_against_replay(estimate, applied, marks["caught_up_commit"]),
            "marks": {k: None if v is None else v.isoformat() for k, v in marks.items()},
            "ready_condition_transition": ready_condition, "parts": parts(marks),
            "first_batch": batch_timing(log, 0)}


def estimate_against_replay(estimate: Mapping[str, Any] | None, applied: dt.datetime,
                            caught_up: dt.datetime | None) -> dict[str, Any] | None:
    """The build's estimate as the operator set it on its first pass (issue 51: records to
    read, expected seconds), against the replay it estimated: from the apply to the commit
    that covered the topic's ends. `ratio` over 1: the estimate said longer."""
    if not estimate or caught_up is None:
        return None
    measured = (caught_up - applied).total_seconds()
    expected = float(estimate.get("seconds") or 0)
    return {"records": estimate.get("records"), "expected_seconds": expected,
            "records_per_second": estimate.get("recordsPerSecond"),
            "from_revision": estimate.get("fromRevision"),
            "measured_seconds": round(measured, 1),
            "ratio": round(expected / measured, 2) if measured > 0 else None}


# --- the operator -----------------------------------------------------------------------------

def operator_environment(info: Mapping[str, Any], prefix: str,
                         lag_poll_seconds: float | None) -> dict[str, str]:
    """The tests' operator environment at the product's pace (e2e_operator.product_pace_env)."""
    return product_pace_env(SimpleNamespace(**info), prefix, lag_poll_seconds)


def main(argv: Sequence[str] | None = None) -> None:
    clean_up_on_signals()  # a killed run deletes what it started, as one that ends
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--events", type=int, default=EVENTS)
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--lag-poll-seconds", type=float, default=None,
                        help="the operator's DV_LAG_POLL_SECONDS (default: the product's)")
    parser.add_argument("--lag-history-seconds", type=float, default=None,
                        help="the operator's DV_LAG_HISTORY_SECONDS (default: the product's)")
    parser.add_argument("--watch-log", type=Path, default=None,
                        help="write `dv watch`'s output during the last run to this file")
    parser.add_argument("--plot", type=Path, default=None,
                        help="write `dv plot`'s PNG of the last run's lag history here")
    parser.add_argument("--node", action="store_true",
                        help="run the jobs as pods of the project's Spark image on the real "
                             "node (a stack started with DV_NODE=1)")
    parser.add_argument("--replay-executors", type=int, default=None, metavar="N",
                        help="replay every topic in the replay stage with N executors "
                             "(DV_REPLAY_MIN_BACKLOG=1, DV_REPLAY_RECORDS_PER_EXECUTOR so "
                             "that the backlog asks N), then restart steady before Ready")
    parser.add_argument("--beside-serving", type=float, default=None, metavar="RATE",
                        help="measure beside one view serving a topic written at RATE events/s")
    parser.add_argument("--save-as", default=None,
                        help="results file name under the stack's results directory (default "
                             "apply_to_ready, or apply_to_ready_beside with --beside-serving)")
    args = parser.parse_args(argv)
    beside = args.beside_serving is not None
    save_as = args.save_as or ("apply_to_ready_beside" if beside else "apply_to_ready")
    settings = load()
    info = json.loads(settings.stack_file.read_text())
    api = config.new_client_from_config(config_file=info["kubeconfig"])
    core = client.CoreV1Api(api)
    apply_crds(api, [REPO / "crds" / "derivedviews.io_derivedviews.yaml"])
    run_id = uuid.uuid4().hex[:6]
    namespace = f"bench-ready-{run_id}"
    replay.ensure_namespace_and_sink_secret(core, namespace, SECRET, info["pg"])
    replay.ensure_checkpoint_secret(core, namespace, info["s3"])
    env = operator_environment(info, f"bench/apply-to-ready/{run_id}", args.lag_poll_seconds)
    if args.lag_history_seconds is not None:
        env["DV_LAG_HISTORY_SECONDS"] = str(args.lag_history_seconds)
    if args.node:
        env.update(replay.jobs_on_real_node(api, namespace, info))
    if args.replay_executors is not None:
        env.update(DV_REPLAY_MIN_BACKLOG="1", DV_REPLAY_MAX_EXECUTORS=str(args.replay_executors),
                   DV_REPLAY_RECORDS_PER_EXECUTOR=str(
                       max(1, -(-args.events // args.replay_executors))))
    operator_settings = from_env(env)
    # A view's first revision serves as soon as the gate holds: stableForSeconds guards only
    # a move from a serving revision (core/planner/phases_cutover.stable_for_seconds).
    stable_for = 0
    log_path = settings.logs_dir / f"operator-apply-to-ready-{run_id}.log"
    runs: list[dict[str, Any]] = []
    try:
        with operator_process(env, namespace, log_path), \
                serving_view(info, api, namespace, args.beside_serving) as serving:
            for index in range(args.runs):
                last = index == args.runs - 1
                result = one_run(info, api, namespace, args.events, stable_for,
                                 Showing(args.watch_log, args.plot) if last else Showing(),
                                 serving)
                print(json.dumps({"run": index + 1, **result}), flush=True)
                runs.append(result)
    finally:
        core.delete_namespace(namespace)
    result_doc = {
        "measured_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "events": args.events, "partitions": PARTITIONS,
        "history_age_seconds": HISTORY_AGE_SECONDS,
        "goal_seconds": GOAL_BESIDE_SECONDS if beside else GOAL_SECONDS,
        "node": args.node, "replay_executors": args.replay_executors,
        # what the jobs shared: on the real node its kubelet runs on this machine
        "cpus": os.cpu_count(), "load_average_1m": round(os.getloadavg()[0], 2),
        "beside_serving": None if not beside else {
            "rate": args.beside_serving, "samples": serving.samples,
            "not_ready_samples": serving.not_ready},
        "lag_history_seconds": operator_settings.polling.history_seconds,
        "operator": {"lag_poll_seconds": operator_settings.polling.lag_seconds,
                     # the view's gate is the default: the interval its job was given
                     "trigger_seconds": operator_settings.spark.trigger_of(Cutover())},
        "cutover": {"stable_for_seconds": stable_for,
                    "max_lag_seconds": Cutover().max_lag_seconds},
        "part_names": PART_NAMES,
        "runs": runs, "median": medians(runs),
    }
    results_file.save(settings, save_as, result_doc)
    print(json.dumps(result_doc["median"], indent=2))


if __name__ == "__main__":
    main()
