"""What one operator costs with many idle views, measured on the local stack.

Creates N DerivedViews (default 1,000) over N one-partition topics of a few
records each, waits until every view serves its first revision, then measures
the operator over an idle window and the time from a spec change on one view to
its candidate's SparkApplication while the others idle.

The job side is SIMULATED: N Spark drivers cannot run on a small machine.  The
stand-in executor is stopped for the run (`python -m dvstack up` starts it
again at the end), and this script plays each job: it sets every
SparkApplication's state to RUNNING, as the Spark Operator would, and commits
one ledger batch carrying the topic's end offsets through the job's own sink
code (`dvjob.sinks.postgres.sink`), with no rows.  The operator is the real one, as
its own process with production settings (lag poll 5 s, default pool size),
watching the benchmark's namespace only, so views other runs or tests left on
the stack are neither passed nor counted.

Figures (printed, and written to .stack/results/operator_scale.json):
- operator CPU as % of one core and its RSS (peak of 1 s samples), from /proc;
- Kubernetes API requests/s: the API server's `apiserver_request_total` over
  the window, less a baseline measured before the operator started;
- Kafka end-offset requests per lag poll (`derived_views_end_offsets_fetches`);
- PostgreSQL: the operator's open sessions (peak, by application_name) and
  sessions opened per second (`pg_stat_database.sessions`, on a database this
  script alone watches from one connection);
- reconcile passes/s and their mean duration, status patches/s;
- seconds from patching one view's SQL to its candidate's SparkApplication.

Usage: python benchmarks/operator_scale.py [VIEWS] [IDLE_SECONDS]   (stack up)
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import psycopg
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kubernetes import client, config

from dvstack import processes
from dvstack.cli import SPARK_EXECUTOR, apply_crds
from dvstack.settings import load
from dvstack.testing import replay
from dvstack.testing import results as results_file
from dvstack.testing.termination import clean_up_on_signals
from dvstack.testing.waiting import TimedOut, wait_for

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "spark_templates"))

from dvjob.config import parse_config  # noqa: E402
from dvjob.sinks.postgres.sink import PostgresSink  # noqa: E402
from dvjob.sinks.schema import table_layout  # noqa: E402

G, V, P = "derivedviews.io", "v1alpha1", "derivedviews"
SPARK = ("sparkoperator.k8s.io", "v1beta2", "sparkapplications")
RECORDS_PER_TOPIC = 3
POLL_SECONDS = 5.0
CHANGES = 5
"""Spec changes measured one after another, each on another view; the slowest is reported."""
SECRET = "views-db"
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)$")


def samples(text: str, name: str) -> list[tuple[str, float]]:
    """(labels, value) of every sample of metric `name` in Prometheus text format."""
    found = []
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match and match.group(1) == name:
            found.append((match.group(2) or "", float(match.group(3))))
    return found


def apiserver_metrics(api: Any) -> str:
    token = api.configuration.api_key.get("BearerToken")
    response = api.call_api("GET", f"{api.configuration.host}/metrics",
                            header_params={"Authorization": token} if token else {})
    response.read()
    return str(response.data.decode())


def api_requests(api: Any) -> tuple[float, float]:
    """All requests the API server has served, and status patches of DerivedViews."""
    text = apiserver_metrics(api)
    rows = samples(text, "apiserver_request_total")
    status = sum(v for labels, v in rows if 'resource="derivedviews"' in labels
                 and 'subresource="status"' in labels and 'verb="PATCH"' in labels)
    return sum(v for _labels, v in rows), status


def operator_metrics(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        return str(response.read().decode())


def metric_sum(text: str, name: str) -> float:
    return sum(v for _labels, v in samples(text, name))


def cpu_seconds(pid: int) -> float:
    return processes.proc_stat(pid).cpu_seconds  # utime + stime


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Jobs(threading.Thread):
    """The simulated job side: RUNNING state and one committed ledger batch per application."""

    def __init__(self, custom: Any, namespace: str, dsn: str, ends: dict[str, int]) -> None:
        super().__init__(daemon=True)
        self.custom, self.namespace, self.dsn, self.ends = custom, namespace, dsn, ends
        self.done: set[str] = set()
        self.stop = threading.Event()
        self.active = threading.Event()
        self.active.set()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                if self.active.is_set():
                    self.serve()
                self.stop.wait(1.0)
        except BaseException as exc:  # reported by the main thread
            self.error = exc

    def serve(self) -> None:
        apps = self.custom.list_namespaced_custom_object(*SPARK[:2], self.namespace, SPARK[2])
        for app in apps["items"]:
            name = app["metadata"]["name"]
            if name not in self.done:
                self.commit(app)
                self.done.add(name)
            state = ((app.get("status") or {}).get("applicationState") or {}).get("state")
            if state != "RUNNING":
                self.custom.patch_namespaced_custom_object_status(
                    *SPARK[:2], self.namespace, SPARK[2], name,
                    {"status": {"applicationState": {"state": "RUNNING"}, "driverInfo": {}}})

    def commit(self, app: dict[str, Any]) -> None:
        from pyspark.sql.types import LongType, StringType, StructField, StructType

        args = app["spec"]["arguments"]
        job = parse_config(args[args.index("--config-json") + 1])
        layout = table_layout(StructType([StructField("k", StringType()),
                                          StructField("v", LongType())]),
                              job.sink.primary_key)
        sink = PostgresSink(connect=lambda: psycopg.connect(self.dsn), schema=job.sink.db_schema,
                            table=job.sink.table, ledger_table=job.sink.ledger_table,
                            revision=job.revision, layout=layout)
        sink.prepare()
        topic = job.source.topics[0]
        sink.write_batch(0, [], {topic: {"0": self.ends[topic]}})


def view(namespace: str, name: str, topic: str, bootstrap: str, schema: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{G}/{V}", "kind": "DerivedView",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "source": {"kafka": {"bootstrapServers": bootstrap}, "topics": [topic],
                       "format": "json", "schema": "k STRING, v BIGINT"},
            "transform": {"sql": "SELECT k, v FROM events"},
            "sink": {"postgres": {"secretRef": {"name": SECRET}, "table": name.replace("-", "_"),
                                  "schema": schema}, "primaryKey": ["k"]},
            "deletionPolicy": "Retain",
        },
    }


def ready(custom: Any, namespace: str) -> int:
    items = custom.list_namespaced_custom_object(G, V, namespace, P)["items"]
    return sum(1 for item in items
               if any(c.get("type") == "Ready" and c.get("status") == "True"
                      for c in (item.get("status") or {}).get("conditions") or []))


def create_topics(bootstrap: str, topics: list[str]) -> dict[str, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap, **replay.QUIET})
    for start in range(0, len(topics), 200):
        futures = admin.create_topics([NewTopic(t, 1, 1) for t in topics[start:start + 200]])
        for future in futures.values():
            future.result(timeout=120)
    producer = Producer({"bootstrap.servers": bootstrap, **replay.QUIET})
    for topic in topics:
        for i in range(RECORDS_PER_TOPIC):
            producer.produce(topic, json.dumps({"k": f"k{i}", "v": i}).encode(), key=f"k{i}")
    producer.flush(120)
    return {t: RECORDS_PER_TOPIC for t in topics}


def main() -> None:
    clean_up_on_signals()  # a killed run deletes what it started, as one that ends
    views_n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    idle_seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 300.0
    settings = load()
    info = json.loads(settings.stack_file.read_text())
    api = config.new_client_from_config(config_file=info["kubeconfig"])
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    run = uuid.uuid4().hex[:6]
    ns, schema, bootstrap = f"scale-{run}", f"scale_{run}", info["kafka_bootstrap"]
    pg = dict(info["pg"])
    bench_db = f"scale_{run}"
    admin_dsn = info["pg_dsn"]
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{bench_db}"')
    pg["database"] = bench_db
    dsn = (f"host={pg['host']} port={pg['port']} dbname={bench_db} user={pg['user']} "
           f"password={pg['password']}")
    topics = [f"scale-{run}-{i:04d}" for i in range(views_n)]
    print(f"{views_n} views in namespace {ns}, database {bench_db}", flush=True)

    if processes.stop(settings, SPARK_EXECUTOR):
        print("stopped the stand-in executor (the job side is simulated)", flush=True)
    results: dict[str, Any] = {
        "views": views_n, "idle_seconds": idle_seconds,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    operator: subprocess.Popen[bytes] | None = None
    jobs: Jobs | None = None
    log = open(settings.logs_dir / f"operator-scale-{run}.log", "ab")  # noqa: SIM115
    try:
        started = time.monotonic()
        ends = create_topics(bootstrap, topics)
        print(f"{views_n} topics created and filled in {time.monotonic() - started:.1f}s",
              flush=True)
        replay.ensure_namespace_and_sink_secret(core, ns, SECRET, pg)
        apply_crds(api, [REPO / "crds" / "derivedviews.io_derivedviews.yaml"])

        base_api, _ = api_requests(api)
        time.sleep(30)  # a measurement window, not a synchronisation
        base_rate = (api_requests(api)[0] - base_api) / 30
        results["baseline_api_requests_per_second"] = round(base_rate, 2)

        metrics_port = processes.free_port()
        operator = subprocess.Popen(
            # its own namespace only: views other runs or tests left behind are not counted
            [sys.executable, "-m", "derived_views.main", "--namespace", ns], stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "KUBECONFIG": info["kubeconfig"],
                 "DV_METRICS_PORT": str(metrics_port), "DV_LAG_POLL_SECONDS": str(POLL_SECONDS)})
        jobs = Jobs(custom, ns, dsn, ends)
        jobs.start()
        created = time.monotonic()
        for i, topic in enumerate(topics):
            custom.create_namespaced_custom_object(G, V, ns, P, view(ns, f"v-{i:04d}", topic,
                                                                     bootstrap, schema))
        results["create_seconds"] = round(time.monotonic() - created, 1)
        wait_for(lambda: ready(custom, ns) == views_n or None, timeout=3600, interval=5,
                 what=f"all {views_n} views to serve their first revision")
        results["all_ready_seconds"] = round(time.monotonic() - created, 1)
        print(f"all {views_n} views ready {results['all_ready_seconds']}s after the first "
              "create", flush=True)
        jobs.active.clear()  # idle: nothing for the job side to do
        settling = time.monotonic()
        with contextlib.suppress(TimedOut):  # measured as it stands: the count says
            wait_for(lambda: settled_views(metrics_port) == views_n or None, timeout=600,
                     interval=2, what=f"all {views_n} views to settle")
        results["settled_views"] = settled_views(metrics_port)
        results["settle_seconds"] = round(time.monotonic() - settling, 1)
        results.update(idle(api, operator.pid, metrics_port, dsn, bench_db, idle_seconds,
                            base_rate))
        jobs.active.set()
        changes = [change_one(custom, ns, f"v-{i:04d}") for i in range(CHANGES)]
        results["change_to_candidate_samples"] = changes
        results["change_to_candidate_seconds"] = max(changes)
    finally:
        if jobs is not None:
            jobs.stop.set()
        if operator is not None:
            operator.terminate()
            operator.wait(timeout=60)
        log.close()
        cleanup(custom, core, ns, bootstrap, topics, admin_dsn, bench_db)
        subprocess.run([sys.executable, "-m", "dvstack", "up"], check=False,
                       stdout=subprocess.DEVNULL)
    if jobs is not None and jobs.error is not None:
        results["job_side_error"] = repr(jobs.error)
    results_file.save(settings, "operator_scale", results)
    print(json.dumps(results, indent=2))


def idle(api: Any, pid: int, metrics_port: int, dsn: str, db: str, seconds: float,
         base_rate: float) -> dict[str, Any]:
    """The operator's cost over `seconds` with every view caught up and nothing changing."""
    with psycopg.connect(dsn, autocommit=True) as watch:
        def pg_counts() -> tuple[int, int]:
            open_ = watch.execute("SELECT count(*) FROM pg_stat_activity WHERE "
                                  "application_name = 'derived-views-operator'").fetchone()
            opened = watch.execute("SELECT sessions FROM pg_stat_database WHERE datname = %s",
                                   (db,)).fetchone()
            return int(open_[0] if open_ else 0), int(opened[0] if opened else 0)

        cpu0, (api0, status0) = cpu_seconds(pid), api_requests(api)
        text0 = operator_metrics(metrics_port)
        _, sessions0 = pg_counts()
        t0 = time.monotonic()
        peak_rss, peak_pg = rss_mb(pid), 0
        while time.monotonic() - t0 < seconds:
            time.sleep(1.0)  # a sampling interval
            peak_rss = max(peak_rss, rss_mb(pid))
            peak_pg = max(peak_pg, pg_counts()[0])
        elapsed = time.monotonic() - t0
        cpu1, (api1, status1) = cpu_seconds(pid), api_requests(api)
        text1 = operator_metrics(metrics_port)
        _, sessions1 = pg_counts()
    passes = (metric_sum(text1, "derived_views_reconcile_duration_seconds_count")
              - metric_sum(text0, "derived_views_reconcile_duration_seconds_count"))
    pass_time = (metric_sum(text1, "derived_views_reconcile_duration_seconds_sum")
                 - metric_sum(text0, "derived_views_reconcile_duration_seconds_sum"))
    fetches = (metric_sum(text1, "derived_views_end_offsets_fetches_total")
               - metric_sum(text0, "derived_views_end_offsets_fetches_total"))
    return {
        "idle_measured_seconds": round(elapsed, 1),
        "cpu_percent_of_one_core": round(100 * (cpu1 - cpu0) / elapsed, 1),
        "rss_mb_peak": round(peak_rss, 1),
        "api_requests_per_second": round((api1 - api0) / elapsed - base_rate, 1),
        "status_patches_per_second": round((status1 - status0) / elapsed, 2),
        "kafka_offset_requests_per_poll": round(fetches / (elapsed / POLL_SECONDS), 1),
        "pg_operator_sessions_peak": peak_pg,
        # the watching connection is this script's and was open throughout
        "pg_sessions_opened_per_second": round((sessions1 - sessions0) / elapsed, 2),
        "passes_per_second": round(passes / elapsed, 1),
        "mean_pass_seconds": round(pass_time / passes, 4) if passes else None,
    }


def settled_views(port: int) -> int:
    return int(metric_sum(operator_metrics(port), "derived_views_settled_views"))


def change_one(custom: Any, ns: str, name: str) -> float:
    """Seconds from a spec change on one view to its candidate's SparkApplication."""
    before = {a["metadata"]["name"] for a in custom.list_namespaced_custom_object(
        *SPARK[:2], ns, SPARK[2], label_selector=f"derivedviews.io/view={name}")["items"]}
    started = time.monotonic()
    custom.patch_namespaced_custom_object(G, V, ns, P, name, {"spec": {"transform": {
        "sql": "SELECT k, v + 1 AS v FROM events"}}})

    def candidate() -> bool:
        apps = custom.list_namespaced_custom_object(
            *SPARK[:2], ns, SPARK[2], label_selector=f"derivedviews.io/view={name}")["items"]
        return bool({a["metadata"]["name"] for a in apps} - before)

    wait_for(candidate, timeout=600, interval=0.05, what="the candidate's SparkApplication")
    return round(time.monotonic() - started, 2)


def cleanup(custom: Any, core: Any, ns: str, bootstrap: str, topics: list[str],
            admin_dsn: str, db: str) -> None:
    """With the operator stopped: release the views' finalizers, drop the namespace, the
    topics and the database (whatever of them a failed run got to create)."""
    from kubernetes.client.exceptions import ApiException

    try:
        for item in custom.list_namespaced_custom_object(G, V, ns, P)["items"]:
            custom.patch_namespaced_custom_object(G, V, ns, P, item["metadata"]["name"],
                                                  {"metadata": {"finalizers": None}})
        core.delete_namespace(ns)
    except ApiException as exc:
        if exc.status != 404:
            raise
    admin = AdminClient({"bootstrap.servers": bootstrap, **replay.QUIET})
    for start in range(0, len(topics), 200):
        for future in admin.delete_topics(topics[start:start + 200]).values():
            try:
                future.result(timeout=120)
            except Exception as exc:  # a topic the run never created
                if "UNKNOWN_TOPIC" not in str(exc):
                    raise
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


if __name__ == "__main__":
    main()
