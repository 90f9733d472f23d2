"""Local Spark Operator + kubelet: a STAND-IN for the Kubeflow Spark Operator v2.5.2.

Neither the Spark Operator nor a kubelet can run on a machine without a
container runtime, so for tests and the demo this process plays both parts
against a real API server with the operator's real CRD (`spark_crd`):

- as the operator (`spark_app_states`, the upstream state machine), it submits
  each `sparkoperator.k8s.io/v1beta2` SparkApplication by creating its driver
  Pod `<app>-driver` (`spark_driver_pod`: Spark's labels, container
  `spark-kubernetes-driver`, and, where the operator's webhook serves the
  namespace, the ownerReference to the application and `driver.env`/`envFrom`),
  and maintains the application's status from that pod as upstream does;
- as the kubelet (`local_kubelet`), it runs the pods bound to its Node as
  `spark-submit --master local[N]` (`spark_local_command`) and reports their
  status as a kubelet does (`kubelet_model`).

It honours only the fields listed below and ignores the rest (`volumes`, pod
templates, node selectors, dynamic allocation, monitoring, UI services...).

Honoured spec fields:
- `type` (Python only: others are SUBMISSION_FAILED), `mainApplicationFile`
  (`local://` or a plain path; `--path-map PREFIX=DIR` maps image paths such as
  `/opt/derived-views` to a checkout), `arguments`, `sparkConf`, `hadoopConf`
  (as `spark.hadoop.*`), `deps.jars`, `deps.pyFiles`, `deps.files`,
  `driver.memory`, `driver.javaOptions`, `executor.instances` x `executor.cores` (the N of local[N],
  capped at this machine's cores), `image`/`driver.image` (shown in the pod
  only; a missing image is not refused as Spark would), `driver.podName`,
  `driver.serviceAccount`, `driver.labels`/`annotations`, `driver.envVars`,
  `driver.envSecretKeyRefs`, `driver.secrets`/`executor.secrets` (Generic:
  the driver pod gets Spark's `<name>-volume` Secret volumes and mounts; the
  kubelet writes the Secret to a directory of this submission, which
  `spark.kubernetes.{driver,executor}.secrets.<name>` name in place of the
  cluster's path, see `secret_volumes`), and through the webhook (namespaces of
  `--job-namespaces`, default all): `driver.env` (`value`, `valueFrom`
  secretKeyRef/configMapKeyRef/fieldRef), `driver.envFrom`,
  `driver.terminationGracePeriodSeconds`.  `executor.env`/`envFrom` are not
  applied: executors are threads of the driver process here.
- `restartPolicy` (`Never`, `OnFailure` with `onFailureRetries`,
  `onFailureRetryInterval`, `onSubmissionFailureRetries`,
  `onSubmissionFailureRetryInterval` (5 s defaults, linear backoff), `Always`),
  `suspend`, `timeToLiveSeconds`.
- A spec change (other than suspend/TTL) invalidates the run: the driver pod is
  deleted, counters reset, and the application resubmitted once the pod is gone.
  Deleting the application: its driver pod is garbage-collected through the
  ownerReference, and this kubelet stops the process before the pod disappears.

Maintained status fields: `applicationState.state` (every upstream state: ""
(new), SUBMITTED, RUNNING, SUCCEEDING, COMPLETED, FAILING, FAILED,
SUBMISSION_FAILED, PENDING_RERUN, INVALIDATING, SUSPENDING, SUSPENDED,
RESUMING, UNKNOWN), `applicationState.errorMessage` (upstream's wording, e.g.
`driver container failed with ExitCode: 1, Reason: Error`; the cause is the
driver pod's `state.terminated.message`), `submissionAttempts`,
`executionAttempts`, `lastSubmissionAttemptTime`, `terminationTime`,
`sparkApplicationId`, `submissionID`, `driverInfo.podName`.

Maintained on the driver pod (kubelet): `status.phase` (Pending, Running,
Succeeded, Failed), the container's `state.waiting` (reason
ContainerCreating and the kubelet's FailedMount message while a mounted Secret
is missing; CreateContainerConfigError and the kubelet's message while a
Secret/ConfigMap or key that env needs is missing; both retried every pass),
`state.running`,
`state.terminated` (exitCode, reason Completed/Error, message = the job's
termination-message file, given to it as DV_TERMINATION_MESSAGE_PATH).
Driver pods have restartPolicy Never, as Spark makes them: a retry is a new pod.

Scope: `--controller-namespaces` (default all) are the namespaces whose
applications are reconciled; `--job-namespaces` (default all) those the
webhook mutates.  The upstream chart sets both from `spark.jobNamespaces`;
they differ on a cluster when namespaces are added by `jobNamespaceSelector`
(controller only) or the webhook is disabled.  Processes get the pod's
environment plus PATH, HOME, locale, JAVA_*/SPARK_*/HADOOP_* and
PYSPARK_PYTHON (what the image would provide), not the stand-in's own.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import signal
import sys
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from derived_views.core.patch import merge_patch
from dvstack.spark import app_states as states
from dvstack.spark.driver_pod import LABEL_APP_SELECTOR, driver_pod, in_scope
from dvstack.spark.local_command import LocalSpark, SubmissionError, command
from dvstack.spark.local_kubelet import LocalKubelet

GROUP = "sparkoperator.k8s.io"
API_VERSION = "v1beta2"
PLURAL = "sparkapplications"
DEFAULT_NODE = "dv-local-node"

log = logging.getLogger("spark-executor")


@dataclass
class _Seen:
    generation: int
    spec: dict[str, Any]


class SparkOperator:
    """The controller half: applications -> driver pods and back to application status."""

    def __init__(self, api_client: Any, *, spark: LocalSpark, node_name: str,
                 job_namespaces: frozenset[str], controller_namespaces: frozenset[str]) -> None:
        self.custom = client.CustomObjectsApi(api_client)
        self.core = client.CoreV1Api(api_client)
        self.spark = spark
        self.node_name = node_name
        self.job_namespaces = job_namespaces
        self.controller_namespaces = controller_namespaces
        self.skipped: frozenset[str] = frozenset()
        """Namespaces another controller serves (the real Spark Operator beside the node)."""
        self.seen: dict[str, _Seen] = {}

    def sync(self, apps: list[dict[str, Any]], pods: dict[tuple[str, str], dict[str, Any]]) -> None:
        for app in apps:
            meta = app["metadata"]
            if (not in_scope(meta["namespace"], self.controller_namespaces)
                    or meta["namespace"] in self.skipped):
                continue
            try:
                self._sync_app(app, pods)
            except ApiException as exc:
                log.warning("%s/%s: %s %s", meta["namespace"], meta["name"], exc.status,
                            exc.reason)
        uids = {a["metadata"]["uid"] for a in apps}
        for uid in [u for u in self.seen if u not in uids]:
            del self.seen[uid]

    def _sync_app(self, app: dict[str, Any], pods: dict[tuple[str, str], dict[str, Any]]) -> None:
        meta, spec = app["metadata"], app.get("spec") or {}
        ns, name, uid = meta["namespace"], meta["name"], meta["uid"]
        status = app.get("status") or {}
        generation = int(meta.get("generation") or 1)
        seen = self.seen.get(uid)
        self.seen[uid] = _Seen(generation, spec)
        if seen is not None and seen.generation != generation \
                and states.spec_change_invalidates(seen.spec, spec):
            log.info("%s/%s: spec changed (generation %d): invalidating", ns, name, generation)
            self._write_status(app, states.invalidated(status))
            return
        pod_name = states.driver_pod_name(name, spec, status)
        pod = pods.get((ns, pod_name))
        step = states.reconcile(name, spec, status, deleting=bool(meta.get("deletionTimestamp")),
                                pod=_driver_view(pod) if pod else None,
                                now=dt.datetime.now(dt.UTC),
                                submission_id=str(uuid.uuid4()))
        if step.delete_application:
            log.info("%s/%s: timeToLiveSeconds passed: deleting it", ns, name)
            self.custom.delete_namespaced_custom_object(GROUP, API_VERSION, ns, PLURAL, name)
            return
        if step.delete_driver_pod:
            try:
                self.core.delete_namespaced_pod(pod_name, ns)
            except ApiException as exc:
                if exc.status != 404:
                    raise
        if meta.get("deletionTimestamp"):
            return
        new_status = step.status
        if step.submit:
            new_status = states.after_submission(new_status, self.submit(app, new_status))
        self._write_status(app, new_status)

    def submit(self, app: dict[str, Any], status: dict[str, Any]) -> str | None:
        """spark-submit's part: create the driver pod of the submission `status` names
        (its submissionID); None, or the errorMessage upstream would write."""
        meta, spec = app["metadata"], app.get("spec") or {}
        app_id = f"spark-{uuid.uuid4().hex}"
        try:
            argv = command(meta["name"], meta["namespace"], spec, app_id=app_id, spark=self.spark)
        except SubmissionError as exc:
            return states.submission_error(str(exc))
        pod = driver_pod(app, submission_id=status["submissionID"], app_id=app_id,
                         node_name=self.node_name, command=argv,
                         mutated=in_scope(meta["namespace"], self.job_namespaces))
        try:
            self.core.create_namespaced_pod(meta["namespace"], pod)
        except ApiException as exc:
            if exc.status == 409:
                return states.DRIVER_POD_EXISTS
            return states.submission_error(f"failed to run spark-submit: {_api_message(exc)}")
        return None

    def _write_status(self, app: dict[str, Any], new: dict[str, Any]) -> None:
        old = app.get("status") or {}
        patch = merge_patch(old, new)
        if not patch:
            return
        meta = app["metadata"]
        self.custom.patch_namespaced_custom_object_status(
            GROUP, API_VERSION, meta["namespace"], PLURAL, meta["name"], {"status": patch},
            _content_type="application/merge-patch+json")
        before, after = states.state(old), states.state(new)
        if before != after:
            error = (new.get("applicationState") or {}).get("errorMessage", "")
            log.info("%s/%s: %s -> %s%s", meta["namespace"], meta["name"], before or "(new)",
                     after, f": {error}" if error else "")


def _driver_view(pod: dict[str, Any]) -> states.DriverPod:
    status = pod.get("status") or {}
    terminated = None
    for container in status.get("containerStatuses") or []:
        if container.get("name") == states.DRIVER_CONTAINER:
            terminated = (container.get("state") or {}).get("terminated")
    return states.DriverPod(
        phase=str(status.get("phase") or "Pending"),
        exit_code=None if terminated is None else int(terminated.get("exitCode", 0)),
        reason=str((terminated or {}).get("reason", "")),
        app_id=str((pod["metadata"].get("labels") or {}).get(LABEL_APP_SELECTOR, "")))


def _api_message(exc: ApiException) -> str:
    try:
        return str(json.loads(exc.body)["message"])
    except (TypeError, ValueError, KeyError):
        return f"{exc.status} {exc.reason}"


class StandIn:
    """Both halves on one level-triggered loop: list, act, repeat."""

    def __init__(self, api_client: Any, operator: SparkOperator, kubelet: LocalKubelet, *,
                 skip_labelled: str = "") -> None:
        self.custom = client.CustomObjectsApi(api_client)
        self.core = client.CoreV1Api(api_client)
        self.operator = operator
        self.kubelet = kubelet
        self.skip_labelled = skip_labelled
        self.stopping = threading.Event()

    def tick(self) -> None:
        if self.skip_labelled:
            self.operator.skipped = frozenset(
                ns.metadata.name for ns in
                self.core.list_namespace(label_selector=self.skip_labelled).items)
        self.kubelet.heartbeat()
        apps = self.custom.list_cluster_custom_object(GROUP, API_VERSION, PLURAL)["items"]
        pods = json.loads(self.core.list_pod_for_all_namespaces(_preload_content=False).data)
        items: list[dict[str, Any]] = pods["items"]
        self.kubelet.sync([p for p in items
                           if (p.get("spec") or {}).get("nodeName") == self.kubelet.node_name])
        by_name = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in items}
        self.operator.sync(apps, by_name)

    def run(self, period: float) -> None:
        while not self.stopping.wait(period):
            try:
                self.tick()
            except Exception as exc:
                log.warning("pass failed: %s", _one_line(exc))
        self.kubelet.shutdown()


def _one_line(exc: Exception) -> str:
    if isinstance(exc, ApiException):
        return f"{exc.status} {exc.reason}"
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def _namespaces(value: str) -> frozenset[str]:
    return frozenset(n.strip() for n in value.split(",") if n.strip())


def run_stand_in(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--spark-submit", required=True)
    parser.add_argument("--jars", default="", help="comma-separated jars added to every job")
    parser.add_argument("--logs-dir", required=True)
    parser.add_argument("--work-dir", required=True)
    parser.add_argument("--path-map", action="append", default=[], help="PREFIX=DIR")
    parser.add_argument("--max-cores", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--node-name", default=DEFAULT_NODE,
                        help="the Node this kubelet registers; driver pods are bound to it")
    parser.add_argument("--job-namespaces", default="",
                        help="comma-separated namespaces the webhook mutates (empty: all)")
    parser.add_argument("--controller-namespaces", default="",
                        help="comma-separated namespaces whose applications run (empty: all)")
    parser.add_argument("--skip-namespaces-labelled", default="", metavar="SELECTOR",
                        help="leave the applications of namespaces matching this label "
                             "selector to another controller (the real Spark Operator)")
    parser.add_argument("--period", type=float, default=0.5, help="seconds between passes")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    api_client = config.new_client_from_config(config_file=args.kubeconfig)
    work_dir = Path(args.work_dir)
    spark = LocalSpark(spark_submit=args.spark_submit, work_dir=str(work_dir),
                       max_cores=args.max_cores, jars=tuple(j for j in args.jars.split(",") if j),
                       path_map=dict(item.split("=", 1) for item in args.path_map))
    kubelet = LocalKubelet(api_client, node_name=args.node_name, logs_dir=Path(args.logs_dir),
                           work_dir=work_dir, python=args.python)
    kubelet.register_node(taint=bool(args.skip_namespaces_labelled))
    operator = SparkOperator(api_client, spark=spark, node_name=args.node_name,
                             job_namespaces=_namespaces(args.job_namespaces),
                             controller_namespaces=_namespaces(args.controller_namespaces))
    stand_in = StandIn(api_client, operator, kubelet, skip_labelled=args.skip_namespaces_labelled)

    def stop(signum: int, frame: object) -> None:
        stand_in.stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    log.info("local SparkApplication executor (stand-in for the Spark Operator) started")
    stand_in.run(args.period)
    log.info("stopped")


if __name__ == "__main__":
    run_stand_in()
