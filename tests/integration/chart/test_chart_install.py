"""helm install / upgrade / uninstall of the chart against the real local API server."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dvstack.chart import Helm, Kubectl, Release, contained
from dvstack.testing.waiting import wait_for

TIMEOUT = 60


def env_value(sts: dict[str, Any], name: str) -> str | None:
    env = sts["spec"]["template"]["spec"]["containers"][0]["env"]
    return next((e.get("value") for e in env if e["name"] == name), None)


def cluster_objects(kubectl: Kubectl, release: Release) -> dict[str, dict[str, Any] | None]:
    n = release.unique_name
    return {kind: kubectl.get_json(kind, n) for kind in (
        "clusterrole.rbac.authorization.k8s.io", "clusterrolebinding.rbac.authorization.k8s.io",
        "clusterkopfpeering.kopf.dev")}


def wait_gone(kubectl: Kubectl, what: str, *args: str) -> None:
    wait_for(lambda: kubectl.get_json(*args) is None, timeout=TIMEOUT, what=f"{what} to be deleted",
             on_timeout=lambda: str(kubectl.get_json(*args)))


def test_install_upgrade_uninstall_cluster_mode(
        helm_cli: Helm, kubectl: Kubectl, make_namespace: Callable[[str], str],
        install: Callable[..., Release]) -> None:
    ns = make_namespace("op")
    release = install(ns, {"watch": {"mode": "cluster"}})

    # The objects are in the API server (not merely rendered).
    sa = kubectl.get_json("serviceaccount", release.fullname, "-n", ns)
    assert sa is not None
    sts = kubectl.get_json("statefulset", release.fullname, "-n", ns)
    assert sts is not None and sts["spec"]["replicas"] == 2
    assert sts["spec"]["template"]["spec"]["serviceAccountName"] == release.fullname
    objs = cluster_objects(kubectl, release)
    assert all(objs.values()), {k: v is not None for k, v in objs.items()}
    binding = objs["clusterrolebinding.rbac.authorization.k8s.io"]
    assert binding is not None
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": release.fullname,
                                    "namespace": ns}]
    for crd in ("derivedviews.derivedviews.io", "kopfpeerings.kopf.dev",
                "clusterkopfpeerings.kopf.dev"):
        assert kubectl.get_json("crd", crd) is not None, crd

    # Peering priorities come from the pod-index label: the StatefulSet controller
    # sets it on this server (pods are created, though they never run here).
    def pod_indexes() -> set[str] | None:
        pods = kubectl.get_json("pods", "-n", ns, "-l", f"app.kubernetes.io/instance={release.name}")
        idx = {p["metadata"]["labels"].get("apps.kubernetes.io/pod-index")
               for p in (pods or {}).get("items", [])}
        return idx if idx == {"0", "1"} else None

    wait_for(pod_indexes, timeout=TIMEOUT, what="two operator pods labelled with pod-index 0 and 1")

    # helm upgrade with changed values is applied to the live objects (`contained`, as
    # `install` does: else the upgrade turns a cluster-wide tenancy policy back on)
    helm_cli.upgrade(release.name, ns, contained({"watch": {"mode": "cluster"}, "replicaCount": 3,
                                                  "operator": {"lagPollSeconds": 7}}))
    sts = kubectl.get_json("statefulset", release.fullname, "-n", ns)
    assert sts is not None
    assert sts["spec"]["replicas"] == 3
    assert env_value(sts, "DV_LAG_POLL_SECONDS") == "7"
    status = helm_cli.status(release.name, ns)
    assert status["version"] == 2 and status["info"]["status"] == "deployed"

    # helm uninstall removes every object, cluster-scoped ones included.
    helm_cli.uninstall(release.name, ns)
    for kind, name in (("statefulset", release.fullname), ("serviceaccount", release.fullname)):
        wait_gone(kubectl, f"{kind} {name}", kind, name, "-n", ns)
    wait_for(lambda: not any(cluster_objects(kubectl, release).values()), timeout=TIMEOUT,
             what="the release's cluster-scoped objects to be deleted")
    assert helm_cli.run("status", release.name, "-n", ns, check=False).returncode != 0


def test_install_upgrade_uninstall_namespaces_mode(
        helm_cli: Helm, kubectl: Kubectl, make_namespace: Callable[[str], str],
        install: Callable[..., Release]) -> None:
    ns = make_namespace("op")
    a, b, c = make_namespace("wa"), make_namespace("wb"), make_namespace("wc")
    release = install(ns, {"watch": {"mode": "namespaces", "namespaces": [a, b]}})
    name = release.unique_name

    def present(namespace: str) -> dict[str, bool]:
        return {kind: kubectl.get_json(kind, name, "-n", namespace) is not None
                for kind in ("role.rbac.authorization.k8s.io",
                             "rolebinding.rbac.authorization.k8s.io", "kopfpeering.kopf.dev")}

    assert all(present(a).values()) and all(present(b).values()), (present(a), present(b))
    assert not any(present(c).values()), present(c)
    assert not any(present(ns).values()), present(ns)
    assert kubectl.get_json("clusterkopfpeering.kopf.dev", name) is None
    cluster_role = kubectl.get_json("clusterrole.rbac.authorization.k8s.io", name)
    assert cluster_role is not None
    assert {r for rule in cluster_role["rules"] for r in rule["resources"]} == {
        "customresourcedefinitions", "namespaces"}
    sts = kubectl.get_json("statefulset", release.fullname, "-n", ns)
    assert sts is not None
    args = sts["spec"]["template"]["spec"]["containers"][0]["args"]
    assert f"--namespace={a}" in args and f"--namespace={b}" in args

    # Upgrade: stop watching `a`, start watching `c`.
    helm_cli.upgrade(release.name, ns, {"watch": {"mode": "namespaces", "namespaces": [b, c]}})
    wait_for(lambda: not any(present(a).values()), timeout=TIMEOUT,
             what=f"the release's objects in {a} to be removed", on_timeout=lambda: str(present(a)))
    assert all(present(b).values()) and all(present(c).values()), (present(b), present(c))
    sts = kubectl.get_json("statefulset", release.fullname, "-n", ns)
    assert sts is not None
    args = sts["spec"]["template"]["spec"]["containers"][0]["args"]
    assert f"--namespace={a}" not in args and f"--namespace={c}" in args

    helm_cli.uninstall(release.name, ns)
    wait_for(lambda: not any(any(present(n).values()) for n in (a, b, c)), timeout=TIMEOUT,
             what="the release's Roles, RoleBindings and KopfPeerings to be deleted")
    wait_gone(kubectl, "the ClusterRole", "clusterrole.rbac.authorization.k8s.io", name)


def test_same_release_name_in_two_namespaces_does_not_clash(
        kubectl: Kubectl, make_namespace: Callable[[str], str],
        install: Callable[..., Release]) -> None:
    """Release names are unique per namespace only; cluster-scoped names must not collide."""
    first = install(make_namespace("op1"), {}, name="dv")
    second = install(make_namespace("op2"), {}, name="dv")
    assert first.unique_name != second.unique_name
    for release in (first, second):
        objs = cluster_objects(kubectl, release)
        assert all(objs.values()), (release, {k: v is not None for k, v in objs.items()})
        labels = objs["clusterrole.rbac.authorization.k8s.io"]["metadata"]["labels"]  # type: ignore[index]
        assert labels["derivedviews.io/release-namespace"] == release.namespace


def test_spark_drivers_account_and_the_notes_on_job_namespaces(
        helm_cli: Helm, kubectl: Kubectl, make_namespace: Callable[[str], str],
        install: Callable[..., Release]) -> None:
    ns = make_namespace("op")
    a, b = make_namespace("wa"), make_namespace("wb")
    release = install(ns, {"watch": {"mode": "namespaces", "namespaces": [a, b]}})
    account = f"{release.unique_name}-spark"
    sts = kubectl.get_json("statefulset", release.fullname, "-n", ns)
    assert sts is not None and env_value(sts, "DV_SPARK_SERVICE_ACCOUNT") == account
    for tenant in (a, b):
        # the drivers run in the tenant's job namespace (jobs.namespace), made for it
        watched = f"{tenant}-dv-jobs"
        space = kubectl.get_json("namespace", watched)
        assert space is not None and space["metadata"]["labels"][
            "derivedviews.io/jobs-for"] == tenant
        for kind in ("serviceaccount", "role.rbac.authorization.k8s.io",
                     "rolebinding.rbac.authorization.k8s.io"):
            assert kubectl.get_json(kind, account, "-n", watched) is not None, (kind, watched)
            assert kubectl.get_json(kind, account, "-n", tenant) is None, (kind, tenant)
        # The driver may run its executors: pods and what they use, in its own namespace.
        user = f"--as=system:serviceaccount:{watched}:{account}"

        def can_i(verb: str, resource: str, namespace: str = watched, as_: str = user) -> bool:
            return kubectl.run("auth", "can-i", verb, resource, "-n", namespace, as_,
                               check=False).stdout.strip() == "yes"

        for verb, resource in (("create", "pods"), ("delete", "pods"), ("create", "services"),
                               ("create", "configmaps"), ("create", "persistentvolumeclaims")):
            wait_for(lambda v=verb, r=resource: can_i(v, r), timeout=TIMEOUT,
                     what=f"{account} to be allowed to {verb} {resource}")
        assert not can_i("get", "secrets")
    notes = helm_cli.run("get", "notes", release.name, "-n", ns).stdout
    assert "spark.jobNamespaces" in notes
    assert account in notes and f"{a}-dv-jobs" in notes and f"{b}-dv-jobs" in notes


def test_namespace_users_get_views_through_the_default_roles(
        kubectl: Kubectl, make_namespace: Callable[[str], str],
        install: Callable[..., Release]) -> None:
    """The controller-manager aggregates the chart's ClusterRoles into view/edit/admin:
    a user bound to `edit` in a namespace may write DerivedViews there, `view` may read."""
    ns = make_namespace("op")
    team = make_namespace("team")
    install(ns, {"watch": {"mode": "cluster"}})
    for user, role in (("alice", "edit"), ("bob", "view"), ("dana", "admin")):
        kubectl.run("create", "rolebinding", f"{user}-{role}", f"--clusterrole={role}",
                    f"--user={user}", "-n", team)

    def answer(verb: str, user: str, resource: str = "derivedviews.derivedviews.io",
               *extra: str) -> str:
        proc = kubectl.run("auth", "can-i", verb, resource, f"--as={user}", "-n", team, *extra,
                           check=False)
        return proc.stdout.strip()

    expected = {
        ("create", "alice"): "yes", ("delete", "alice"): "yes", ("patch", "dana"): "yes",
        ("list", "bob"): "yes", ("watch", "bob"): "yes",
        ("create", "bob"): "no", ("delete", "bob"): "no", ("list", "carol"): "no",
    }

    def mismatches() -> dict[tuple[str, str], str]:
        return {k: answer(*k) for k, want in expected.items() if answer(*k) != want}

    # The aggregation controller and the authorizer's informer are asynchronous.
    wait_for(lambda: not mismatches(), timeout=TIMEOUT,
             what="view/edit/admin to include the chart's DerivedView rules",
             on_timeout=lambda: str(mismatches()))
    # Users never write the status: it is the operator's.
    assert answer("patch", "alice", "derivedviews.derivedviews.io", "--subresource=status") == "no"
