"""The stand-in held to the real Spark Operator: the same SparkApplications on both, the
transitions the operator reads compared.

The stand-in (`dvstack.spark.stand_in`) runs most tests' jobs because it is faster; it is
only worth that while the operator cannot tell it from the real one. Each scenario runs
at once in a namespace the stand-in serves and in one labelled for the real node, and a
poller records what the operator would judge on every pass (`job_state.judge_job` of the
application and its driver pod, the operator's own reading):

- a Secret the driver mounts (as the operator renders every Secret) missing at
  submission, created later: Blocked (SecretMissing, the kubelet's FailedMount Event
  naming the Secret: its container waits in ContainerCreating with no message, so the
  poller reads the pod's Events as the operator does), then Running;
- the driver pod deleted while running, restart policy OnFailure: Running, a restart,
  Running again, one execution attempt more;
- a transform that cannot run, restart policy Never: Failed, with the job's own cause
  (whether a pass sees it Running first depends on timing, so only the end is compared).

Starting passes between the milestones are left out of the comparison (how many a poller
sees depends on timing), the milestones and their reasons are not.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from kubernetes import client, config

from derived_views.adapters.kube.client import Kube
from derived_views.core.job import job_state
from derived_views.core.observed import (
    FAILED_MOUNT,
    driver_from_pod,
    driver_pod_name,
    spark_application_from_object,
)
from derived_views.reconcile.observe import with_mount_failure
from dvstack.node.support import NAMESPACE_LABEL
from dvstack.testing import replay
from dvstack.testing.waiting import wait_for

pytestmark = pytest.mark.real_node

G, V, P = "sparkoperator.k8s.io", "v1beta2", "sparkapplications"
RUNTIMES = ("stand-in", "node")


@dataclass
class Runtime:
    name: str
    namespace: str
    image: str | None


@pytest.fixture()
def runtimes(stack: Any, kube_api_client: Any, real_node: None) -> Iterator[list[Runtime]]:
    """A namespace per runtime: one the stand-in serves, one labelled for the node."""
    core = client.CoreV1Api(kube_api_client)
    made = []
    for name in RUNTIMES:
        ns = f"t-{uuid.uuid4().hex[:10]}"
        core.create_namespace({"metadata": {"name": ns, "labels": (
            {NAMESPACE_LABEL: "true"} if name == "node" else {})}})
        wait_for(lambda ns=ns: core.list_namespaced_service_account(
            ns, field_selector="metadata.name=default").items, timeout=120,
            what=f"the default ServiceAccount of namespace {ns}")
        replay.spark_job_account(kube_api_client, ns)
        made.append(Runtime(name, ns, stack.images["spark"] if name == "node" else None))
    yield made
    for runtime in made:
        core.delete_namespace(runtime.namespace)


@dataclass
class Record:
    """The operator's judgements of one application, as they changed, with the raw states."""

    kinds: list[tuple[str, str]] = field(default_factory=list)
    states: list[str] = field(default_factory=list)
    messages: dict[str, str] = field(default_factory=dict)
    last: job_state.Judgement | None = None
    attempts: int = 0

    def milestones(self) -> list[tuple[str, str]]:
        return [k for k in self.kinds if k[0] != job_state.JobState.STARTING]


class Poller:
    """Reads the application and its driver pod every 0.2 s, as the operator does on a pass,
    from its own thread (and its own API client)."""

    def __init__(self, kubeconfig: str, namespace: str, name: str) -> None:
        api = config.new_client_from_config(config_file=kubeconfig)
        self.core, self.custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
        self.api, self.namespace, self.name = api, namespace, name
        self.kube = Kube(api)
        self.record = Record()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.wait(0.2):
            try:
                self.once()
            except client.exceptions.ApiException:
                continue

    def once(self) -> None:
        obj = self.custom.get_namespaced_custom_object(G, V, self.namespace, P, self.name)
        app = spark_application_from_object(obj)
        assert app is not None
        pod_name = app.driver_pod_name
        try:
            pod = self.api.sanitize_for_serialization(
                self.core.read_namespaced_pod(pod_name, self.namespace))
        except client.exceptions.ApiException:
            pod = None
        if pod is not None:
            # as the operator's pass: the kubelet's Events say why a driver awaits its volumes
            driver = with_mount_failure(self.kube, self.namespace, driver_from_pod(pod))
            app = dataclasses.replace(app, driver=driver)
        judged = job_state.judge_job(app)
        record = self.record
        key = (str(judged.kind), str(judged.reason or ""))
        if not record.kinds or record.kinds[-1] != key:
            record.kinds.append(key)
            record.messages[key[0]] = judged.message or ""
        if not record.states or record.states[-1] != app.state:
            record.states.append(app.state)
        record.last, record.attempts = judged, app.execution_attempts

    def __enter__(self) -> Poller:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=10)


def application(stack: Any, runtime: Runtime, name: str, topic: str, *, secret: str,
                sql: str = replay.ORDERS_BY_CUSTOMER_SQL, retries: int = 0) -> dict[str, Any]:
    revision = f"r{uuid.uuid4().hex[:10]}"
    app = replay.spark_application(
        name=name, namespace=runtime.namespace, revision=revision,
        view=f"{runtime.namespace}/contract", bootstrap=stack.kafka_bootstrap, topics=[topic],
        sql=sql, table=f"contract_{revision}", primary_key=["customer_id"], secret=secret,
        checkpoint=f"/tmp/checkpoints/{revision}", image_app_root=stack.image_app_root,
        restart_retries=retries, image=runtime.image, core_request="250m",
        service_account=replay.SPARK_JOB_ACCOUNT)
    return app


def kind_is(poller: Poller, kind: job_state.JobState) -> bool:
    return poller.record.last is not None and poller.record.last.kind == kind


Scenario = Callable[[Any, Any, Runtime, str], Record]


def missing_secret_then_created(stack: Any, api: Any, runtime: Runtime, topic: str) -> Record:
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    app = application(stack, runtime, "late-secret", topic, secret="views-db")
    app["spec"]["driver"]["secrets"] = [  # what core.job.sparkapplication.secret_mounts renders
        {"name": "late-db", "path": "/mnt/secrets/late-db", "secretType": "Generic"}]
    custom.create_namespaced_custom_object(G, V, runtime.namespace, P, app)
    with Poller(stack.kubeconfig, runtime.namespace, "late-secret") as poller:
        wait_for(lambda: kind_is(poller, job_state.JobState.BLOCKED), timeout=180, interval=0.2,
                 what=f"{runtime.name}: the driver blocked on its missing Secret")
        core.create_namespaced_secret(runtime.namespace, replay.sink_secret("late-db", stack.pg))
        wait_for(lambda: kind_is(poller, job_state.JobState.RUNNING), timeout=300, interval=0.2,
                 what=f"{runtime.name}: the job to run once its Secret exists")
    custom.delete_namespaced_custom_object(G, V, runtime.namespace, P, "late-secret")
    return poller.record


def driver_deleted_while_running(stack: Any, api: Any, runtime: Runtime, topic: str) -> Record:
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    app = application(stack, runtime, "rerun", topic, secret="views-db", retries=1)
    custom.create_namespaced_custom_object(G, V, runtime.namespace, P, app)
    with Poller(stack.kubeconfig, runtime.namespace, "rerun") as poller:
        wait_for(lambda: kind_is(poller, job_state.JobState.RUNNING), timeout=300, interval=0.2,
                 what=f"{runtime.name}: the job to run")
        attempts = poller.record.attempts
        core.delete_namespaced_pod(driver_pod_name("rerun"), runtime.namespace,
                                   grace_period_seconds=0)
        wait_for(lambda: poller.record.attempts > attempts
                 and kind_is(poller, job_state.JobState.RUNNING), timeout=300, interval=0.2,
                 what=f"{runtime.name}: the Spark Operator to rerun the deleted driver")
    custom.delete_namespaced_custom_object(G, V, runtime.namespace, P, "rerun")
    return poller.record


def transform_that_cannot_run(stack: Any, api: Any, runtime: Runtime, topic: str) -> Record:
    custom = client.CustomObjectsApi(api)
    app = application(stack, runtime, "broken", topic, secret="views-db",
                      sql="SELECT no_such_column FROM events")
    custom.create_namespaced_custom_object(G, V, runtime.namespace, P, app)
    with Poller(stack.kubeconfig, runtime.namespace, "broken") as poller:
        wait_for(lambda: kind_is(poller, job_state.JobState.FAILED), timeout=300, interval=0.2,
                 what=f"{runtime.name}: the job to fail")
    custom.delete_namespaced_custom_object(G, V, runtime.namespace, P, "broken")
    return poller.record


SCENARIOS: dict[str, Scenario] = {
    "missing Secret, then created": missing_secret_then_created,
    "driver pod deleted while running": driver_deleted_while_running,
    "a transform that cannot run": transform_that_cannot_run,
}


def test_the_stand_in_and_the_real_spark_operator_read_the_same_to_the_operator(
        stack: Any, kube_api_client: Any, runtimes: list[Runtime]) -> None:
    core = client.CoreV1Api(kube_api_client)
    topic = f"contract-{uuid.uuid4().hex[:8]}"
    replay.create_topic(stack.kafka_bootstrap, topic, 1)
    replay.produce(stack.kafka_bootstrap, topic, replay.make_orders(1_000, seed=5))
    for runtime in runtimes:
        core.create_namespaced_secret(runtime.namespace, replay.sink_secret("views-db", stack.pg))

    records: dict[tuple[str, str], Record] = {}
    errors: list[BaseException] = []

    def run(runtime: Runtime) -> None:
        api = config.new_client_from_config(config_file=stack.kubeconfig)
        try:
            for scenario, play in SCENARIOS.items():
                records[(scenario, runtime.name)] = play(stack, api, runtime, topic)
        except BaseException as exc:  # reported on the test's thread
            errors.append(exc)

    started = time.monotonic()
    threads = [threading.Thread(target=run, args=(r,)) for r in runtimes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=1500)
    if errors:
        raise errors[0]
    report = {f"{s} / {r}": (rec.milestones(), rec.states) for (s, r), rec in records.items()}
    print(f"contract ({time.monotonic() - started:.0f} s):", report)

    for scenario in SCENARIOS:
        stand_in, node = records[(scenario, "stand-in")], records[(scenario, "node")]
        if scenario == "a transform that cannot run":  # Running first, or not, by timing
            assert stand_in.milestones()[-1] == node.milestones()[-1], (scenario, report)
        else:
            assert stand_in.milestones() == node.milestones(), (scenario, report)
    blocked = records[("missing Secret, then created", "node")]
    assert blocked.milestones()[0] == (job_state.JobState.BLOCKED, "SecretMissing")
    for runtime in RUNTIMES:
        message = records[("missing Secret, then created", runtime)].messages["Blocked"]
        assert f'{FAILED_MOUNT}: MountVolume.SetUp failed for volume "late-db-volume" : ' \
               'secret "late-db" not found' in message, message
    for runtime in RUNTIMES:
        rerun = records[("driver pod deleted while running", runtime)]
        assert rerun.milestones() == [("Running", ""), ("Running", "")], rerun.kinds
    causes = {r: records[("a transform that cannot run", r)].messages["Failed"]
              for r in RUNTIMES}
    assert all("no_such_column" in cause for cause in causes.values()), causes
