"""The Helm chart against a live API server: releases, and the RBAC `can-i` matrix.

Shared by the chart's integration tests and `stack/can-i-matrix.py` (which
writes docs/rbac-can-i.md), so the document shows exactly what the tests check.
Everything goes through the `helm` and `kubectl` binaries with the stack's
admin kubeconfig; the chart's ServiceAccount is checked by impersonation.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from dvstack.settings import REPO_ROOT

CHART = REPO_ROOT / "charts" / "derived-views"
CHART_NAME = "derived-views"

Mode = Literal["cluster", "namespaces"]


def kubectl_binary() -> str:
    found = shutil.which("kubectl")
    if not found:
        raise SystemExit("'kubectl' was not found on PATH: install kubectl (Debian: kubernetes-client)")
    return found


def short_id() -> str:
    return uuid.uuid4().hex[:8]


@dataclass(frozen=True)
class Kubectl:
    binary: str
    kubeconfig: str

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([self.binary, "--kubeconfig", self.kubeconfig, *args],
                              capture_output=True, text=True, check=False, timeout=120)
        if check and proc.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)} failed ({proc.returncode}):\n"
                               f"{proc.stdout}{proc.stderr}")
        return proc

    def get_json(self, *args: str) -> dict[str, Any] | None:
        """`kubectl get ... -o json`, or None when the object does not exist."""
        proc = self.run("get", *args, "-o", "json", "--ignore-not-found", check=True)
        if not proc.stdout.strip():
            return None
        obj: dict[str, Any] = json.loads(proc.stdout)
        return obj

    def create_namespace(self, name: str) -> None:
        self.run("create", "namespace", name)

    def delete_namespace(self, name: str) -> None:
        # The controller manager empties and removes it; no need to wait here.
        self.run("delete", "namespace", name, "--ignore-not-found", "--wait=false")


@dataclass(frozen=True)
class Helm:
    binary: Path
    kubeconfig: str

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([str(self.binary), "--kubeconfig", self.kubeconfig, *args],
                              capture_output=True, text=True, check=False, timeout=300)
        if check and proc.returncode != 0:
            raise RuntimeError(f"helm {' '.join(args)} failed ({proc.returncode}):\n"
                               f"{proc.stdout}{proc.stderr}")
        return proc

    def _with_values(self, verb: str, release: str, namespace: str,
                     values: Mapping[str, Any], *flags: str) -> subprocess.CompletedProcess[str]:
        # No --wait: the operator pods run only where their image is (the real node,
        # given the project's image; no registry is reachable), so callers wait on what
        # they check, through the API.
        with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="dv-values-") as f:
            json.dump(values, f)
            f.flush()
            return self.run(verb, release, str(CHART), "--namespace", namespace,
                            "--values", f.name, *flags)

    def install(self, release: str, namespace: str,
                values: Mapping[str, Any]) -> subprocess.CompletedProcess[str]:
        return self._with_values("install", release, namespace, values)

    def upgrade(self, release: str, namespace: str, values: Mapping[str, Any], *,
                hooks: bool = False) -> subprocess.CompletedProcess[str]:
        """Without `hooks` (--no-hooks): the CRD upgrade hook is a Job of the chart's image,
        which only the real node has (imported, never pulled), and Helm would wait for it
        forever elsewhere; its command is tested on its own (test_crd_upgrade_hook.py).
        With `hooks`, Helm runs the hook Job and fails unless it succeeds."""
        return self._with_values("upgrade", release, namespace, values,
                                 *(() if hooks else ("--no-hooks",)))

    def uninstall(self, release: str, namespace: str) -> None:
        self.run("uninstall", release, "--namespace", namespace, "--ignore-not-found")

    def status(self, release: str, namespace: str) -> dict[str, Any]:
        out: dict[str, Any] = json.loads(
            self.run("status", release, "--namespace", namespace, "-o", "json").stdout)
        return out


def unique_name(release_namespace: str, release: str) -> str:
    """The chart's name for cluster-scoped and shared-namespace objects (dv.uniqueName)."""
    return f"{release_namespace}-{fullname(release)}"[:63].rstrip("-")


def fullname(release: str) -> str:
    """The chart's name for the release's namespaced objects (dv.fullname)."""
    return (release if CHART_NAME in release else f"{release}-{CHART_NAME}")[:63].rstrip("-")


@dataclass(frozen=True)
class Release:
    name: str
    namespace: str

    @property
    def fullname(self) -> str:
        """Name of the StatefulSet and the ServiceAccount."""
        return fullname(self.name)

    @property
    def unique_name(self) -> str:
        """Name of the release's cluster-scoped objects, Roles and peering object."""
        return unique_name(self.namespace, self.name)


# --- the RBAC matrix ---------------------------------------------------------

Scope = Literal["watched", "unwatched", "release", "all"]
SCOPES: dict[str, str] = {
    "watched": "a watched namespace",
    "unwatched": "a namespace not in watch.namespaces",
    "release": "the release's own namespace",
    "all": "all namespaces / cluster-scoped (-A)",
}


@dataclass(frozen=True)
class Check:
    """One `kubectl auth can-i` question and the answer each mode must give."""

    verb: str
    resource: str  # "{peering}" is replaced by the release's peering object name
    scope: Scope
    cluster: bool  # expected in watch.mode: cluster
    namespaces: bool  # expected in watch.mode: namespaces
    subresource: str | None = None

    def expected(self, mode: Mode) -> bool:
        return self.cluster if mode == "cluster" else self.namespaces

    def label(self) -> str:
        sub = f" --subresource={self.subresource}" if self.subresource else ""
        return f"{self.verb} {self.resource}{sub}"


def _both(verb: str, resource: str, scope: Scope, allowed: bool,
          subresource: str | None = None) -> Check:
    return Check(verb, resource, scope, allowed, allowed, subresource)


DV = "derivedviews.derivedviews.io"
SPARK = "sparkapplications.sparkoperator.k8s.io"
CRDS = "customresourcedefinitions.apiextensions.k8s.io"

CHECKS: tuple[Check, ...] = (
    # What the operator needs, in the namespaces it serves.
    *(_both(v, DV, "watched", True) for v in ("get", "list", "watch", "patch", "update")),
    _both("patch", DV, "watched", True, "status"),
    _both("update", DV, "watched", True, "status"),
    # Owner references with blockOwnerDeletion under OwnerReferencesPermissionEnforcement.
    _both("update", DV, "watched", True, "finalizers"),
    *(_both(v, SPARK, "watched", True) for v in ("get", "list", "watch", "create", "delete")),
    _both("get", "secrets", "watched", True),
    # patch: only to hold a Delete view's Secrets (a finalizer) until its indexes are dropped.
    _both("patch", "secrets", "watched", True),
    *(_both(v, "pods", "watched", True) for v in ("get", "list", "watch")),
    _both("create", "events", "watched", True),
    _both("patch", "events", "watched", True),
    # list: the kubelet's FailedMount Events of a driver waiting for a Secret volume.
    _both("list", "events", "watched", True),
    # Kopf's own cluster-wide reads.
    _both("list", CRDS, "all", True),
    _both("watch", CRDS, "all", True),
    _both("list", "namespaces", "all", True),
    _both("watch", "namespaces", "all", True),
    # Kopf peering: watch the kind, write only this release's object.
    Check("patch", "clusterkopfpeerings.kopf.dev/{peering}", "all", True, False),
    Check("list", "clusterkopfpeerings.kopf.dev", "all", True, False),
    Check("patch", "kopfpeerings.kopf.dev/{peering}", "watched", False, True),
    Check("list", "kopfpeerings.kopf.dev", "watched", False, True),
    Check("patch", "clusterkopfpeerings.kopf.dev/someone-else", "all", False, False),
    Check("patch", "kopfpeerings.kopf.dev/someone-else", "watched", False, False),
    # Outside the watched namespaces: only cluster mode serves them.
    Check("get", "secrets", "unwatched", True, False),
    Check("get", "secrets", "release", True, False),
    Check("get", "secrets", "all", True, False),
    Check("list", DV, "unwatched", True, False),
    Check("list", DV, "all", True, False),
    Check("create", SPARK, "unwatched", True, False),
    Check("list", "pods", "unwatched", True, False),
    # Never, in either mode.
    _both("list", "secrets", "watched", False),
    _both("watch", "secrets", "watched", False),
    _both("list", "secrets", "unwatched", False),
    _both("list", "secrets", "all", False),
    _both("watch", "secrets", "all", False),
    _both("create", "secrets", "watched", False),
    _both("update", "secrets", "watched", False),
    _both("delete", "secrets", "watched", False),
    _both("get", "configmaps", "watched", False),
    _both("create", DV, "watched", False),
    _both("delete", DV, "watched", False),
    _both("patch", SPARK, "watched", False),
    _both("update", SPARK, "watched", False),
    _both("create", "pods", "watched", False),
    _both("delete", "pods", "watched", False),
    _both("patch", "pods", "watched", False),
    _both("create", "pods/exec", "watched", False),
    _both("create", "deployments.apps", "watched", False),
    _both("delete", "namespaces", "all", False),
    _both("create", "namespaces", "all", False),
    _both("create", CRDS, "all", False),
    _both("delete", CRDS, "all", False),
    _both("create", "clusterrolebindings.rbac.authorization.k8s.io", "all", False),
    _both("bind", "clusterroles.rbac.authorization.k8s.io", "all", False),
    _both("escalate", "roles.rbac.authorization.k8s.io", "watched", False),
    _both("impersonate", "serviceaccounts", "watched", False),
    _both("*", "*", "watched", False),
    _both("*", "*", "all", False),
    _both("get", "*", "watched", False),
    _both("*", "secrets", "watched", False),
)


@dataclass(frozen=True)
class MatrixTarget:
    """An installed release and the namespaces the matrix's scopes stand for."""

    mode: Mode
    release: str
    release_namespace: str
    service_account: str
    peering: str
    scopes: Mapping[str, str]  # scope -> namespace name ("all" -> "")

    @property
    def user(self) -> str:
        return f"system:serviceaccount:{self.release_namespace}:{self.service_account}"


@dataclass(frozen=True)
class Result:
    check: Check
    expected: bool
    actual: bool
    detail: str

    @property
    def ok(self) -> bool:
        return self.expected == self.actual


def can_i(kubectl: Kubectl, target: MatrixTarget, check: Check) -> Result:
    resource = check.resource.replace("{peering}", target.peering)
    args = ["auth", "can-i", check.verb, resource, f"--as={target.user}"]
    if check.subresource:
        args.append(f"--subresource={check.subresource}")
    args += ["--all-namespaces"] if check.scope == "all" else ["-n", target.scopes[check.scope]]
    proc = kubectl.run(*args, check=False)
    answer = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    if answer not in ("yes", "no") or proc.returncode not in (0, 1):
        raise RuntimeError(f"kubectl {' '.join(args)} gave no yes/no answer "
                           f"(exit {proc.returncode}):\n{proc.stdout}{proc.stderr}")
    return Result(check, check.expected(target.mode), answer == "yes", proc.stderr.strip())


def run_matrix(kubectl: Kubectl, target: MatrixTarget,
               checks: Sequence[Check] = CHECKS) -> list[Result]:
    with ThreadPoolExecutor(max_workers=4) as pool:
        return list(pool.map(lambda c: can_i(kubectl, target, c), checks))


def matrix_table(target: MatrixTarget, results: Sequence[Result]) -> str:
    """A Markdown table; scopes are named by role, so the text is stable across runs."""
    lines = [
        f"`watch.mode: {target.mode}` — `kubectl auth can-i <verb> <resource> "
        f"--as=system:serviceaccount:<release-ns>:<release>-derived-views`",
        "",
        "| verb | resource | scope | expected | can-i | ok |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        sub = f" (`{r.check.subresource}`)" if r.check.subresource else ""
        resource = r.check.resource.replace("{peering}", "<own peering object>")
        lines.append(
            f"| `{r.check.verb}` | `{resource}`{sub} | {SCOPES[r.check.scope]} "
            f"| {'yes' if r.expected else 'no'} | {'yes' if r.actual else 'no'} "
            f"| {'ok' if r.ok else '**MISMATCH**'} |")
    return "\n".join(lines)


def contained(values: dict[str, Any]) -> dict[str, Any]:
    """A test release's values with its tenancy admission policy off when it would judge
    every namespace (cluster mode) and the caller did not ask for it: tests run side by side,
    and a cluster-wide policy installed by one refused another's views at admission (CI: the
    tenancy e2e's hostile views, which the operator itself must refuse; a cluster-mode
    upgrade, a Python view another release allowed)."""
    cluster_wide = (values.get("watch") or {}).get("mode", "cluster") == "cluster"
    if not cluster_wide or "admissionPolicy" in (values.get("tenancy") or {}):
        return values
    tenancy = {**(values.get("tenancy") or {}), "admissionPolicy": {"enabled": False}}
    return {**values, "tenancy": tenancy}


@contextmanager
def matrix_release(helm: Helm, kubectl: Kubectl, mode: Mode) -> Iterator[MatrixTarget]:
    """Install the chart into fresh namespaces for the matrix; remove it all afterwards.

    namespaces mode watches two fresh namespaces; a third plays "unwatched".
    """
    sid = short_id()
    release = f"can-i-{sid}"
    names = {"release": f"dv-op-{sid}", "watched": f"dv-w1-{sid}",
             "watched2": f"dv-w2-{sid}", "unwatched": f"dv-u-{sid}"}
    created: list[str] = []
    installed = False
    try:
        for ns in names.values():
            kubectl.create_namespace(ns)
            created.append(ns)
        values: dict[str, Any] = {"watch": {"mode": mode}}
        if mode == "namespaces":
            values["watch"]["namespaces"] = [names["watched"], names["watched2"]]
        helm.install(release, names["release"], contained(values))  # RBAC only here
        installed = True
        yield MatrixTarget(
            mode=mode, release=release, release_namespace=names["release"],
            service_account=fullname(release), peering=unique_name(names["release"], release),
            scopes={**names, "all": ""})
    finally:
        try:
            if installed:
                helm.uninstall(release, names["release"])
        finally:
            for ns in created:
                kubectl.delete_namespace(ns)
