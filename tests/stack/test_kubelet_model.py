"""The stand-in kubelet resolves env and reports container states in the kubelet's words."""

from __future__ import annotations

from typing import Any

import pytest

from dvstack.spark import kubelet_model as km

DATA = {("secret", "db"): {"password": "pw", "user": "u"},
        ("configmap", "cm"): {"mode": "fast"}}


def lookup(kind: str, name: str) -> dict[str, str] | None:
    return DATA.get((kind, name))


def resolve(container: dict[str, object]) -> dict[str, str]:
    return km.resolve_env("shop", "app-driver", container, lookup, node_name="n1",
                          service_account="spark")


def secret_ref(name: str, key: str, **extra: object) -> dict[str, object]:
    return {"valueFrom": {"secretKeyRef": {"name": name, "key": key, **extra}}}


def test_env_from_values_references_and_env_from() -> None:
    env = resolve({
        "envFrom": [{"secretRef": {"name": "db"}, "prefix": "DB_"},
                    {"configMapRef": {"name": "cm"}}],
        "env": [{"name": "PGPASSWORD", **secret_ref("db", "password")},
                {"name": "mode", "value": "slow"},
                {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "mode"}}},
                {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "URL", "value": "postgres://$(DB_user)@h/$$(literal)/$(UNDEFINED)"}]})
    assert env == {"DB_password": "pw", "DB_user": "u", "mode": "slow", "PGPASSWORD": "pw",
                   "MODE": "fast", "POD": "app-driver",
                   "URL": "postgres://u@h/$(literal)/$(UNDEFINED)"}


@pytest.mark.parametrize(("container", "message"), [
    ({"env": [{"name": "P", **secret_ref("views-db", "password")}]},
     'secret "views-db" not found'),
    ({"env": [{"name": "P", **secret_ref("db", "token")}]},
     "couldn't find key token in Secret shop/db"),
    ({"env": [{"name": "M", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "x"}}}]},
     "couldn't find key x in ConfigMap shop/cm"),
    ({"envFrom": [{"configMapRef": {"name": "absent"}}]}, 'configmap "absent" not found'),
])
def test_a_missing_reference_is_the_kubelets_error(container: dict[str, object],
                                                   message: str) -> None:
    with pytest.raises(km.ContainerConfigError) as error:
        resolve(container)
    assert str(error.value) == message


def test_optional_references_are_skipped() -> None:
    assert resolve({"envFrom": [{"secretRef": {"name": "absent", "optional": True}}],
                    "env": [{"name": "S", **secret_ref("db", "sslmode", optional=True)},
                            {"name": "T", **secret_ref("absent", "k", optional=True)}]}) == {}


def test_exit_codes_as_a_runtime_reports_them() -> None:
    assert [km.exit_code(c) for c in (0, 1, 2, -15, -9)] == [0, 1, 2, 143, 137]


def test_termination_message_is_the_files_last_4_kib() -> None:
    def no_log() -> str:
        raise AssertionError("the log is read only as a fallback")

    assert km.termination_message(b"batch 18: NULL key", policy="File", code=1,
                                  log_tail=no_log) == "batch 18: NULL key"
    big = b"x" * 5000 + b"END"
    message = km.termination_message(big, policy="File", code=1, log_tail=no_log)
    assert len(message) == 4096 and message.endswith("END")
    assert km.termination_message(b"", policy="File", code=1, log_tail=no_log) == ""
    assert km.termination_message(None, policy="File", code=1, log_tail=no_log) == ""


def test_fallback_to_logs_only_after_a_failure_with_an_empty_file() -> None:
    assert km.termination_message(b"", policy="FallbackToLogsOnError", code=2,
                                  log_tail=lambda: "last lines") == "last lines"
    assert km.termination_message(b"", policy="FallbackToLogsOnError", code=0,
                                  log_tail=lambda: "last lines") == ""
    log = "".join(f"line {i}\n" for i in range(200))
    tail = km.tail_of_log(log)
    assert tail.startswith("line 120\n") and tail.endswith("line 199\n")
    assert len(km.tail_of_log("y" * 3000).encode()) == 2048


POD = {"metadata": {"name": "app-driver"},
       "spec": {"containers": [{"name": "spark-kubernetes-driver", "image": "img:1"}]}}


def test_pod_status_for_each_container_state() -> None:
    pending = km.pod_status(POD, km.waiting("CreateContainerConfigError", 'secret "x" not found'),
                            now="T1")
    assert pending["phase"] == "Pending" and "podIP" not in pending
    cs = pending["containerStatuses"][0]
    assert cs["name"] == "spark-kubernetes-driver" and cs["ready"] is False
    assert cs["state"] == {"waiting": {"reason": "CreateContainerConfigError",
                                       "message": 'secret "x" not found'}}
    assert pending["startTime"] == "T1"

    run = km.pod_status({**POD, "status": pending}, km.running_state("T2"), now="T2",
                        container_id="local://7")
    assert run["phase"] == "Running" and run["startTime"] == "T1"
    assert run["containerStatuses"][0]["ready"] is True
    ready = next(c for c in run["conditions"] if c["type"] == "Ready")
    assert ready == {"type": "Ready", "status": "True", "lastTransitionTime": "T2"}
    scheduled = next(c for c in run["conditions"] if c["type"] == "PodScheduled")
    assert scheduled["lastTransitionTime"] == "T1"

    failed = km.terminated(code=1, message="why", started_at="T2", finished_at="T3",
                           container_id="local://7")
    assert failed == {"terminated": {"exitCode": 1, "reason": "Error", "message": "why",
                                     "startedAt": "T2", "finishedAt": "T3",
                                     "containerID": "local://7"}}
    assert km.pod_status(POD, failed, now="T3")["phase"] == "Failed"
    done = km.terminated(code=0, message="", started_at="T2", finished_at="T3", container_id="")
    assert done["terminated"]["reason"] == "Completed" and "message" not in done["terminated"]
    assert km.pod_status(POD, done, now="T3")["phase"] == "Succeeded"


SECRET_POD_SPEC: dict[str, Any] = {
    "volumes": [{"name": "views-db-volume", "secret": {"secretName": "views-db"}},
                {"name": "opt-volume", "secret": {"secretName": "opt", "optional": True}},
                {"name": "unmounted-volume", "secret": {"secretName": "unmounted"}},
                {"name": "scratch", "emptyDir": {}}],
    "containers": [{
        "name": "spark-kubernetes-driver", "command": ["spark-submit"],
        "args": ["--conf", "spark.kubernetes.driver.secrets.views-db=/local/views-db",
                 "--conf", "spark.kubernetes.executor.secrets.views-db=/local/views-db",
                 "--conf", "spark.kubernetes.executor.secrets.kafka=/local/kafka", "job.py"],
        "volumeMounts": [{"name": "views-db-volume", "mountPath": "/mnt/secrets/views-db"},
                         {"name": "opt-volume", "mountPath": "/mnt/opt"},
                         {"name": "scratch", "mountPath": "/tmp/x"}]}]}


def test_the_secret_volumes_a_driver_mounts_and_its_executors_would() -> None:
    """Executors are threads of the driver here: an executor-only Secret is mounted too, under
    the volume name Spark gives it in executor pods."""
    spec = SECRET_POD_SPEC
    assert km.secret_mounts(spec, spec["containers"][0]) == [
        km.SecretMount("views-db-volume", "views-db"),
        km.SecretMount("opt-volume", "opt", optional=True),
        km.SecretMount("kafka-volume", "kafka")]
    assert km.secret_mounts({}, {"name": "c", "args": ["job.py"]}) == []


def test_a_missing_mounted_secret_is_the_kubelets_failed_mount() -> None:
    def read(name: str) -> dict[str, bytes] | None:
        return {"password": b"pw"} if name == "views-db" else None

    assert km.secret_volume_files(km.SecretMount("views-db-volume", "views-db"), read) == \
        {"password": b"pw"}
    assert km.secret_volume_files(km.SecretMount("opt-volume", "opt", optional=True), read) == {}
    with pytest.raises(km.VolumeMountError) as error:
        km.secret_volume_files(km.SecretMount("kafka-volume", "kafka"), read)
    assert str(error.value) == \
        'MountVolume.SetUp failed for volume "kafka-volume" : secret "kafka" not found'
    pending = km.pod_status(POD, km.waiting("ContainerCreating", str(error.value)), now="T1")
    assert pending["phase"] == "Pending"
    assert pending["containerStatuses"][0]["state"]["waiting"]["reason"] == "ContainerCreating"
