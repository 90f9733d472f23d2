"""What a serving view costs once caught up: cores and memory of everything its job runs.

On the running stack, the real operator runs as its own process at the product's pace (as
benchmarks/apply_to_ready.py starts it: the jobs' trigger and the lag poll left at their
defaults). For each of VIEWS views: a fresh 3-partition topic with a backlog of order
events written an hour ago, a producer writing RATE events/s into it for the whole run,
and the e2e tests' view (`view_body`: orders per customer, no cutover or Spark settings,
so every default). Once every view is Ready and a warm-up has passed, the script samples
once a second for WINDOW seconds:

- each view's job: every process of its driver's session (the stand-in kubelet starts a
  driver with its own session: the spark-submit JVM, its Python driver, Python workers),
  CPU from /proc/<pid>/stat (utime + stime, and the reaped children's) and resident
  memory (RSS, what the goal is judged on, and PSS from smaps_rollup: shared pages counted
  once across views), and, for the record, the same without the stand-in's class archive
  (STAND_IN_ARCHIVE);
- the stack's S3 store (the checkpoints), shared by the views: its CPU split evenly;
- Kafka's broker: the log's own cost of serving the same events, for comparison;
- with --node (a stack started with DV_NODE=1), the jobs run as pods of the project's Spark
  image on the real node: each view's processes are those of its pods' cgroups (driver and
  executors), their CPU the pods' cgroup accounting; there is no class archive to subtract;
- each view's status: Ready, and the serving index's staleness, which the 10 s gate
  (`cutover.maxLagSeconds`, default) must hold the whole window;
- where each view's cores go (`cores_by_thread`): its threads' CPU from
  /proc/<pid>/task/<tid>/stat every tenth sample (DETAIL_EVERY, as PSS and the archive
  share: the meter's own cost), grouped by name (THREAD_GROUPS), and what
  threads and processes that ended in the window used, by difference from the total;
- at each view's peak, where its memory goes (`memory_at_peak`): its JVMs' heap and class
  metadata from their hsperfdata counters (dvstack.testing.jvm_perfdata, read without
  attaching), the rest of their resident memory, and its Python processes.

Results: .stack/results/<save-as>.json (default steady_cost, or steady_cost_<N>views; _node
with --node; `make bench` also saves a run with a 10-minute warm-up as steady_cost_long: a
serving job is still compiling and Spark starts purging its logs only after 100 batches),
read by benchmarks/report.py against the goal (issue 50: at most 0.10 core and 400 MB per
view). The views are deleted at the end.

Several views are applied one after another, each once the one before is Ready, as a
platform adds views (`--together` applies them at once: on a small machine their replays
then share the cores, and the start-up pile-up is what shows).

`--spark-conf KEY=VALUE` (repeatable) puts a setting in every view's spec.spark.sparkConf:
what a setting saves, measured against the defaults (save it under another name).

Usage: python benchmarks/steady_cost.py [--views 1] [--rate 150] [--window 60]
       [--warmup 30] [--node] [--together] [--spark-conf KEY=VALUE] [--save-as NAME]
       (the stack must be up)
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import statistics
import sys
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from kubernetes import client, config

from derived_views.api.spec import Cutover
from derived_views.process.environment import from_env
from dvstack import processes
from dvstack.cli import apply_crds
from dvstack.node.config import CGROUP_ROOT as NODE_CGROUP_ROOT
from dvstack.services.s3_store import S3_NAME
from dvstack.settings import load
from dvstack.testing import replay
from dvstack.testing import results as results_file
from dvstack.testing.jvm_perfdata import PerfDataError, jvm_memory, perfdata_path, read_longs
from dvstack.testing.termination import clean_up_on_signals
from dvstack.testing.traffic import LiveProducer
from dvstack.testing.waiting import wait_for

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from support.e2e.operator import operator_process, product_pace_env  # noqa: E402
from support.e2e.views import G, P, V, ViewHandle, view_body  # noqa: E402

SECRET = "views-db"
BACKLOG = 5_000
HISTORY_AGE_SECONDS = 3600
GOAL_CORES = 0.10
GOAL_RSS_MB = 400.0


# --- pure parts -------------------------------------------------------------------------------

def session_usage(stats: Iterable[processes.ProcStat], session: int) -> tuple[float, float]:
    """CPU seconds (own and reaped children's) and resident MB of a session's processes."""
    members = [s for s in stats if s.session == session]
    return (sum(s.cpu_seconds + s.children_seconds for s in members),
            sum(s.rss_mb for s in members))


@dataclass
class Series:
    """One view's (or component's) samples over the window."""

    cpu: list[tuple[float, float]] = field(default_factory=list)
    """(monotonic time, cumulative CPU seconds)."""
    rss_mb: list[float] = field(default_factory=list)
    pss_mb: list[float] = field(default_factory=list)
    archive_mb: list[float] = field(default_factory=list)
    """Of rss_mb, the stand-in's class archive (STAND_IN_ARCHIVE)."""

    def cores(self) -> float | None:
        if len(self.cpu) < 2:
            return None
        (t0, c0), (t1, c1) = self.cpu[0], self.cpu[-1]
        return (c1 - c0) / (t1 - t0) if t1 > t0 else None

    def summary(self) -> dict[str, float | None]:
        return {"cores": _round(self.cores(), 4),
                "rss_mb_mean": _round(statistics.fmean(self.rss_mb), 1) if self.rss_mb else None,
                "rss_mb_max": _round(max(self.rss_mb), 1) if self.rss_mb else None,
                "pss_mb_mean": _round(statistics.fmean(self.pss_mb), 1) if self.pss_mb else None,
                "image_rss_mb_max": _round(max(r - a for r, a in zip(
                    self.rss_mb, self.archive_mb, strict=True)), 1) if self.archive_mb
                else None}


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def staleness_seconds(status: Mapping[str, Any]) -> float | None:
    """The serving revision's staleness as the operator last read it (status.active.lag)."""
    lag = ((status.get("active") or {}).get("lag") or {})
    seconds = lag.get("seconds")
    return float(seconds) if seconds is not None else None


def memory_profile(processes_rss: Iterable[tuple[str, float, Mapping[str, int] | None]]
                   ) -> dict[str, float | int]:
    """Where a view's resident memory goes, from its processes' (command, RSS MB, JVM
    counters): the JVM's heap and class metadata as committed, the rest of the JVM (code,
    thread stacks, symbols, the allocator's own), and the Python processes."""
    jvm_rss = python_rss = heap = heap_used = metaspace = 0.0
    threads = 0
    for command, rss, counters in processes_rss:
        if counters is not None:
            memory = jvm_memory(counters)
            jvm_rss += rss
            heap += memory.heap_committed
            heap_used += memory.heap_used
            metaspace += memory.metaspace_committed
            threads += memory.threads
        elif command.startswith("python"):
            python_rss += rss
    return {"jvm_rss_mb": round(jvm_rss, 1), "heap_committed_mb": round(heap, 1),
            "heap_used_mb": round(heap_used, 1), "metaspace_mb": round(metaspace, 1),
            "jvm_rest_mb": round(jvm_rss - heap - metaspace, 1), "jvm_threads": threads,
            "python_rss_mb": round(python_rss, 1)}


THREAD_GROUPS: tuple[tuple[str, str], ...] = (
    ("Executor task", "tasks"),
    ("stream executio", "micro-batch thread"),
    ("VM Thread", "collector"), ("GC Thread", "collector"),
    ("C1 CompilerThre", "compiler"), ("C2 CompilerThre", "compiler"),
)
"""A JVM thread's group by the start of its name as /proc gives it (`comm`, 15 characters):
the tasks, Spark's micro-batch loop (planning, offsets, the checkpoint's logs), the serial
collector (it runs in the VM thread), the JIT compiler; every other JVM thread (scheduler,
listeners, RPC, block cleanup, the Kafka and S3 clients) is OTHER_JVM."""
OTHER_JVM = "other JVM threads"
DETAIL_EVERY = 10
"""Each view's threads, PSS and class-archive share are read every tenth sample (and at the
last), its CPU and RSS every second: per driver JVM the threads took 4 ms for 111 of them and
its smaps 36 ms, so for ten views every second the meter took half a core of the two it
measures. What a thread used between its last reading and its end counts as EXITED; a sample
between readings keeps the last archive share."""
PYTHON = "Python"
EXITED = "exited threads and processes"
"""What the job's total used beyond its threads seen alive: threads and processes that ended
within the window (pool threads, Python workers), by difference."""


def thread_group(command: str, thread: str) -> str:
    """The group a thread's CPU is shown under: by name in a JVM, else by its process."""
    if command != "java":
        return PYTHON if command.startswith("python") else command
    return next((group for prefix, group in THREAD_GROUPS if thread.startswith(prefix)),
                OTHER_JVM)


def cores_by_group(first: Mapping[tuple[int, int], tuple[str, float]],
                   last: Mapping[tuple[int, int], tuple[str, float]], seconds: float,
                   total_cores: float | None) -> dict[str, float]:
    """Cores per thread group over a window, from each thread's (group, CPU seconds) when
    first and last seen (a thread born in the window counts from zero), and what the job's
    total used beyond them (EXITED)."""
    groups: dict[str, float] = {}
    if seconds <= 0:
        return groups
    for key, (group, cpu) in last.items():
        start = first[key][1] if key in first else 0.0
        groups[group] = groups.get(group, 0.0) + (cpu - start) / seconds
    if total_cores is not None:
        groups[EXITED] = total_cores - sum(groups.values())
    return {group: round(cores, 4) for group, cores in
            sorted(groups.items(), key=lambda item: -item[1])}


# --- reading the machine ----------------------------------------------------------------------

def all_stats() -> list[processes.ProcStat]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            found.append(processes.parse_stat(int(entry.name),
                                              (entry / "stat").read_text()))
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
    return found


def thread_cpu(pids: Iterable[int], by_pid: Mapping[int, processes.ProcStat]
               ) -> dict[tuple[int, int], tuple[str, float]]:
    """Each thread of these processes: its group (thread_group) and CPU seconds so far."""
    found: dict[tuple[int, int], tuple[str, float]] = {}
    for pid in pids:
        if pid not in by_pid:
            continue
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{pid}/task").iterdir():
                with contextlib.suppress(OSError, ValueError, IndexError):
                    stat = processes.parse_stat(int(task.name), (task / "stat").read_text())
                    found[(pid, stat.pid)] = (thread_group(by_pid[pid].command, stat.command),
                                              stat.cpu_seconds)
    return found


def pss_mb(pids: Iterable[int]) -> float:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


STAND_IN_ARCHIVE = "spark-cds"
"""Where the stand-in keeps its drivers' class-data-sharing archive (dvstack.spark.jvm): a
test-speed device the job image does not have. Its mapping is written to as classes load
(copy-on-write: 145 MB resident, all but a little private), yet it is no extra: the image's
JVM loads the same classes into its class metadata instead. One view, one run each
(`steady_cost.py` and `--node`): JVM resident 437 MB on the stand-in (class metadata 51 MB
plus the archive) and 433 MB on the real node (class metadata 154 MB). So the goal is
judged on resident memory with the archive; `image_rss_mb_max`, without it, understates the
image's by about 100 MB and is kept for the record only."""


def archive_mb(pids: Iterable[int]) -> float:
    """Resident MB of the stand-in's class archive in these processes (/proc/<pid>/smaps)."""
    total, inside = 0, False
    for pid in pids:
        try:
            text = Path(f"/proc/{pid}/smaps").read_text()
        except OSError:
            continue
        for line in text.splitlines():
            head = line.split(maxsplit=5)
            if len(head) >= 5 and "-" in head[0] and not head[0].endswith(":"):
                inside = len(head) == 6 and STAND_IN_ARCHIVE in head[5] \
                    and head[5].endswith(".jsa")
            elif inside and line.startswith("Rss:"):
                total += int(line.split()[1])
    return total / 1024


def jvm_counters(pid: int) -> Mapping[str, int] | None:
    """A process's JVM counters (its hsperfdata file), None for a process that is no JVM."""
    path = perfdata_path(pid)
    try:
        return None if path is None else read_longs(path.read_bytes())
    except (OSError, PerfDataError):
        return None


def profile_of(pids: Iterable[int], by_pid: Mapping[int, processes.ProcStat]
               ) -> dict[str, float | int]:
    """memory_profile of these processes as they are now."""
    return memory_profile((by_pid[pid].command, by_pid[pid].rss_mb, jvm_counters(pid))
                          for pid in pids if pid in by_pid)


def driver_session(core: Any, namespace: str, view: str) -> int | None:
    """The session of the view's serving driver: the stand-in kubelet's container id is
    `local://<pid>` of a process that leads its own session."""
    pods = core.list_namespaced_pod(
        namespace, label_selector=f"spark-role=driver,derivedviews.io/view={view}").items
    for pod in pods:
        for container in (pod.status.container_statuses or []):
            cid = container.container_id or ""
            if container.state.running is not None and cid.startswith("local://"):
                return int(cid.removeprefix("local://"))
    return None


def pod_cgroups(uid: str, hierarchy: str) -> list[Path]:
    """A pod's cgroup directories in one v1 hierarchy of the stack's node (kubelet's cgroupfs
    layout under its cgroupRoot: kubepods[/<qos>]/pod<uid>)."""
    root = Path("/sys/fs/cgroup") / hierarchy / NODE_CGROUP_ROOT.strip("/") / "kubepods"
    return [d for d in (root / f"pod{uid}", root / "burstable" / f"pod{uid}",
                        root / "besteffort" / f"pod{uid}") if d.is_dir()]


def view_pods_usage(core: Any, namespace: str, view: str) -> tuple[list[int], float]:
    """On the real node: the processes of every running pod of the view's jobs (driver and
    executors, as containers) and the pods' CPU seconds from cgroup accounting, which keeps
    what exited processes used (Python workers)."""
    pods = core.list_namespaced_pod(namespace, label_selector=f"derivedviews.io/view={view}")
    pids: list[int] = []
    cpu = 0.0
    for pod in pods.items:
        if pod.status.phase != "Running":
            continue
        for cgroup in pod_cgroups(pod.metadata.uid, "cpuacct"):
            cpu += int((cgroup / "cpuacct.usage").read_text()) / 1e9
        for cgroup in pod_cgroups(pod.metadata.uid, "memory"):
            for procs in cgroup.rglob("cgroup.procs"):
                pids += [int(pid) for pid in procs.read_text().split()]
    return sorted(set(pids)), cpu


# --- the run ----------------------------------------------------------------------------------

def spark_setting(text: str) -> tuple[str, str]:
    """`--spark-conf KEY=VALUE` as a (key, value) pair; anything else is refused by argparse
    with this message."""
    key, equals, value = text.partition("=")
    if not equals or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r}: give KEY=VALUE, e.g. "
                                         "spark.sql.shuffle.partitions=4")
    return key.strip(), value


def main(argv: Sequence[str] | None = None) -> None:
    clean_up_on_signals()  # a killed run deletes what it started, as one that ends
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--views", type=int, default=1)
    parser.add_argument("--rate", type=float, default=150.0, help="events/s into each topic")
    parser.add_argument("--window", type=float, default=60.0)
    parser.add_argument("--warmup", type=float, default=30.0)
    parser.add_argument("--node", action="store_true",
                        help="run the jobs as pods of the project's Spark image on the real "
                             "node (a stack started with DV_NODE=1) and meter their pods")
    parser.add_argument("--together", action="store_true",
                        help="apply every view at once (default: each once the one before it "
                             "is Ready, as a platform adds views; at once, their replays share "
                             "the machine's cores and what is measured is that pile-up)")
    parser.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                        type=spark_setting,
                        help="a setting in each view's spec.spark.sparkConf (repeatable): "
                             "what a setting saves, measured against the defaults")
    parser.add_argument("--save-as", default=None)
    args = parser.parse_args(argv)
    spark_conf = dict(args.spark_conf)
    save_as = args.save_as or ("steady_cost" if args.views == 1
                               else f"steady_cost_{args.views}views") + (
                                   "_node" if args.node else "")
    settings = load()
    info = json.loads(settings.stack_file.read_text())
    api = config.new_client_from_config(config_file=info["kubeconfig"])
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    apply_crds(api, [REPO / "crds" / "derivedviews.io_derivedviews.yaml"])
    run_id = uuid.uuid4().hex[:6]
    namespace = f"bench-steady-{run_id}"
    replay.ensure_namespace_and_sink_secret(core, namespace, SECRET, info["pg"])
    replay.ensure_checkpoint_secret(core, namespace, info["s3"])
    env = product_pace_env(SimpleNamespace(**info), f"bench/steady/{run_id}")
    if args.node:
        env.update(replay.jobs_on_real_node(api, namespace, info))
    operator_settings = from_env(env)
    log_path = settings.logs_dir / f"operator-steady-cost-{run_id}.log"
    names = [f"steady-{i}" for i in range(args.views)]
    producers: list[LiveProducer] = []
    handles: list[ViewHandle] = []
    result: dict[str, Any] = {}
    try:
        with operator_process(env, namespace, log_path):
            try:
                for i, name in enumerate(names):
                    topic = f"steady-{run_id}-{i}"
                    replay.create_topic(info["kafka_bootstrap"], topic, 3)
                    replay.produce(info["kafka_bootstrap"], topic,
                                   replay.make_orders(BACKLOG, seed=300 + i),
                                   age_seconds=HISTORY_AGE_SECONDS)
                    producers.append(LiveProducer(info["kafka_bootstrap"], topic, rate=args.rate,
                                                  seed=400 + i).start())
                    body = view_body(namespace, name, info["kafka_bootstrap"], topic,
                                     f"steady_{run_id}_{i}", SECRET)
                    if spark_conf:
                        body["spec"]["spark"] = {"sparkConf": spark_conf}
                    custom.create_namespaced_custom_object(G, V, namespace, P, body)
                    if i == 0:
                        applied = time.monotonic()
                    handles.append(ViewHandle(custom, namespace, name))
                    if not args.together and i < len(names) - 1:
                        wait_for(handles[-1].ready, timeout=900, interval=1,
                                 what=f"view {name} to be Ready before the next is applied",
                                 on_timeout=handles[-1].brief)
                wait_for(lambda: all(h.ready() for h in handles), timeout=900, interval=1,
                         what=f"{args.views} views to be Ready",
                         on_timeout=lambda: "; ".join(h.brief() for h in handles))
                ready_seconds = time.monotonic() - applied
                deadline = time.monotonic() + args.warmup
                wait_for(lambda: time.monotonic() >= deadline, timeout=args.warmup + 5, interval=1,
                         what="the warm-up")
                result = measure(core, handles, namespace, names, settings, args.window,
                                 args.node)
                result["ready_seconds"] = round(ready_seconds, 1)
            finally:
                for producer in producers:
                    producer.stop()
                for name in names:
                    with contextlib.suppress(client.exceptions.ApiException):
                        custom.delete_namespaced_custom_object(G, V, namespace, P, name)
                wait_for(lambda: not custom.list_namespaced_custom_object(
                    G, V, namespace, P)["items"], timeout=300, interval=1,
                    what="the views to be deleted")
    finally:
        core.delete_namespace(namespace)
    doc = {
        "measured_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "views": args.views, "node": args.node, "rate_per_view": args.rate, "window_seconds": args.window,
        "warmup_seconds": args.warmup, "backlog_events": BACKLOG,
        # applied at once, or each once the one before was Ready (ready_seconds: from the
        # first view's apply to the last one's Ready)
        "applied": "together" if args.together else "one after another",
        # the views' gate is the default: the interval their jobs were given
        "trigger_seconds": operator_settings.spark.trigger_of(Cutover()),
        "goal": {"cores": GOAL_CORES, "rss_mb": GOAL_RSS_MB},
        "spark_conf": spark_conf,
        **result,
    }
    results_file.save(settings, save_as, doc)
    print(json.dumps(doc, indent=2))


def measure(core: Any, handles: Sequence[ViewHandle], namespace: str, names: Sequence[str],
            settings: Any, window: float, node: bool) -> dict[str, Any]:
    sessions: dict[str, int] = {}  # on the stand-in: each view's driver session
    for name in ([] if node else names):
        session = driver_session(core, namespace, name)
        if session is None:
            raise SystemExit(f"view {name}: no running driver found on the stand-in kubelet")
        sessions[name] = session
    s3_pid = processes.read_pid(settings, S3_NAME)
    kafka_pid = processes.read_pid(settings, "kafka")
    series = {name: Series() for name in names}
    s3, kafka = Series(), Series()
    staleness: dict[str, list[float]] = {name: [] for name in names}
    not_ready: dict[str, int] = dict.fromkeys(names, 0)
    profiles: dict[str, dict[str, float | int]] = {}
    first_threads: dict[str, dict[tuple[int, int], tuple[str, float]]] = {}
    last_threads: dict[str, dict[tuple[int, int], tuple[str, float]]] = {n: {} for n in names}
    start = time.monotonic()
    archive: dict[str, float] = {}
    samples = 0
    while True:
        now = time.monotonic()
        final = now - start >= window
        stats = all_stats()
        by_pid = {s.pid: s for s in stats}
        for name in names:
            if node:  # the view's pods
                members, cpu = view_pods_usage(core, namespace, name)
                rss = sum(by_pid[pid].rss_mb for pid in members if pid in by_pid)
            else:
                cpu, rss = session_usage(stats, sessions[name])
                members = [s.pid for s in stats if s.session == sessions[name]]
            series[name].cpu.append((now, cpu))
            series[name].rss_mb.append(rss)
            detail = samples % DETAIL_EVERY == 0 or final
            if detail:
                series[name].pss_mb.append(pss_mb(members))
                archive[name] = archive_mb(members)
                threads = thread_cpu(members, by_pid)
                first_threads.setdefault(name, threads)
                last_threads[name].update(threads)
            series[name].archive_mb.append(archive[name])
            if rss >= max(series[name].rss_mb):  # where the memory goes at its peak
                profiles[name] = profile_of(members, by_pid)
        for pid, target in ((s3_pid, s3), (kafka_pid, kafka)):
            if pid is not None and pid in by_pid:
                target.cpu.append((now, by_pid[pid].cpu_seconds + by_pid[pid].children_seconds))
                target.rss_mb.append(by_pid[pid].rss_mb)
        for handle, name in zip(handles, names, strict=True):
            status = handle.status()
            seconds = staleness_seconds(status)
            if seconds is not None:
                staleness[name].append(seconds)
            if not handle.ready():
                not_ready[name] += 1
        if final:
            break
        samples += 1
        next_sample = now + 1.0
        wait_for(lambda: time.monotonic() >= next_sample, timeout=5, interval=0.05,  # noqa: B023
                 what="the next sample")
    per_view = {name: {**series[name].summary(),
                       "staleness_max_s": max(staleness[name]) if staleness[name] else None,
                       "not_ready_samples": not_ready[name],
                       "memory_at_peak": profiles.get(name),
                       "cores_by_thread": cores_by_group(
                           first_threads.get(name, {}), last_threads[name],
                           series[name].cpu[-1][0] - series[name].cpu[0][0],
                           series[name].cores())} for name in names}
    s3_cores = s3.cores()
    views = len(names)
    totals = [(series[n].cores() or 0.0) + (s3_cores or 0.0) / views for n in names]
    return {
        "per_view": per_view,
        "s3_store": {**s3.summary(), "share_per_view_cores": _round(
            (s3_cores or 0.0) / views, 4)},
        "kafka_broker": kafka.summary(),
        "cores_per_view_mean": round(statistics.fmean(totals), 4),
        "cores_per_view_max": round(max(totals), 4),
        "rss_mb_per_view_max": max(p["rss_mb_max"] or 0.0 for p in per_view.values()),
        # what the goal is judged on: the same processes as the job image runs them
        "image_rss_mb_per_view_max": max(p["image_rss_mb_max"] or 0.0
                                         for p in per_view.values()),
        "pss_mb_per_view_mean": round(statistics.fmean(
            p["pss_mb_mean"] or 0.0 for p in per_view.values()), 1),
        "gate_held": all(p["not_ready_samples"] == 0 for p in per_view.values()),
    }


if __name__ == "__main__":
    main()
