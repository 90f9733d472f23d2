"""What a platform team expects of an operator chart (cert-manager's and the Kubeflow Spark
Operator's charts have it): a disruption budget, free-form scheduling, security contexts that
pass OpenShift's restricted-v2, roles for the namespace's users, common labels, digests."""

from __future__ import annotations

from typing import Any

import pytest

AGGREGATE = "rbac.authorization.k8s.io/aggregate-to-"
DIGEST = "sha256:" + "0123456789abcdef" * 4


def of_kind(objs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == kind]


def pod_spec(objs: list[dict[str, Any]]) -> dict[str, Any]:
    (sts,) = of_kind(objs, "StatefulSet")
    spec: dict[str, Any] = sts["spec"]["template"]["spec"]
    return spec


def selector(objs: list[dict[str, Any]]) -> dict[str, str]:
    (sts,) = of_kind(objs, "StatefulSet")
    labels: dict[str, str] = sts["spec"]["selector"]["matchLabels"]
    return labels


# --- disruption budget -------------------------------------------------------

def test_a_drain_keeps_a_standby_operator(render: Any) -> None:
    objs = render()
    (pdb,) = of_kind(objs, "PodDisruptionBudget")
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == selector(objs)
    assert pdb["metadata"]["namespace"] == "ops"


def test_one_replica_gets_no_budget_that_would_block_every_drain(render: Any) -> None:
    assert not of_kind(render({"replicaCount": 1}), "PodDisruptionBudget")
    assert not of_kind(render({"podDisruptionBudget": {"enabled": False}}), "PodDisruptionBudget")


def test_budget_as_min_available(render: Any, render_error: Any) -> None:
    (pdb,) = of_kind(render({"replicaCount": 3, "podDisruptionBudget": {
        "enabled": True, "minAvailable": 2}}), "PodDisruptionBudget")
    assert pdb["spec"] == {"minAvailable": 2, "selector": pdb["spec"]["selector"]}
    message = render_error({"podDisruptionBudget": {"maxUnavailable": 1, "minAvailable": 1}})
    assert "podDisruptionBudget" in message


# --- scheduling --------------------------------------------------------------

def test_free_form_affinity_replaces_the_anti_affinity_preset(render: Any) -> None:
    node_affinity = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["system"]}]}]}}
    spec = pod_spec(render({"affinity": {"nodeAffinity": node_affinity}}))
    assert spec["affinity"] == {"nodeAffinity": node_affinity}
    # The preset stays the default.
    preset = pod_spec(render())["affinity"]
    assert set(preset) == {"podAntiAffinity"}


def test_topology_spread_gets_the_pods_selector_unless_given(render: Any) -> None:
    objs = render({"topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
         "whenUnsatisfiable": "ScheduleAnyway"},
        {"maxSkew": 2, "topologyKey": "kubernetes.io/hostname",
         "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"x": "y"}}},
    ]})
    zone, host = pod_spec(objs)["topologySpreadConstraints"]
    assert zone == {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                    "whenUnsatisfiable": "ScheduleAnyway",
                    "labelSelector": {"matchLabels": selector(objs)}}
    assert host["labelSelector"] == {"matchLabels": {"x": "y"}} and host["maxSkew"] == 2
    assert "topologySpreadConstraints" not in pod_spec(render())


def test_revision_history_limit(render: Any) -> None:
    (sts,) = of_kind(render({"revisionHistoryLimit": 3}), "StatefulSet")
    assert sts["spec"]["revisionHistoryLimit"] == 3


# --- security ----------------------------------------------------------------

def test_default_contexts_pass_openshift_restricted_v2(render: Any) -> None:
    """restricted-v2 assigns the UID and fsGroup from the namespace's range (MustRunAsRange):
    a fixed one in the pod is refused. It also requires no privilege escalation, every
    capability dropped (NET_BIND_SERVICE may be added), the runtime's seccomp profile, and
    only emptyDir/configMap/secret/projected/downwardAPI/PVC/ephemeral volumes."""
    spec = pod_spec(render())
    pod_ctx = spec.get("securityContext", {})
    for fixed in ("runAsUser", "runAsGroup", "fsGroup", "supplementalGroups"):
        assert fixed not in pod_ctx, fixed
    assert pod_ctx["seccompProfile"] == {"type": "RuntimeDefault"}
    assert not {"hostNetwork", "hostPID", "hostIPC"} & set(spec)
    allowed_volumes = {"emptyDir", "configMap", "secret", "projected", "downwardAPI",
                       "persistentVolumeClaim", "ephemeral"}
    for volume in spec.get("volumes", []):
        assert set(volume) - {"name"} <= allowed_volumes, volume
    for c in spec["containers"]:
        ctx = c["securityContext"]
        for fixed in ("runAsUser", "runAsGroup"):
            assert fixed not in ctx, (c["name"], fixed)
        assert ctx["allowPrivilegeEscalation"] is False
        assert ctx["capabilities"]["drop"] == ["ALL"]
        assert not set(ctx["capabilities"].get("add", [])) - {"NET_BIND_SERVICE"}
        assert ctx.get("privileged", False) is False
        assert ctx["runAsNonRoot"] is True  # the image's USER is numeric and non-zero
        assert not [p for p in c.get("ports", []) if p.get("hostPort")]


def test_security_contexts_are_values(render: Any, render_error: Any) -> None:
    """Given keys merge into the defaults (Helm merges maps); null drops one."""
    spec = pod_spec(render({"podSecurityContext": {"runAsUser": 2000, "fsGroup": 2000,
                                                   "seccompProfile": None},
                            "containerSecurityContext": {"readOnlyRootFilesystem": False}}))
    assert spec["securityContext"] == {"runAsUser": 2000, "fsGroup": 2000, "runAsNonRoot": True}
    ctx = spec["containers"][0]["securityContext"]
    assert ctx["readOnlyRootFilesystem"] is False and ctx["allowPrivilegeEscalation"] is False
    message = render_error({"containerSecurityContext": {"readOnlyRootFilesytem": True}})
    assert "readOnlyRootFilesytem" in message


# --- users' roles ------------------------------------------------------------

def aggregated_roles(objs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in of_kind(objs, "ClusterRole")
            if any(k.startswith(AGGREGATE) for k in o["metadata"].get("labels", {}))}


def granted(role: dict[str, Any]) -> set[tuple[str, str]]:
    return {(res, verb) for r in role["rules"] for res in r["resources"] for verb in r["verbs"]}


def test_namespace_users_read_and_write_views_through_the_default_roles(render: Any) -> None:
    roles = aggregated_roles(render())
    by_role: dict[str, set[tuple[str, str]]] = {"view": set(), "edit": set(), "admin": set()}
    for role in roles.values():
        for name in by_role:
            if role["metadata"]["labels"].get(AGGREGATE + name) == "true":
                by_role[name] |= granted(role)
    assert by_role["view"] == {("derivedviews", v) for v in ("get", "list", "watch")} | {
        ("derivedviews/status", v) for v in ("get", "list", "watch")}
    for writer in ("edit", "admin"):
        assert {("derivedviews", v) for v in ("create", "update", "patch", "delete")} <= \
            by_role[writer]
        # The status is the operator's: users never write it.
        assert not {v for res, v in by_role[writer] if res == "derivedviews/status"} - {
            "get", "list", "watch"}
    for role in roles.values():
        assert all(r["apiGroups"] == ["derivedviews.io"] for r in role["rules"])
    assert not aggregated_roles(render({"aggregateToDefaultRoles": False}))


# --- labels and images -------------------------------------------------------

def test_common_labels_reach_every_object(render: Any) -> None:
    objs = render({"commonLabels": {"team": "platform", "cost-centre": "42"}})
    for o in objs:
        labels = o["metadata"].get("labels", {})
        assert labels.get("team") == "platform" and labels.get("cost-centre") == "42", (
            o["kind"], o["metadata"]["name"])


def test_a_digest_pins_the_image(render: Any, render_error: Any) -> None:
    image = pod_spec(render({"image": {"repository": "reg/op", "tag": "1.2", "digest": DIGEST}}))[
        "containers"][0]["image"]
    assert image == f"reg/op@{DIGEST}"
    assert pod_spec(render({"image": {"repository": "reg/op", "tag": "1.2"}}))[
        "containers"][0]["image"] == "reg/op:1.2"
    assert "digest" in render_error({"image": {"repository": "reg/op", "digest": "latest"}})


@pytest.mark.parametrize("key", ["affinity", "podSecurityContext"])
def test_scheduling_and_security_values_refuse_typos(render_error: Any, key: str) -> None:
    assert "nodeAfinity" in render_error({key: {"nodeAfinity": {}}})


# --- CRD upgrade path --------------------------------------------------------

def hook_objects(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objs if "helm.sh/hook" in o["metadata"].get("annotations", {})]


def test_a_pre_upgrade_hook_applies_the_new_crd(render: Any) -> None:
    """Helm never upgrades crds/: a Job running the new operator image's `derived-views-crds`
    does, before the new operator pods roll out, with RBAC that lives only while it runs."""
    objs = render()
    hooks = hook_objects(objs)
    assert sorted(o["kind"] for o in hooks) == [
        "ClusterRole", "ClusterRoleBinding", "Job", "ServiceAccount"]
    for o in hooks:
        ann = o["metadata"]["annotations"]
        assert ann["helm.sh/hook"] == "pre-upgrade"
        assert "hook-succeeded" in ann["helm.sh/hook-delete-policy"]
    weights = {o["kind"]: int(o["metadata"]["annotations"]["helm.sh/hook-weight"]) for o in hooks}
    assert weights["Job"] > max(weights[k] for k in ("ClusterRole", "ClusterRoleBinding",
                                                      "ServiceAccount"))
    (role,) = [o for o in hooks if o["kind"] == "ClusterRole"]
    assert role["rules"] == [{"apiGroups": ["apiextensions.k8s.io"],
                              "resources": ["customresourcedefinitions"],
                              "resourceNames": ["derivedviews.derivedviews.io"],
                              "verbs": ["get", "patch"]}]
    (job,) = [o for o in hooks if o["kind"] == "Job"]
    pod = job["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["command"] == ["derived-views-crds"]
    assert c["image"] == pod_spec(objs)["containers"][0]["image"]
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert pod["restartPolicy"] == "Never"
    assert not hook_objects(render({"crdUpgrade": {"enabled": False}}))
