"""Local SparkApplication executor: a STAND-IN for the Kubeflow Spark Operator.

Neither the Spark Operator nor a kubelet can run on a machine without a
container runtime, so for tests and the demo this process plays both parts:
it watches `sparkoperator.k8s.io/v1beta2` SparkApplications in a real API
server and runs each one as `spark-submit --master local[N]`, maintaining the
status fields the real operator maintains.  It is not a Spark Operator; it
honours only the fields listed below and ignores the rest (pod templates,
volumes, node selectors, dynamic allocation, monitoring...).

Honoured spec fields:
- `type` (Python only; others fail with SUBMISSION_FAILED), `mainApplicationFile`
  (`local://` scheme or a plain path; `--path-map PREFIX=DIR` rewrites image
  paths such as `/opt/derived-views` to a local checkout), `arguments`,
  `sparkConf`, `hadoopConf` (as `spark.hadoop.*`), `deps.jars`, `deps.pyFiles`,
  `deps.files`, `driver.cores`, `driver.memory`, `executor.instances` x
  `executor.cores` (the N of local[N], capped at this machine's cores),
  `driver.env` and `executor.env` (`value`, `valueFrom.secretKeyRef`,
  `valueFrom.configMapKeyRef`, resolved against real Secrets/ConfigMaps),
  `driver.envFrom` (secretRef / configMapRef), `restartPolicy` (`Never`,
  `OnFailure` with `onFailureRetries`, `onFailureRetryInterval`,
  `onSubmissionFailureRetries`, `onSubmissionFailureRetryInterval`, `Always`).
- A spec change (metadata.generation) kills the running job and resubmits, as
  the real operator does; deleting the SparkApplication kills the job.

Maintained status fields: `applicationState.state` (SUBMITTED, RUNNING,
PENDING_RERUN, INVALIDATING, COMPLETED, FAILED, SUBMISSION_FAILED) and
`applicationState.errorMessage`, `submissionAttempts`, `executionAttempts`,
`lastSubmissionAttemptTime`, `terminationTime`, `sparkApplicationId`,
`submissionID`, `driverInfo.podName` (a name only: there is no pod).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import datetime as dt
import logging
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

GROUP = "sparkoperator.k8s.io"
VERSION = "v1beta2"
PLURAL = "sparkapplications"
TERMINAL = {"COMPLETED", "FAILED", "SUBMISSION_FAILED"}

log = logging.getLogger("spark-executor")


class SubmissionError(Exception):
    """The application cannot be submitted as written (bad spec, missing secret)."""


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Run:
    """What the executor knows about one SparkApplication (by uid)."""

    namespace: str
    name: str
    uid: str
    generation: int
    spec: dict[str, Any]
    submission_attempts: int = 0
    execution_attempts: int = 0
    failures: int = 0
    submission_failures: int = 0
    proc: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None
    rerun_at: float | None = None
    done: bool = False
    app_id: str = ""
    killing: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


class Executor:
    def __init__(self, *, spark_submit: str, jars: list[str], logs_dir: Path,
                 path_map: dict[str, str], max_cores: int, python: str,
                 work_dir: Path) -> None:
        self.api = client.CustomObjectsApi()
        self.core = client.CoreV1Api()
        self.spark_submit = spark_submit
        self.jars = jars
        self.logs_dir = logs_dir
        self.path_map = path_map
        self.max_cores = max_cores
        self.python = python
        self.work_dir = work_dir
        self.runs: dict[str, Run] = {}
        self.lock = threading.RLock()
        self.stopping = threading.Event()

    # ---- status -----------------------------------------------------------
    def _patch_status(self, run: Run, state: str, error: str = "", **extra: Any) -> None:
        status: dict[str, Any] = {
            "applicationState": {"state": state, "errorMessage": error},
            "submissionAttempts": run.submission_attempts,
            "executionAttempts": run.execution_attempts,
            **extra,
        }
        if run.app_id:
            status["sparkApplicationId"] = run.app_id
        try:
            self.api.patch_namespaced_custom_object_status(
                GROUP, VERSION, run.namespace, PLURAL, run.name, {"status": status})
        except ApiException as exc:
            if exc.status != 404:
                log.warning("status update of %s/%s failed: %s", run.namespace, run.name, exc.reason)
        log.info("%s/%s -> %s %s", run.namespace, run.name, state, error[:200])

    # ---- spec translation -------------------------------------------------
    def _local_path(self, uri: str) -> str:
        path = uri.removeprefix("local://") if uri.startswith("local://") else uri
        if path.startswith("file://"):
            path = path.removeprefix("file://")
        for prefix, target in self.path_map.items():
            if path == prefix or path.startswith(prefix.rstrip("/") + "/"):
                return target.rstrip("/") + path[len(prefix.rstrip("/")):]
        return path

    def _ref_value(self, kind: str, namespace: str, name: str, key: str,
                   optional: bool) -> str | None:
        """One key of a Secret (base64-decoded) or ConfigMap, as a kubelet resolves env refs."""
        read = (self.core.read_namespaced_secret if kind == "secret"
                else self.core.read_namespaced_config_map)
        try:
            obj = read(name, namespace)
        except ApiException as exc:
            if exc.status == 404 and optional:
                return None
            raise SubmissionError(f"{kind} {namespace}/{name}: {exc.reason}") from None
        data = obj.data or {}
        if key not in data:
            if optional:
                return None
            raise SubmissionError(f"{kind} {namespace}/{name} has no key {key!r}")
        return base64.b64decode(data[key]).decode() if kind == "secret" else str(data[key])

    def _env(self, namespace: str, spec: dict[str, Any]) -> dict[str, str]:
        env: dict[str, str] = {}
        for role in ("executor", "driver"):  # driver wins: it is where foreachBatch runs
            role_spec = spec.get(role) or {}
            for source in role_spec.get("envFrom") or []:
                if "secretRef" in source:
                    ref = source["secretRef"]
                    try:
                        secret = self.core.read_namespaced_secret(ref["name"], namespace)
                    except ApiException as exc:
                        raise SubmissionError(f"secret {namespace}/{ref['name']}: {exc.reason}") from None
                    for k, v in (secret.data or {}).items():
                        env[source.get("prefix", "") + k] = base64.b64decode(v).decode()
                if "configMapRef" in source:
                    ref = source["configMapRef"]
                    cm = self.core.read_namespaced_config_map(ref["name"], namespace)
                    for k, v in (cm.data or {}).items():
                        env[source.get("prefix", "") + k] = str(v)
            for var in role_spec.get("env") or []:
                name = var["name"]
                if "value" in var:
                    env[name] = str(var["value"])
                    continue
                value_from = var.get("valueFrom") or {}
                value: str | None = None
                if "secretKeyRef" in value_from:
                    ref = value_from["secretKeyRef"]
                    value = self._ref_value("secret", namespace, ref["name"], ref["key"],
                                            bool(ref.get("optional")))
                elif "configMapKeyRef" in value_from:
                    ref = value_from["configMapKeyRef"]
                    value = self._ref_value("configmap", namespace, ref["name"], ref["key"],
                                            bool(ref.get("optional")))
                else:
                    raise SubmissionError(f"env {name}: only value, secretKeyRef and "
                                          "configMapKeyRef are supported by the local executor")
                if value is not None:
                    env[name] = value
        return env

    def _argv(self, run: Run) -> list[str]:
        spec = run.spec
        if spec.get("type") != "Python":
            raise SubmissionError(f"type {spec.get('type')!r}: the local executor runs Python applications only")
        main = spec.get("mainApplicationFile")
        if not main:
            raise SubmissionError("spec.mainApplicationFile is required")
        main_path = self._local_path(str(main))
        if not Path(main_path).is_file():
            raise SubmissionError(f"mainApplicationFile {main!r} resolves to {main_path}, which does not exist")
        executor = spec.get("executor") or {}
        cores = int(executor.get("instances", 1) or 1) * int(executor.get("cores", 1) or 1)
        cores = max(1, min(cores, self.max_cores))
        app_name = f"{run.namespace}-{run.name}"
        argv = [self.spark_submit, "--master", f"local[{cores}]", "--name", app_name]
        driver = spec.get("driver") or {}
        if driver.get("memory"):
            argv += ["--driver-memory", _spark_memory(str(driver["memory"]))]
        deps = spec.get("deps") or {}
        jars = [*self.jars, *(self._local_path(j) for j in deps.get("jars") or [])]
        if jars:
            argv += ["--jars", ",".join(jars)]
        py_files = [self._local_path(p) for p in deps.get("pyFiles") or []]
        if py_files:
            argv += ["--py-files", ",".join(py_files)]
        files = [self._local_path(p) for p in deps.get("files") or []]
        if files:
            argv += ["--files", ",".join(files)]
        conf: dict[str, str] = {
            "spark.ui.enabled": "false",
            "spark.local.dir": str(self.work_dir / "tmp"),
            "spark.app.id": run.app_id,
        }
        conf.update({f"spark.hadoop.{k}": str(v) for k, v in (spec.get("hadoopConf") or {}).items()})
        conf.update({str(k): str(v) for k, v in (spec.get("sparkConf") or {}).items()})
        for k, v in conf.items():
            argv += ["--conf", f"{k}={v}"]
        argv.append(main_path)
        argv += [str(a) for a in spec.get("arguments") or []]
        return argv

    # ---- lifecycle --------------------------------------------------------
    def _submit(self, run: Run) -> None:
        run.submission_attempts += 1
        run.app_id = f"local-{int(time.time() * 1000)}-{uuid.uuid4().hex[:6]}"
        run.rerun_at = None
        try:
            argv = self._argv(run)
            env = {**os.environ, "PYSPARK_PYTHON": self.python,
                   "PYSPARK_DRIVER_PYTHON": self.python, **self._env(run.namespace, run.spec)}
        except SubmissionError as exc:
            self._submission_failed(run, str(exc))
            return
        (self.work_dir / "tmp").mkdir(parents=True, exist_ok=True)
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        run.log_path = self.logs_dir / f"{run.namespace}_{run.name}_{run.submission_attempts}.log"
        with open(run.log_path, "wb") as out:
            out.write(("$ " + shlex.join(argv) + "\n").encode())
            out.flush()
            try:
                run.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, env=env,
                                            cwd=self.work_dir, start_new_session=True)
            except OSError as exc:
                self._submission_failed(run, f"spark-submit could not start: {exc}")
                return
        run.execution_attempts += 1
        self._patch_status(run, "SUBMITTED", lastSubmissionAttemptTime=_now(),
                           submissionID=run.app_id,
                           driverInfo={"podName": f"{run.name}-driver"})
        # There is no driver pod to wait for: the process is the driver.
        self._patch_status(run, "RUNNING")

    def _submission_failed(self, run: Run, message: str) -> None:
        run.submission_failures += 1
        policy = run.spec.get("restartPolicy") or {}
        retries = int(policy.get("onSubmissionFailureRetries", 0) or 0)
        if policy.get("type") in ("OnFailure", "Always") and run.submission_failures <= retries:
            interval = float(policy.get("onSubmissionFailureRetryInterval", 5) or 5)
            run.rerun_at = time.monotonic() + interval
            self._patch_status(run, "PENDING_RERUN", message)
            return
        run.done = True
        self._patch_status(run, "SUBMISSION_FAILED", message, terminationTime=_now())

    def _on_exit(self, run: Run, code: int) -> None:
        run.proc = None
        if run.killing:
            return
        policy = run.spec.get("restartPolicy") or {}
        kind = policy.get("type", "Never")
        if code == 0:
            if kind == "Always":
                run.rerun_at = time.monotonic() + float(policy.get("onFailureRetryInterval", 5) or 5)
                self._patch_status(run, "PENDING_RERUN")
                return
            run.done = True
            self._patch_status(run, "COMPLETED", terminationTime=_now())
            return
        run.failures += 1
        message = _error_summary(run.log_path, code)
        retries = int(policy.get("onFailureRetries", 0) or 0)
        if kind == "Always" or (kind == "OnFailure" and run.failures <= retries):
            interval = float(policy.get("onFailureRetryInterval", 5) or 5)
            run.rerun_at = time.monotonic() + interval
            self._patch_status(run, "PENDING_RERUN", message)
            return
        run.done = True
        self._patch_status(run, "FAILED", message, terminationTime=_now())

    def _kill(self, run: Run, grace: float = 20.0) -> None:
        proc = run.proc
        if proc is None:
            return
        run.killing = True
        _signal_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        _signal_group(proc.pid, signal.SIGKILL)
        run.proc = None
        run.killing = False

    # ---- events -----------------------------------------------------------
    def on_event(self, kind: str, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        uid = meta["uid"]
        with self.lock:
            run = self.runs.get(uid)
            if kind == "DELETED":
                if run is not None:
                    log.info("%s/%s deleted: stopping its job", run.namespace, run.name)
                    self._kill(run)
                    del self.runs[uid]
                return
            if meta.get("deletionTimestamp"):
                if run is not None:
                    self._kill(run)
                return
            generation = int(meta.get("generation", 1))
            if run is None:
                state = ((obj.get("status") or {}).get("applicationState") or {}).get("state", "")
                run = Run(namespace=meta["namespace"], name=meta["name"], uid=uid,
                          generation=generation, spec=obj.get("spec") or {})
                status = obj.get("status") or {}
                run.submission_attempts = int(status.get("submissionAttempts", 0) or 0)
                run.execution_attempts = int(status.get("executionAttempts", 0) or 0)
                self.runs[uid] = run
                if state in TERMINAL:
                    run.done = True  # finished before this executor started: leave it
                    return
                self._submit(run)
                return
            if generation != run.generation:
                log.info("%s/%s spec changed: resubmitting", run.namespace, run.name)
                self._patch_status(run, "INVALIDATING")
                self._kill(run)
                run.generation = generation
                run.spec = obj.get("spec") or {}
                run.failures = 0
                run.done = False
                self._submit(run)

    def tick(self) -> None:
        """Reap finished jobs and start due reruns."""
        with self.lock:
            for run in list(self.runs.values()):
                if run.proc is not None and not run.killing:
                    code = run.proc.poll()
                    if code is not None:
                        self._on_exit(run, code)
                if run.proc is None and not run.done and run.rerun_at is not None \
                        and time.monotonic() >= run.rerun_at:
                    self._submit(run)

    def shutdown(self) -> None:
        with self.lock:
            for run in self.runs.values():
                self._kill(run, grace=10)

    def watch_forever(self) -> None:
        while not self.stopping.is_set():
            try:
                listing = self.api.list_cluster_custom_object(GROUP, VERSION, PLURAL)
                seen = set()
                for item in listing.get("items", []):
                    seen.add(item["metadata"]["uid"])
                    self.on_event("ADDED", item)
                with self.lock:
                    for uid in [u for u in self.runs if u not in seen]:
                        run = self.runs[uid]
                        self.on_event("DELETED", {"metadata": {"uid": uid, "namespace": run.namespace,
                                                               "name": run.name}})
                rv = listing["metadata"]["resourceVersion"]
                w = watch.Watch()
                for event in w.stream(self.api.list_cluster_custom_object, GROUP, VERSION, PLURAL,
                                      resource_version=rv, timeout_seconds=60):
                    if self.stopping.is_set():
                        w.stop()
                        break
                    if event["type"] == "ERROR":
                        break
                    self.on_event(event["type"], event["object"])
            except ApiException as exc:
                if exc.status != 410:
                    log.warning("watch failed: %s; relisting", exc.reason)
                    self.stopping.wait(1)
            except Exception as exc:
                log.warning("watch error: %r; relisting", exc)
                self.stopping.wait(1)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _spark_memory(k8s_memory: str) -> str:
    """Kubernetes quantities (512Mi, 1Gi) to Spark's (512m, 1g)."""
    m = re.fullmatch(r"(\d+)([KMGT]i?|[kmgt])?", k8s_memory.strip())
    if not m:
        raise SubmissionError(f"memory {k8s_memory!r} is not a quantity like 512m or 1Gi")
    number, unit = m.groups()
    return number + (unit[0].lower() if unit else "")


_ERROR_LINE = re.compile(r"(Error|Exception|error:)", re.IGNORECASE)


def _error_summary(log_path: Path | None, code: int) -> str:
    """The most telling lines of a failed driver's log, for status.errorMessage."""
    if log_path is None or not log_path.is_file():
        return f"driver exited with code {code}"
    lines = log_path.read_text(errors="replace").splitlines()
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("Traceback (most recent call last)"):
            tail = [ln for ln in lines[i:] if ln.strip()]
            last = next((ln for ln in reversed(tail) if _ERROR_LINE.search(ln)), tail[-1])
            return f"driver exited with code {code}: {last.strip()[:900]}"
    for line in reversed(lines):
        if _ERROR_LINE.search(line):
            return f"driver exited with code {code}: {line.strip()[:900]}"
    return f"driver exited with code {code}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--spark-submit", required=True)
    parser.add_argument("--jars", default="", help="comma-separated jars added to every job")
    parser.add_argument("--logs-dir", required=True)
    parser.add_argument("--work-dir", required=True)
    parser.add_argument("--path-map", action="append", default=[], help="PREFIX=DIR")
    parser.add_argument("--max-cores", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    config.load_kube_config(config_file=args.kubeconfig)
    path_map = dict(item.split("=", 1) for item in args.path_map)
    executor = Executor(
        spark_submit=args.spark_submit, jars=[j for j in args.jars.split(",") if j],
        logs_dir=Path(args.logs_dir), path_map=path_map, max_cores=args.max_cores,
        python=args.python, work_dir=Path(args.work_dir),
    )

    def stop(signum: int, frame: object) -> None:
        executor.stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    watcher = threading.Thread(target=executor.watch_forever, daemon=True, name="watch")
    watcher.start()
    log.info("local SparkApplication executor (stand-in for the Spark Operator) started")
    while not executor.stopping.wait(0.5):
        executor.tick()
    executor.shutdown()
    log.info("stopped")


if __name__ == "__main__":
    main()
