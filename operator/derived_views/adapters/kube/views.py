"""What the `dv` CLI needs from Kubernetes: read DerivedViews, patch annotations and spec.

Every failure leaves this module as a `ViewsError` subclass with a one-line
message, so the CLI can print it and exit instead of showing a traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from derived_views.api.constants import GROUP, PLURAL, VERSION

_REQUEST_TIMEOUT_SECONDS = 10
"""A CLI call should fail fast when the API server is unreachable, not hang."""


class ViewsError(Exception):
    """A problem talking to Kubernetes, with a message fit for people."""


class ViewNotFound(ViewsError):
    """The DerivedView does not exist in that namespace."""


class ApiUnreachable(ViewsError):
    """The API server did not answer."""


class Conflict(ViewsError):
    """The view changed between read and write (resourceVersion mismatch)."""


def client_from_kubeconfig(path: str | None, context: str | None) -> Any:
    """An ApiClient for a kubeconfig (default: $KUBECONFIG or ~/.kube/config) and context."""
    if path is not None and not Path(path).is_file():
        raise ViewsError(f"kubeconfig {path} does not exist")
    configuration = client.Configuration()
    try:
        config.load_kube_config(config_file=path, context=context,
                                client_configuration=configuration, persist_config=False)
    except (ConfigException, OSError, TypeError) as exc:
        raise ViewsError(f"cannot load kubeconfig: {_one_line(exc)}") from None
    configuration.retries = 0
    return client.ApiClient(configuration=configuration)


def default_namespace(path: str | None, context: str | None) -> str:
    """The namespace of the kubeconfig's (current or named) context, else "default"."""
    try:
        contexts, current = config.list_kube_config_contexts(config_file=path)
    except (ConfigException, OSError, TypeError):
        return "default"
    chosen = current
    if context is not None:
        chosen = next((c for c in contexts or [] if c.get("name") == context), None)
    namespace = ((chosen or {}).get("context") or {}).get("namespace")
    return str(namespace) if namespace else "default"


class Views:
    """DerivedView reads and patches, with Kubernetes errors turned into ViewsError."""

    def __init__(self, api_client: Any) -> None:
        self.custom = client.CustomObjectsApi(api_client)

    def list(self, namespace: str | None) -> list[dict[str, Any]]:
        """Views in a namespace, or in every namespace when `namespace` is None."""
        if namespace is None:
            listing = self._call(lambda: self.custom.list_cluster_custom_object(
                GROUP, VERSION, PLURAL, _request_timeout=_REQUEST_TIMEOUT_SECONDS))
        else:
            listing = self._call(lambda: self.custom.list_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, _request_timeout=_REQUEST_TIMEOUT_SECONDS))
        return list(listing.get("items", []))

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        view: dict[str, Any] = self._call(
            lambda: self.custom.get_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, name,
                _request_timeout=_REQUEST_TIMEOUT_SECONDS),
            namespace=namespace, name=name)
        return view

    def set_annotations(self, namespace: str, name: str,
                        annotations: dict[str, str | None]) -> dict[str, Any]:
        """Merge-patch annotations; a None value removes the annotation."""
        return self.patch(namespace, name, {"metadata": {"annotations": annotations}})

    def patch(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """A JSON merge patch; a `metadata.resourceVersion` in it makes the write conditional."""
        view: dict[str, Any] = self._call(
            lambda: self.custom.patch_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, name, body,
                _request_timeout=_REQUEST_TIMEOUT_SECONDS),
            namespace=namespace, name=name)
        return view

    @staticmethod
    def _call(fn: Any, *, namespace: str | None = None, name: str | None = None) -> Any:
        try:
            return fn()
        except ApiException as exc:
            if exc.status == 404 and name is not None:
                raise ViewNotFound(f"DerivedView {namespace}/{name} not found") from None
            if exc.status == 404:
                raise ViewsError("the DerivedView API is not served: is the CRD installed?") \
                    from None
            if exc.status == 409:
                raise Conflict(f"DerivedView {namespace}/{name} changed meanwhile; "
                               "run the command again") from None
            raise ViewsError(f"API server answered {exc.status} {exc.reason}: "
                             f"{_one_line(exc.body or '')[:300]}") from None
        except urllib3.exceptions.HTTPError as exc:
            raise ApiUnreachable(f"API server unreachable: {_one_line(exc)}") from None


def _one_line(value: object) -> str:
    return " ".join(str(value).split())
