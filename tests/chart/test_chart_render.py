"""The Helm chart renders what the operator needs and nothing more (helm lint/template only)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from derived_views.process.environment import from_env
from dvstack.chart import CHART

NAMESPACED = {"watch": {"mode": "namespaces", "namespaces": ["team-a", "team-b"]}}
MODES = {"cluster": {}, "namespaces": NAMESPACED}
RBAC_KINDS = {"Role", "ClusterRole"}


def kinds(objs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == kind]


def one(objs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = kinds(objs, kind)
    assert len(found) == 1, f"expected one {kind}, got {[o['metadata']['name'] for o in found]}"
    return found[0]


def container(objs: list[dict[str, Any]]) -> dict[str, Any]:
    pod = one(objs, "StatefulSet")["spec"]["template"]["spec"]
    assert len(pod["containers"]) == 1
    c: dict[str, Any] = pod["containers"][0]
    return c


def env_of(c: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in c["env"]}


def spark_account(objs: list[dict[str, Any]]) -> str:
    """The Spark drivers' ServiceAccount the operator is told to name."""
    name: str = env_of(container(objs))["DV_SPARK_SERVICE_ACCOUNT"]
    return name


AGGREGATE_LABELS = tuple(f"rbac.authorization.k8s.io/aggregate-to-{r}" for r in ("view", "edit", "admin"))


def aggregated(obj: dict[str, Any]) -> bool:
    """A ClusterRole for the namespace's users (aggregated into view/edit/admin), not the operator's."""
    labels = obj["metadata"].get("labels", {})
    return any(labels.get(k) == "true" for k in AGGREGATE_LABELS)


def hook(obj: dict[str, Any]) -> bool:
    """An object of a Helm hook (the CRD upgrade Job and its RBAC), present only while it runs."""
    return "helm.sh/hook" in obj["metadata"].get("annotations", {})


def operators(objs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """Objects of `kind` that belong to the operator, not to the Spark drivers' account, the
    namespace's users or the CRD upgrade hook."""
    return [o for o in kinds(objs, kind)
            if o["metadata"]["name"] != spark_account(objs) and not aggregated(o) and not hook(o)]


def rules(objs: list[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    for o in objs:
        if o["kind"] in RBAC_KINDS:
            for r in o.get("rules", []):
                yield o, r


# --- lint --------------------------------------------------------------------

@pytest.mark.parametrize("values", [
    {},
    NAMESPACED,
    {**NAMESPACED, "sparkOperator": {"serviceAccount": {"create": False}}},
    {"sparkOperator": {"jobNamespaces": ["jobs"]}, "replicaCount": 3},
], ids=["cluster", "namespaces", "namespaces-spark-account", "cluster+job-namespaces"])
def test_helm_lint_strict_passes(helm: Path, values: dict[str, Any], tmp_path: Path) -> None:
    values_file = tmp_path / "values.json"
    values_file.write_text(json.dumps(values))
    proc = subprocess.run([str(helm), "lint", "--strict", str(CHART), "--values", str(values_file)],
                          capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 chart(s) failed" in proc.stdout


# --- both modes render -------------------------------------------------------

def test_cluster_mode_renders_cluster_role_and_cluster_peering(render: Any) -> None:
    objs = render()
    assert sorted(o["kind"] for o in objs) == sorted([
        "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "StatefulSet",
        "ClusterKopfPeering", "Service", "PodDisruptionBudget",
        "ClusterRole", "ClusterRole",  # aggregated into view/edit/admin
        "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Job",  # the CRD upgrade hook
        "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",  # tenancy
        "ClusterRole"])  # the operator's rights in job namespaces, for the platform to bind
    args = container(objs)["args"]
    assert "--all-namespaces" in args
    assert not [a for a in args if a.startswith("--namespace")]
    env = {e["name"]: e for e in container(objs)["env"]}
    assert env["DV_JOB_NAMESPACE"]["value"] == "{namespace}-dv-jobs"  # jobs out of reach
    assert env["DV_OPERATOR_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == \
        "metadata.namespace"


def test_job_namespaces_are_made_for_their_tenants_with_the_operators_rights(
        render: Any) -> None:
    watched = ["team-a", "team-b"]
    objs = render({"watch": {"mode": "namespaces", "namespaces": watched},
                   "spark": {"checkpointSecretName": "dv-checkpoints"}})
    spaces = {o["metadata"]["name"]: o["metadata"]["labels"] for o in kinds(objs, "Namespace")}
    assert {n: labels["derivedviews.io/jobs-for"] for n, labels in spaces.items()} == {
        "team-a-dv-jobs": "team-a", "team-b-dv-jobs": "team-b"}
    bindings = [o for o in kinds(objs, "RoleBinding") if o["roleRef"]["kind"] == "ClusterRole"]
    assert sorted(b["metadata"]["namespace"] for b in bindings) == sorted(spaces)
    jobs_role = next(o for o in kinds(objs, "ClusterRole")
                     if o["metadata"]["name"].endswith("-jobs"))
    secrets = [r for r in jobs_role["rules"] if "secrets" in r["resources"]]
    assert secrets and set(secrets[0]["verbs"]) == {"get", "create", "update"}  # never list
    spark_accounts = {o["metadata"]["namespace"] for o in kinds(objs, "ServiceAccount")
                      if o["metadata"]["name"].endswith("-spark")}
    assert spark_accounts == set(spaces)  # drivers run there, not in the tenants' namespaces
    args = container(objs)["args"]
    assert [a for a in args if a.startswith("--namespace")] == [
        "--namespace=team-a", "--namespace=team-b", "--namespace=team-a-dv-jobs",
        "--namespace=team-b-dv-jobs"]
    checkpoint = one([o for o in kinds(objs, "Role")
                      if o["metadata"]["name"].endswith("-checkpoint-secret")], "Role")
    assert checkpoint["rules"] == [{"apiGroups": [""], "resources": ["secrets"],
                                    "resourceNames": ["dv-checkpoints"], "verbs": ["get"]}]
    off = render({"watch": {"mode": "namespaces", "namespaces": watched},
                  "jobs": {"namespace": ""}})
    assert not kinds(off, "Namespace")


def test_namespaces_mode_renders_roles_in_exactly_the_listed_namespaces(render: Any) -> None:
    watched = ["team-a", "team-b", "team-c"]
    objs = render({"watch": {"mode": "namespaces", "namespaces": watched}})
    for kind in ("Role", "RoleBinding", "KopfPeering"):
        served = [o for o in operators(objs, kind)
                  if not o["metadata"]["namespace"].endswith("-dv-jobs")]
        assert sorted(o["metadata"]["namespace"] for o in served) == watched, kind
    assert not kinds(objs, "ClusterKopfPeering")
    args = container(objs)["args"]
    assert [a for a in args if a.startswith("--namespace")] == [
        f"--namespace={n}" for n in [*watched, *(f"{n}-dv-jobs" for n in watched)]]
    assert "--all-namespaces" not in args
    # Nothing namespaced is granted cluster-wide in this mode: only Kopf's own reads.
    cluster_role = one([o for o in operators(objs, "ClusterRole")
                        if not o["metadata"]["name"].endswith("-jobs")], "ClusterRole")
    granted = {(g, res) for r in cluster_role["rules"] for g in r["apiGroups"]
               for res in r["resources"]}
    assert granted == {("apiextensions.k8s.io", "customresourcedefinitions"), ("", "namespaces")}
    for r in cluster_role["rules"]:
        assert set(r["verbs"]) <= {"get", "list", "watch"}


def test_bindings_point_at_the_release_service_account(render: Any) -> None:
    for values in MODES.values():
        objs = render(values, release="rel", namespace="ops")
        sa = one(operators(objs, "ServiceAccount"), "ServiceAccount")["metadata"]
        assert sa["namespace"] == "ops"
        assert one(objs, "StatefulSet")["spec"]["template"]["spec"]["serviceAccountName"] == sa["name"]
        role_names = {(o["kind"], o["metadata"]["name"]) for o in objs if o["kind"] in RBAC_KINDS}
        for binding in operators(objs, "ClusterRoleBinding") + operators(objs, "RoleBinding"):
            assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa["name"],
                                            "namespace": "ops"}]
            ref = binding["roleRef"]
            assert (ref["kind"], ref["name"]) in role_names
            if binding["kind"] == "RoleBinding" and ref["kind"] == "Role":
                role = next(o for o in kinds(objs, "Role") if o["metadata"]["name"] == ref["name"]
                            and o["metadata"]["namespace"] == binding["metadata"]["namespace"])
                assert role


def test_mode_and_namespaces_must_agree(render_error: Any) -> None:
    assert "namespaces" in render_error({"watch": {"mode": "namespaces"}})
    assert "namespaces" in render_error({"watch": {"mode": "namespaces", "namespaces": []}})
    assert "namespaces" in render_error({"watch": {"mode": "cluster", "namespaces": ["a"]}})
    assert "mode" in render_error({"watch": {"mode": "everywhere"}})


# --- the operator pods -------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
def test_pod_runs_non_root_read_only_without_capabilities(render: Any, mode: str) -> None:
    objs = render(MODES[mode])
    pod = one(objs, "StatefulSet")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = container(objs)["securityContext"]
    assert sc["runAsNonRoot"] is True
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    # The read-only root needs a writable /tmp.
    assert {"name": "tmp", "mountPath": "/tmp"} in container(objs)["volumeMounts"]


def test_resources_have_requests_and_limits(render: Any) -> None:
    res = container(render())["resources"]
    for kind in ("requests", "limits"):
        assert set(res[kind]) == {"cpu", "memory"}, kind


def test_probes_hit_kopf_liveness_endpoint(render: Any) -> None:
    c = container(render())
    assert "--liveness=http://0.0.0.0:8080/healthz" in c["args"]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    for probe in ("livenessProbe", "readinessProbe"):
        get = c[probe]["httpGet"]
        assert get["path"] == "/healthz", probe
        assert ports[get["port"]] == 8080, probe
    assert "command" not in c, "the image's entrypoint (derived-views-operator) must be kept"


def test_two_replicas_with_distinct_peering_priorities(render: Any) -> None:
    """Kopf pauses *every* peer of equal priority, so each pod takes its ordinal as priority."""
    objs = render()
    sts = one(objs, "StatefulSet")
    assert sts["spec"]["replicas"] == 2
    assert sts["spec"]["podManagementPolicy"] == "Parallel"
    c = container(objs)
    assert "--priority=$(DV_PEERING_PRIORITY)" in c["args"]
    env = env_of(c)
    assert env["DV_PEERING_PRIORITY"] == {
        "fieldRef": {"fieldPath": "metadata.labels['apps.kubernetes.io/pod-index']"}}
    assert env["POD_ID"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert one(render({"replicaCount": 3}), "StatefulSet")["spec"]["replicas"] == 3


@pytest.mark.parametrize("mode", MODES)
def test_peering_argument_names_the_rendered_peering_objects(render: Any, mode: str) -> None:
    objs = render(MODES[mode])
    peerings = kinds(objs, "ClusterKopfPeering") + kinds(objs, "KopfPeering")
    assert peerings
    names = {p["metadata"]["name"] for p in peerings}
    assert len(names) == 1
    assert f"--peering={names.pop()}" in container(objs)["args"]


def test_operator_settings_reach_the_operator(render: Any) -> None:
    """The env the chart sets parses, through the operator's own reader, into the values given."""
    objs = render({
        "operator": {"lagPollSeconds": 2.5, "sinkPoolSize": 9},
        "spark": {"image": "registry.example/spark-job:9", "mainApplicationFile": "local:///job.py",
                  "triggerSeconds": 4.5,
                  "replayRecordsPerSecond": 1500000, "replayStartupSeconds": 45.5,
                  "replayMinBacklog": 25000000, "replayRecordsPerExecutor": 2500000,
                  "replayMaxExecutors": 12,
                  "jars": ["local:///a.jar", "local:///b.jar"], "checkpointBase": "s3a://ck/",
                  "checkpointSecretName": "dv-checkpoints",
                  "checkpointS3Endpoint": "http://minio.storage:9000",
                  "checkpointS3Region": "eu-central-1"},
        "sparkOperator": {"serviceAccount": {"name": "spark-driver"},
                          "jobNamespaces": ["jobs"]},
    })
    env = {k: v for k, v in env_of(container(objs)).items() if isinstance(v, str)}
    assert env_of(container(objs))["DV_OPERATOR_NAMESPACE"] == {
        "fieldRef": {"fieldPath": "metadata.namespace"}}
    settings = from_env({**env, "DV_OPERATOR_NAMESPACE": "ops"})  # as the pod gets it
    assert (settings.jobs.namespace, settings.jobs.operator_namespace) == (
        "{namespace}-dv-jobs", "ops")
    assert settings.polling.lag_seconds == 2.5
    assert settings.sinks.pool_size == 9
    assert settings.spark.image == "registry.example/spark-job:9"
    assert settings.spark.main_application_file == "local:///job.py"
    assert settings.spark.jars == ("local:///a.jar", "local:///b.jar")
    assert settings.spark.trigger_seconds == 4.5
    assert settings.spark.replay_records_per_second == 1_500_000.0
    assert settings.spark.replay_startup_seconds == 45.5
    assert (settings.spark.replay_min_backlog, settings.spark.replay_records_per_executor,
            settings.spark.replay_max_executors) == (25_000_000, 2_500_000, 12)
    assert settings.checkpoints.base == "s3a://ck/"
    assert settings.checkpoints.secret == "dv-checkpoints"
    assert settings.checkpoints.s3_endpoint == "http://minio.storage:9000"
    assert settings.checkpoints.s3_region == "eu-central-1"
    assert settings.spark.service_account == "spark-driver"


def test_default_settings_match_the_operator_defaults(render: Any) -> None:
    env = {k: v for k, v in env_of(container(render())).items() if isinstance(v, str)}
    # except metrics: off when the operator runs by hand, on (port 9090) in the chart; the
    # Spark drivers' account, which the chart always names (the Spark Operator chart's one in
    # cluster mode); the checkpoint base: a local directory serves a hand-run operator, a
    # pod needs a store; and where jobs run: in job namespaces out of tenants' reach on a
    # cluster, beside the view for a hand-run operator (its stack has one user)
    hand = from_env({})
    assert from_env(env) == dataclasses.replace(
        hand, metrics_port=9090,
        spark=dataclasses.replace(hand.spark, service_account="spark-operator-spark"),
        checkpoints=dataclasses.replace(hand.checkpoints,
                                        base="s3a://derived-views/checkpoints"),
        jobs=dataclasses.replace(hand.jobs, namespace="{namespace}-dv-jobs"))
    # what a pod adds (KUBERNETES_SERVICE_HOST) passes the operator's own start-up check
    assert from_env({**env, "KUBERNETES_SERVICE_HOST": "10.0.0.1"}).in_cluster


# --- RBAC --------------------------------------------------------------------

ALL_VALUE_SETS = [
    {}, NAMESPACED, {**NAMESPACED, "sparkOperator": {"serviceAccount": {"create": False}}},
    {"sparkOperator": {"jobNamespaces": ["jobs"]}},
]


@pytest.mark.parametrize("values", ALL_VALUE_SETS)
def test_no_wildcard_verbs_resources_or_groups(render: Any, values: dict[str, Any]) -> None:
    seen = 0
    for obj, rule in rules(render(values)):
        seen += 1
        where = f"{obj['kind']} {obj['metadata']['name']}: {rule}"
        assert "*" not in rule["verbs"], where
        assert "*" not in rule["resources"], where
        assert "*" not in rule["apiGroups"], where
        assert not any("*" in r for r in rule["resources"]), where
        assert "nonResourceURLs" not in rule, where
    assert seen, "no RBAC rules rendered"


@pytest.mark.parametrize("values", ALL_VALUE_SETS)
def test_secrets_are_never_listed_or_watched(render: Any, values: dict[str, Any]) -> None:
    """Where views live: read by name, and patched only for the sink-secret finalizer. In job
    namespaces: the copies the operator writes, read back by name. Never listed or watched
    anywhere (that would expose every Secret of a namespace)."""
    secret_rules = [(o, r) for o, r in rules(render(values))
                    if "" in r["apiGroups"] and "secrets" in r["resources"]]
    assert secret_rules, "the operator must be able to read the Secrets a view references"
    for obj, rule in secret_rules:
        where = f"{obj['kind']} {obj['metadata']['name']}: {rule}"
        if obj["metadata"]["name"].endswith("-jobs"):
            assert rule["verbs"] == ["get", "create", "update"], where
        elif rule.get("resourceNames"):
            assert rule["verbs"] == ["get"], where  # the checkpoint Secret, to copy it
        else:
            assert rule["verbs"] == ["get", "patch"], where


def test_operator_permissions_are_exactly_what_it_uses(render: Any) -> None:
    """The served-namespace rules, as (group, resource) -> verbs, in both modes."""
    expected = {
        ("derivedviews.io", "derivedviews"): {"get", "list", "watch", "patch", "update"},
        ("derivedviews.io", "derivedviews/status"): {"patch", "update"},
        ("derivedviews.io", "derivedviews/finalizers"): {"update"},
        ("sparkoperator.k8s.io", "sparkapplications"): {"get", "list", "watch", "create", "delete"},
        ("", "secrets"): {"get", "patch"},
        ("", "pods"): {"get", "list", "watch"},
        ("", "events"): {"create", "patch", "list"},
    }
    cluster = one([o for o in operators(render(), "ClusterRole")
                   if not o["metadata"]["name"].endswith("-jobs")], "ClusterRole")
    namespaced = render(NAMESPACED)
    roles = [r for r in operators(namespaced, "Role")  # not Kopf's peering in job namespaces
             if not r["metadata"]["name"].endswith("-peering")]
    assert len(roles) == 2
    for obj in [cluster, *roles]:
        granted: dict[tuple[str, str], set[str]] = {}
        for rule in obj["rules"]:
            if rule.get("resourceNames"):
                continue
            for group in rule["apiGroups"]:
                for res in rule["resources"]:
                    granted.setdefault((group, res), set()).update(rule["verbs"])
        for key, verbs in expected.items():
            assert granted.pop(key) == verbs, (obj["kind"], key)
        leftover = {k for k in granted if k[0] not in ("apiextensions.k8s.io", "kopf.dev")
                    and k != ("", "namespaces")}
        assert not leftover, (obj["kind"], leftover)


@pytest.mark.parametrize("mode", MODES)
def test_peering_writes_are_limited_to_the_release_peering_object(render: Any, mode: str) -> None:
    objs = render(MODES[mode])
    peering = next(iter(kinds(objs, "ClusterKopfPeering") + kinds(objs, "KopfPeering")))
    plural = "clusterkopfpeerings" if mode == "cluster" else "kopfpeerings"
    for obj, rule in rules(objs):
        if "kopf.dev" not in rule["apiGroups"]:
            continue
        assert rule["resources"] == [plural], obj["kind"]
        if {"patch", "update", "get"} & set(rule["verbs"]):
            assert rule["resourceNames"] == [peering["metadata"]["name"]]
            assert set(rule["verbs"]) == {"get", "patch"}


def test_cluster_scoped_names_are_unique_per_release(render: Any) -> None:
    """Release names are unique per namespace only: cluster-scoped names carry the namespace."""
    def cluster_scoped(**kw: str) -> set[tuple[str, str]]:
        return {(o["kind"], o["metadata"]["name"]) for o in render(**kw)
                if "namespace" not in o["metadata"]}

    a = cluster_scoped(release="dv", namespace="one")
    b = cluster_scoped(release="dv", namespace="two")
    c = cluster_scoped(release="other", namespace="one")
    assert {k for k, _ in a} == {"ClusterRole", "ClusterRoleBinding", "ClusterKopfPeering",
                                 "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
    assert not a & b
    assert not a & c
    # Shared watched namespaces: two releases watching one namespace do not clash either.
    ra = render(NAMESPACED, release="dv", namespace="one")
    rb = render(NAMESPACED, release="dv", namespace="two")
    names_a = {(o["kind"], o["metadata"]["namespace"], o["metadata"]["name"]) for o in ra
               if o["metadata"].get("namespace") in ("team-a", "team-b")}
    names_b = {(o["kind"], o["metadata"]["namespace"], o["metadata"]["name"]) for o in rb
               if o["metadata"].get("namespace") in ("team-a", "team-b")}
    assert names_a and not names_a & names_b


def test_spark_drivers_get_an_account_in_every_job_namespace_by_default(render: Any) -> None:
    objs = render(NAMESPACED)
    name = spark_account(objs)
    assert name == "ops-rel-derived-views-spark"
    for kind in ("ServiceAccount", "Role", "RoleBinding"):
        mine = [o for o in kinds(objs, kind) if o["metadata"]["name"] == name]
        assert sorted(o["metadata"]["namespace"] for o in mine) == [
            "team-a-dv-jobs", "team-b-dv-jobs"], kind
    for binding in kinds(objs, "RoleBinding"):
        if binding["metadata"]["name"] == name:
            assert binding["subjects"] == [{"kind": "ServiceAccount", "name": name,
                                            "namespace": binding["metadata"]["namespace"]}]
            assert binding["roleRef"]["name"] == name
    role = next(o for o in kinds(objs, "Role") if o["metadata"]["name"] == name)
    granted = {(g, r): set(rule["verbs"]) for rule in role["rules"] for g in rule["apiGroups"]
               for r in rule["resources"]}
    driver_needs = {"get", "list", "watch", "create", "delete"}
    assert set(granted) == {("", "pods"), ("", "services"), ("", "configmaps"),
                            ("", "persistentvolumeclaims")}
    assert all(driver_needs <= verbs for verbs in granted.values()), granted
    # jobNamespaces overrides where it is created, in either mode.
    objs = render({"sparkOperator": {"jobNamespaces": ["jobs"]}})
    assert [o["metadata"]["namespace"] for o in kinds(objs, "ServiceAccount")
            if o["metadata"]["name"] == spark_account(objs)] == ["jobs"]


def test_without_job_namespaces_the_platforms_account_is_named(render: Any) -> None:
    objs = render()  # cluster mode: the chart cannot know where views live
    assert spark_account(objs) == "spark-operator-spark"
    assert len(operators(objs, "ServiceAccount")) == 1 and not kinds(objs, "Role")
    objs = render({**NAMESPACED, "sparkOperator": {"serviceAccount": {
        "create": False, "name": "platform-spark"}}})
    assert spark_account(objs) == "platform-spark"
    assert len(operators(objs, "ServiceAccount")) == 1
    assert not [o for o in kinds(objs, "Role") if o["metadata"]["name"] == "platform-spark"]


# --- values.schema.json ------------------------------------------------------

@pytest.mark.parametrize(("values", "key"), [
    ({"replicas": 2}, "replicas"),
    ({"watch": {"mode": "cluster", "namespace": ["a"]}}, "namespace"),
    ({"operator": {"lagPollSecs": 3}}, "lagPollSecs"),
    ({"spark": {"imgae": "x"}}, "imgae"),
    ({"resources": {"limits": {"gpu": 1}}}, "gpu"),
])
def test_schema_rejects_unknown_keys(render_error: Any, values: dict[str, Any], key: str) -> None:
    message = render_error(values)
    assert "additional properties" in message and f"'{key}'" in message, message


def test_schema_rejects_bad_values(render_error: Any) -> None:
    assert "lagPollSeconds" in render_error({"operator": {"lagPollSeconds": 0.1}})
    assert "sinkPoolSize" in render_error({"operator": {"sinkPoolSize": 0}})
    assert "triggerSeconds" in render_error({"spark": {"triggerSeconds": 0}})
    assert "replicaCount" in render_error({"replicaCount": 0})
    assert "watch" in render_error({"watch": {"mode": "namespaces", "namespaces": ["Bad_Name"]}})
    assert "checkpointS3Endpoint" in render_error({"spark": {"checkpointS3Endpoint": "minio:9000"}})


@pytest.mark.parametrize("base", ["/tmp/derived-views/checkpoints", "checkpoints",
                                  "file:///var/ck", "local:///opt/ck", "FILE:/var/ck", ""])
def test_schema_refuses_a_pod_local_checkpoint_base(render_error: Any, base: str) -> None:
    assert "checkpointBase" in render_error({"spark": {"checkpointBase": base}})


@pytest.mark.parametrize("base", ["s3a://bucket/ck", "hdfs:///ck", "gs://b/ck"])
def test_schema_accepts_a_shared_checkpoint_store(render: Any, base: str) -> None:
    env = env_of(container(render({"spark": {"checkpointBase": base}})))
    assert env["DV_CHECKPOINT_BASE"] == base
    assert "DV_CHECKPOINT_SECRET" not in env


def test_schema_forbids_additional_properties_everywhere() -> None:
    """Every object in the schema either lists its keys (and forbids others) or types a map."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    problems: list[str] = []

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            is_object = node.get("type") == "object" or "properties" in node
            if is_object and "additionalProperties" not in node:
                problems.append(path or "/")
            if "additionalProperties" in node and node["additionalProperties"] is True:
                problems.append(path or "/")
            for key, child in node.items():
                walk(child, f"{path}/{key}")
        elif isinstance(node, list):
            for i, child in enumerate(node):
                walk(child, f"{path}/{i}")

    walk(schema, "")
    # if/then/else fragments only narrow an object already closed by its parent.
    problems = [p for p in problems if not any(s in p for s in ("/if", "/then", "/else"))]
    assert not problems, f"objects open to unknown keys: {problems}"



def test_the_tenancy_values_reach_the_operator_and_the_admission_policy(render: Any) -> None:
    import json

    values = {"tenancy": {"python": {"enabled": True, "pyFilesPrefixes": ["s3a://code/"]},
                          "images": ["registry.example/teams/*"]}}
    objs = render(values)
    env = {e["name"]: e.get("value") for e in container(objs)["env"]}
    policy = json.loads(env["DV_TENANCY_POLICY"])
    assert policy["python"] == {"enabled": True, "pyFilesPrefixes": ["s3a://code/"]}
    assert policy["secrets"] == {"requireLabel": True}  # defaults merged in by Helm
    vap = one(objs, "ValidatingAdmissionPolicy")
    rules = " ".join(v["expression"] for v in vap["spec"]["validations"])
    assert "object.spec.spark.image.startsWith('registry.example/teams/')" in rules
    assert "f.startsWith('s3a://code/')" in rules
    assert "!has(object.spec.transform.python)\"" not in rules  # Python allowed here
    binding = one(objs, "ValidatingAdmissionPolicyBinding")
    assert binding["spec"]["policyName"] == vap["metadata"]["name"]
    assert "matchResources" not in binding["spec"]  # cluster mode: every namespace
    scoped = one(render(NAMESPACED), "ValidatingAdmissionPolicyBinding")
    assert scoped["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"][0][
        "values"] == ["team-a", "team-b"]
    off = render({"tenancy": {"admissionPolicy": {"enabled": False}}})
    assert not kinds(off, "ValidatingAdmissionPolicy")


def test_the_kafka_and_checkpoint_rules_reach_the_admission_policy(render: Any) -> None:
    """Each kafka.clusters rule is one term (its namespaces, then every server of the list); the
    dead-letter patterns and the checkpoint rule follow the values."""
    default = " ".join(v["expression"] for v in one(
        render({}), "ValidatingAdmissionPolicy")["spec"]["validations"])
    assert ("bootstrapServers.split(',').all(s, s.trim().matches(") in default
    assert "all(p, (h == '127.0.0.1') || (h.lowerAscii() == 'localhost'))" in default
    assert "deadLetterTopic.startsWith('dlq.' + request.namespace + '.')" in default
    assert "!has(object.spec.spark.checkpointBase)" in default
    values = {"tenancy": {"kafka": {"clusters": [
        {"namespaces": ["shop-*"], "bootstrapServers": ["kafka.shop:9093"]},
        {"bootstrapServers": ["kafka.platform:*"]}], "deadLetterTopics": []},
        "checkpoints": {"authorOverride": True}}}
    vap = one(render(values), "ValidatingAdmissionPolicy")
    rules = " ".join(v["expression"] for v in vap["spec"]["validations"])
    assert ("(request.namespace.startsWith('shop-')) && object.spec.source.kafka."
            "bootstrapServers.split(',').all(s, s.trim().matches(") in rules
    assert "all(p, (h.lowerAscii() == 'kafka.shop' && int(p) == 9093))" in rules
    assert "(request.namespace.startsWith('')) && " in rules  # no namespaces: every namespace
    assert "127.0.0.1" not in rules
    assert "|| false" in rules  # no dead-letter topic allowed
    assert "checkpointBase" not in rules
    none = render({"tenancy": {"kafka": {"clusters": []}}})
    kafka_rule = next(v for v in one(none, "ValidatingAdmissionPolicy")["spec"]["validations"]
                      if "tenancy.kafka.clusters" in v.get("messageExpression", ""))
    assert kafka_rule["expression"] == "false"


# --- the jobs' SparkApplication template ------------------------------------------

JOB_TEMPLATE = {"apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "SparkApplication",
                "spec": {"driver": {"coreRequest": "250m"}, "executor": {"coreRequest": "250m"}}}


def test_a_job_template_is_mounted_from_a_config_map_and_named_to_the_operator(
        render: Any) -> None:
    objs = render({"spark": {"jobTemplate": JOB_TEMPLATE}})
    config_map = one(objs, "ConfigMap")
    assert yaml.safe_load(config_map["data"]["sparkapplication.yaml"]) == JOB_TEMPLATE
    c = container(objs)
    path = env_of(c)["DV_SPARK_TEMPLATE"]
    mount = next(m for m in c["volumeMounts"] if path.startswith(m["mountPath"] + "/"))
    assert mount["readOnly"] is True
    pod = one(objs, "StatefulSet")["spec"]["template"]
    volume = next(v for v in pod["spec"]["volumes"] if v["name"] == mount["name"])
    assert volume["configMap"]["name"] == config_map["metadata"]["name"]
    assert path.rsplit("/", 1)[1] == "sparkapplication.yaml"
    # a changed template rolls the pods
    changed = render({"spark": {"jobTemplate": {**JOB_TEMPLATE, "metadata": {"labels": {"a": "b"}}}}})
    annotations = [one(o, "StatefulSet")["spec"]["template"]["metadata"]["annotations"]
                   for o in (objs, changed)]
    assert annotations[0] != annotations[1]


def test_without_a_job_template_the_image_template_serves(render: Any) -> None:
    objs = render({})
    assert kinds(objs, "ConfigMap") == []
    assert "DV_SPARK_TEMPLATE" not in env_of(container(objs))


def test_a_job_template_must_be_a_spark_application(render_error: Any) -> None:
    assert "apiVersion" in render_error({"spark": {"jobTemplate": {"kind": "SparkApplication"}}})
    assert "SparkApplication" in render_error({"spark": {"jobTemplate": {
        "apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "Pod"}}})
