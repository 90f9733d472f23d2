"""Kubernetes API adapter: SparkApplications, their driver pods, Secrets, DerivedView status
and events."""

from __future__ import annotations

import base64
import datetime as dt
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from derived_views.api.constants import (
    MANAGED_BY,
    MANAGED_BY_LABEL,
    VIEW_LABEL,
    VIEW_NAMESPACE_LABEL,
)
from derived_views.core.actions import SecretCopy

SPARK_GROUP, SPARK_VERSION, SPARK_PLURAL = "sparkoperator.k8s.io", "v1beta2", "sparkapplications"
DV_GROUP, DV_VERSION, DV_PLURAL = "derivedviews.io", "v1alpha1", "derivedviews"
SPARK_ROLE_LABEL = "spark-role"
"""Spark labels its pods `spark-role=driver` / `spark-role=executor`."""


REQUEST_TIMEOUT = 10.0
"""Seconds any one API call may take: a hung API server must not hold a view's lock and a
worker thread for good (the call fails, the pass is retried)."""


class EventRefused(Exception):
    """The API server refused an Event (e.g. its namespace is being deleted)."""


class EventsUnreadable(Exception):
    """The API server refused to list Events (the operator's RBAC lacks `list events`)."""


class SecretMissing(Exception):
    """A Secret a view references does not exist or lacks a key."""


class SecretForbidden(Exception):
    """The credentials in use may not read a Secret (HTTP 403); the message says what to grant."""


class CopyConflict(Exception):
    """A Secret copy changed between its read and its write (the next pass writes it)."""


COPIED_FROM = "derivedviews.io/copied-from"
"""On a Secret copy in a job namespace: `<namespace>/<name>` of the Secret it copies."""


def _view_selector(view: str, view_namespace: str | None) -> str:
    selector = f"{VIEW_LABEL}={view}"
    return selector if view_namespace is None else \
        f"{selector},{VIEW_NAMESPACE_LABEL}={view_namespace}"


class Kube:
    """Thin, idempotent calls; 404 on delete and 409 on create are successes."""

    def __init__(self, api_client: Any, timeout: float = REQUEST_TIMEOUT) -> None:
        self.timeout = timeout
        self.custom = client.CustomObjectsApi(api_client)
        self.core = client.CoreV1Api(api_client)

    # SparkApplications -------------------------------------------------------
    def spark_applications(self, namespace: str, view: str, view_namespace: str | None = None
                           ) -> list[dict[str, Any]]:
        """The view's SparkApplications in `namespace`; in a job namespace (`view_namespace`
        given) only those labelled with the view's namespace too."""
        listing = self.custom.list_namespaced_custom_object(
            SPARK_GROUP, SPARK_VERSION, namespace, SPARK_PLURAL,
            label_selector=_view_selector(view, view_namespace), _request_timeout=self.timeout)
        return list(listing.get("items", []))

    def create_spark_application(self, namespace: str, manifest: dict[str, Any]) -> str:
        """Create it (409: it exists) and return its uid, which owns its Secret copies."""
        try:
            created = self.custom.create_namespaced_custom_object(
                SPARK_GROUP, SPARK_VERSION, namespace, SPARK_PLURAL, manifest,
                _request_timeout=self.timeout)
        except ApiException as exc:
            if exc.status != 409:
                raise
            created = self.custom.get_namespaced_custom_object(
                SPARK_GROUP, SPARK_VERSION, namespace, SPARK_PLURAL,
                manifest["metadata"]["name"], _request_timeout=self.timeout)
        return str(created["metadata"]["uid"])

    def copy_secret(self, namespace: str, copy: SecretCopy, owner: dict[str, str],
                    labels: dict[str, str]) -> None:
        """Write `copy` (the source's data) into `namespace`, owned by `owner` (a
        SparkApplication: apiVersion, kind, name, uid) besides the owners it has, so the
        garbage collector removes it with the last job that mounts it. A platform Secret
        (`copy.platform`) the namespace holds already and the operator did not make is left
        as it is."""
        try:
            current = self.core.read_namespaced_secret(copy.name, namespace,
                                                       _request_timeout=self.timeout)
        except ApiException as exc:
            if exc.status != 404:
                raise
            current = None
        if current is not None and copy.platform and \
                (current.metadata.labels or {}).get(MANAGED_BY_LABEL) != MANAGED_BY:
            return
        data = self.core.read_namespaced_secret(copy.source, copy.source_namespace,
                                                _request_timeout=self.timeout).data or {}
        owners = [o for o in ((current.metadata.owner_references or []) if current else [])
                  if o.uid != owner["uid"]]
        body = client.V1Secret(
            metadata=client.V1ObjectMeta(
                name=copy.name, namespace=namespace,
                labels={**labels, MANAGED_BY_LABEL: MANAGED_BY},
                annotations={COPIED_FROM: f"{copy.source_namespace}/{copy.source}"},
                owner_references=[*owners, client.V1OwnerReference(
                    api_version=owner["apiVersion"], kind=owner["kind"], name=owner["name"],
                    uid=owner["uid"], block_owner_deletion=False)],
                resource_version=current.metadata.resource_version if current else None),
            type="Opaque", data=data)
        try:
            if current is None:
                self.core.create_namespaced_secret(namespace, body,
                                                   _request_timeout=self.timeout)
            else:
                self.core.replace_namespaced_secret(copy.name, namespace, body,
                                                    _request_timeout=self.timeout)
        except ApiException as exc:
            if exc.status == 409:  # created or changed meanwhile: the next pass writes it
                raise CopyConflict(f"secret {namespace}/{copy.name} changed while it was "
                                   "written") from None
            raise

    def namespace_labels(self, name: str) -> dict[str, str] | None:
        """The labels of namespace `name`; None when it does not exist."""
        try:
            found = self.core.read_namespace(name, _request_timeout=self.timeout)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return dict(found.metadata.labels or {})

    def delete_spark_application(self, namespace: str, name: str) -> None:
        """Foreground deletion: the API server keeps the application (deletionTimestamp set)
        until its driver pod is gone, so the planner waits before recreating the same name."""
        try:
            self.custom.delete_namespaced_custom_object(
                SPARK_GROUP, SPARK_VERSION, namespace, SPARK_PLURAL, name,
                body=client.V1DeleteOptions(propagation_policy="Foreground"),
                _request_timeout=self.timeout)
        except ApiException as exc:
            if exc.status != 404:
                raise

    # Driver pods ---------------------------------------------------------------
    def driver_pods(self, namespace: str, view: str, view_namespace: str | None = None
                    ) -> list[dict[str, Any]]:
        """The view's Spark pods except executors, as API dicts: one list call per view.

        The driver carries the view labels the renderer sets in `spec.driver.labels`;
        `spark-role!=executor` also matches pods without a spark-role label.
        """
        listing = self.core.list_namespaced_pod(
            namespace, label_selector=(f"{_view_selector(view, view_namespace)},"
                                       f"{SPARK_ROLE_LABEL}!=executor"),
            _request_timeout=self.timeout)
        pods: list[dict[str, Any]] = self.core.api_client.sanitize_for_serialization(
            listing.items)
        return pods

    def pod_events(self, namespace: str, uid: str, reason: str) -> list[dict[str, Any]]:
        """The core/v1 Events with `reason` about the pod `uid`, as API dicts (one list call,
        filtered by the API server). EventsUnreadable when the API server refuses: an
        installation whose RBAC predates reading them."""
        try:
            listing = self.core.list_namespaced_event(
                namespace, field_selector=f"involvedObject.uid={uid},reason={reason}",
                _request_timeout=self.timeout)
        except ApiException as exc:
            raise EventsUnreadable(f"{exc.status} {exc.reason}") from None
        events: list[dict[str, Any]] = self.core.api_client.sanitize_for_serialization(
            listing.items)
        return events

    # Secrets -----------------------------------------------------------------
    def secret_data(self, namespace: str, name: str) -> dict[str, str]:
        return self.secret(namespace, name)[0]

    def secret(self, namespace: str, name: str) -> tuple[dict[str, str], dict[str, str]]:
        """(data, labels) of a Secret; SecretMissing when there is none."""
        try:
            secret = self.core.read_namespaced_secret(name, namespace,
                                                      _request_timeout=self.timeout)
        except ApiException as exc:
            if exc.status == 404:
                raise SecretMissing(f"secret {namespace}/{name} not found") from None
            if exc.status == 403:
                raise SecretForbidden(f"reading secret {namespace}/{name} is forbidden (HTTP "
                                      f"403): grant get on secrets in namespace {namespace}"
                                      ) from None
            raise
        data = {k: base64.b64decode(v).decode() for k, v in (secret.data or {}).items()}
        return data, dict(secret.metadata.labels or {})

    def hold_secret(self, namespace: str, name: str, finalizer: str) -> None:
        """Put `finalizer` on a Secret (nothing if it is gone)."""
        self._secret_finalizer(namespace, name, finalizer, present=True)

    def release_secret(self, namespace: str, name: str, finalizer: str, *, view: str) -> None:
        """Take `finalizer` off a Secret unless another DerivedView of the namespace still
        holds it (`status.heldSecrets`)."""
        listing = self.custom.list_namespaced_custom_object(
            DV_GROUP, DV_VERSION, namespace, DV_PLURAL, _request_timeout=self.timeout)
        for other in listing.get("items", []):
            held = (other.get("status") or {}).get("heldSecrets") or []
            if other["metadata"]["name"] != view and name in held:
                return
        self._secret_finalizer(namespace, name, finalizer, present=False)

    def _secret_finalizer(self, namespace: str, name: str, finalizer: str, *,
                          present: bool) -> None:
        try:
            secret = self.core.read_namespaced_secret(name, namespace,
                                                      _request_timeout=self.timeout)
        except ApiException as exc:
            if exc.status == 404:
                return
            raise
        current = list(secret.metadata.finalizers or [])
        if (finalizer in current) == present:
            return
        wanted = [*current, finalizer] if present else [f for f in current if f != finalizer]
        # A JSON patch: a strategic merge patch would merge the list instead of replacing it.
        try:
            self.core.patch_namespaced_secret(name, namespace, [
                {"op": "test", "path": "/metadata/resourceVersion",
                 "value": secret.metadata.resource_version},
                {"op": "replace" if current else "add", "path": "/metadata/finalizers",
                 "value": wanted}], _request_timeout=self.timeout)
        except ApiException as exc:
            if exc.status != 404:
                raise

    # DerivedView -------------------------------------------------------------
    def get_view(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            view: dict[str, Any] = self.custom.get_namespaced_custom_object(
                DV_GROUP, DV_VERSION, namespace, DV_PLURAL, name, _request_timeout=self.timeout)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return view

    def patch_view_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        self.custom.patch_namespaced_custom_object_status(
            DV_GROUP, DV_VERSION, namespace, DV_PLURAL, name, {"status": status},
            _request_timeout=self.timeout)

    def add_finalizer(self, namespace: str, name: str, finalizer: str) -> None:
        self._set_finalizer(namespace, name, finalizer, present=True)

    def remove_finalizer(self, namespace: str, name: str, finalizer: str) -> None:
        self._set_finalizer(namespace, name, finalizer, present=False)

    def _set_finalizer(self, namespace: str, name: str, finalizer: str, *, present: bool) -> None:
        """Add or remove one finalizer, guarded by resourceVersion so others' edits survive."""
        view = self.get_view(namespace, name)
        if view is None:
            return
        current = list(view["metadata"].get("finalizers") or [])
        if (finalizer in current) == present:
            return
        wanted = [*current, finalizer] if present else [f for f in current if f != finalizer]
        self.custom.patch_namespaced_custom_object(
            DV_GROUP, DV_VERSION, namespace, DV_PLURAL, name,
            {"metadata": {"finalizers": wanted,
                          "resourceVersion": view["metadata"]["resourceVersion"]}},
            _request_timeout=self.timeout)

    def event(self, view: dict[str, Any], *, reason: str, message: str, type_: str = "Normal") -> None:
        meta = view["metadata"]
        now = dt.datetime.now(dt.UTC)
        body = client.CoreV1Event(
            metadata=client.V1ObjectMeta(generate_name=f"{meta['name']}.", namespace=meta["namespace"]),
            involved_object=client.V1ObjectReference(
                api_version=f"{DV_GROUP}/{DV_VERSION}", kind="DerivedView", name=meta["name"],
                namespace=meta["namespace"], uid=meta.get("uid")),
            reason=reason, message=message, type=type_, first_timestamp=now, last_timestamp=now,
            count=1, source=client.V1EventSource(component="derived-views-operator"),
        )
        try:
            self.core.create_namespaced_event(meta["namespace"], body,
                                              _request_timeout=self.timeout)
        except ApiException as exc:
            raise EventRefused(f"{exc.status} {exc.reason}") from None


def new_api_client() -> Any:
    """In-cluster credentials when running in a pod, else the KUBECONFIG / default kubeconfig."""
    from kubernetes import config

    try:
        config.load_incluster_config()
        return client.ApiClient()
    except config.ConfigException:
        return config.new_client_from_config()
