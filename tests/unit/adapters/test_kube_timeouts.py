"""Every call the operator's Kubernetes adapter makes carries a request timeout: a hung API
server fails the call (the pass is retried) instead of holding a view's lock and a worker
thread for good. Checked on every public method against a recorder standing in for the
generated client (no API server involved: this is about the arguments, not the server)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from kubernetes import client

from derived_views.adapters.kube.client import REQUEST_TIMEOUT, Kube
from derived_views.core.actions import SecretCopy

VIEW = {"metadata": {"name": "v", "namespace": "ns", "uid": "u", "resourceVersion": "7",
                     "finalizers": ["derivedviews.io/cleanup"]},
        "spec": {"deletionPolicy": "Delete", "sink": {"postgres": {"secretRef": {"name": "s"}}}}}


class _Recorder:
    """Answers any generated-client method; records its keyword arguments."""

    def __init__(self, calls: list[tuple[str, dict[str, Any]]]) -> None:
        self.calls = calls
        self.api_client = SimpleNamespace(sanitize_for_serialization=lambda items: [])

    def __getattr__(self, name: str) -> Any:
        def call(*_: Any, **kwargs: Any) -> Any:
            self.calls.append((name, kwargs))
            if name == "read_namespaced_secret":
                return client.V1Secret(metadata=client.V1ObjectMeta(
                    finalizers=["derivedviews.io/sink-secret"], resource_version="3"), data={})
            if name.startswith("list_namespaced_custom"):
                return {"items": []}
            if name == "list_namespaced_pod":
                return SimpleNamespace(items=[])
            if name in ("get_namespaced_custom_object", "create_namespaced_custom_object"):
                return VIEW
            if name == "read_namespace":
                return client.V1Namespace(metadata=client.V1ObjectMeta(labels={}))
            return None
        return call


def test_every_call_has_a_request_timeout() -> None:
    calls: list[tuple[str, dict[str, Any]]] = []
    kube = Kube(client.ApiClient())
    kube.custom = _Recorder(calls)  # type: ignore[assignment]
    kube.core = _Recorder(calls)  # type: ignore[assignment]
    kube.spark_applications("ns", "v")
    kube.create_spark_application("ns", {"metadata": {"name": "a"}})
    kube.delete_spark_application("ns", "a")
    kube.driver_pods("ns", "v")
    kube.secret_data("ns", "s")
    kube.get_view("ns", "v")
    kube.patch_view_status("ns", "v", {})
    kube.add_finalizer("ns", "v", "x/y")
    kube.remove_finalizer("ns", "v", "derivedviews.io/cleanup")
    kube.event(VIEW, reason="R", message="m")
    kube.hold_secret("ns", "s", "x/other")
    kube.release_secret("ns", "s", "derivedviews.io/sink-secret", view="v")
    kube.namespace_labels("ns-dv-jobs")
    kube.copy_secret("ns-dv-jobs", SecretCopy("ns", "s", "dv-v-s"),
                     {"apiVersion": "a/v1", "kind": "K", "name": "a", "uid": "u"}, {})
    names = {name for name, _ in calls}
    assert {"patch_namespaced_secret", "create_namespaced_event",
            "patch_namespaced_custom_object", "list_namespaced_pod", "read_namespace",
            "replace_namespaced_secret"} <= names
    untimed = [name for name, kwargs in calls if kwargs.get("_request_timeout") != REQUEST_TIMEOUT]
    assert untimed == []
    assert REQUEST_TIMEOUT <= 30


def test_releasing_keeps_the_hold_while_another_view_holds_the_secret() -> None:
    calls: list[tuple[str, dict[str, Any]]] = []
    kube = Kube(client.ApiClient())
    recorder = _Recorder(calls)
    other = {"metadata": {"name": "w"}, "status": {"heldSecrets": ["s"]}}
    listed = {"items": [VIEW, other]}
    recorder.list_namespaced_custom_object = (  # type: ignore[method-assign]
        lambda *_, **kw: calls.append(("list", kw)) or listed)
    kube.custom = recorder  # type: ignore[assignment]
    kube.core = recorder  # type: ignore[assignment]
    kube.release_secret("ns", "s", "derivedviews.io/sink-secret", view="v")
    assert "patch_namespaced_secret" not in {name for name, _ in calls}
    listed["items"] = [VIEW]  # the last holder lets go
    kube.release_secret("ns", "s", "derivedviews.io/sink-secret", view="v")
    assert "patch_namespaced_secret" in {name for name, _ in calls}
