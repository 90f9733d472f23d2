"""The one fake of the shell's Kubernetes port (derived_views.reconcile.ports.KubePort) for
unit tests: Secrets, jobs, pods, namespaces and the view's status held in memory. Secrets are
labelled for views unless said otherwise; `read_only` makes any write fail (an observation
must write nothing); a method the shell calls that the port lacks is not here either."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from derived_views.adapters.kube.client import SecretMissing
from derived_views.core.actions import SecretCopy
from derived_views.core.judges.tenancy import SECRET_LABEL


@dataclass
class FakeKube:
    secrets: dict[str, dict[str, str]] = field(default_factory=dict)
    """Name -> data, in any namespace, labelled for views."""
    unlabelled: set[str] = field(default_factory=set)
    read_only: bool = False
    apps: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)
    views: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    statuses: list[dict[str, Any]] = field(default_factory=list)
    released: list[str] = field(default_factory=list)
    events: list[tuple[str, str]] = field(default_factory=list)
    copies: list[tuple[str, SecretCopy]] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)

    def _write(self, what: str) -> None:
        assert not self.read_only, f"the observation wrote: {what}"
        self.calls.append(what)

    # jobs and drivers
    def spark_applications(self, namespace: str, view: str, view_namespace: str | None = None
                           ) -> list[dict[str, Any]]:
        return [a for a in self.apps if a["metadata"].get("namespace", namespace) == namespace]

    def create_spark_application(self, namespace: str, manifest: dict[str, Any]) -> str:
        self._write("create_spark_application")
        self.apps.append({**manifest, "metadata": {**manifest["metadata"], "uid": "uid-app"}})
        return "uid-app"

    def delete_spark_application(self, namespace: str, name: str) -> None:
        self._write("delete_spark_application")
        self.apps = [a for a in self.apps if a["metadata"]["name"] != name]

    def driver_pods(self, namespace: str, view: str, view_namespace: str | None = None
                    ) -> list[dict[str, Any]]:
        return list(self.pods)

    def pod_events(self, namespace: str, uid: str, reason: str) -> list[dict[str, Any]]:
        return []

    def namespace_labels(self, name: str) -> dict[str, str] | None:
        return self.namespaces.get(name)

    # Secrets
    def secret(self, namespace: str, name: str) -> tuple[dict[str, str], dict[str, str]]:
        if name not in self.secrets:
            raise SecretMissing(f"secret {namespace}/{name} not found")
        return self.secrets[name], ({} if name in self.unlabelled else {SECRET_LABEL: "true"})

    def secret_data(self, namespace: str, name: str) -> dict[str, str]:
        return self.secret(namespace, name)[0]

    def hold_secret(self, namespace: str, name: str, finalizer: str) -> None:
        self._write("hold_secret")

    def release_secret(self, namespace: str, name: str, finalizer: str, *, view: str) -> None:
        self._write("release_secret")

    def copy_secret(self, namespace: str, copy: SecretCopy, owner: dict[str, str],
                    labels: dict[str, str]) -> None:
        self._write("copy_secret")
        self.copies.append((namespace, copy))

    # the view
    def get_view(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.views.get((namespace, name))

    def patch_view_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        self._write("patch_view_status")
        self.statuses.append(status)

    def add_finalizer(self, namespace: str, name: str, finalizer: str) -> None:
        self._write("add_finalizer")

    def remove_finalizer(self, namespace: str, name: str, finalizer: str) -> None:
        self._write("remove_finalizer")
        self.released.append(finalizer)

    def event(self, view: dict[str, Any], *, reason: str, message: str,
              type_: str = "Normal") -> None:
        self._write("event")
        self.events.append((reason, message))
