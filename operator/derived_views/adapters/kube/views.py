"""What the `dv` CLI needs from Kubernetes: read DerivedViews (and a view's sink Secret), patch
annotations and spec, and ask the API server whether it would accept a view (a server-side
dry run: nothing is stored).

Every failure leaves this module as a `ViewsError` subclass with a one-line
message, so the CLI can print it and exit instead of showing a traceback.
"""

from __future__ import annotations

import base64
import json
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


class DryRunForbidden(ViewsError):
    """The caller may not create or update the view, so it may not dry-run it either."""


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

    def find(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The view, or None when there is none of that name (yet)."""
        try:
            return self.get(namespace, name)
        except ViewNotFound:
            return None

    def dry_run(self, namespace: str, body: dict[str, Any],
                resource_version: str | None) -> tuple[str, str] | None:
        """The API server's (reason, message) when it would refuse `body` (its CRD schema, CEL
        rules, admission policies and webhooks), None when it would accept it. A create for a
        new view, a replace of the one at `resource_version` otherwise; `dryRun=All`: nothing
        is stored, but the caller needs the create or update right all the same."""
        name = body["metadata"]["name"]
        try:
            if resource_version is None:
                self.custom.create_namespaced_custom_object(
                    GROUP, VERSION, namespace, PLURAL, body, dry_run="All",
                    _request_timeout=_REQUEST_TIMEOUT_SECONDS)
            else:
                replaced = {**body, "metadata": {**body["metadata"],
                                                 "resourceVersion": resource_version}}
                self.custom.replace_namespaced_custom_object(
                    GROUP, VERSION, namespace, PLURAL, name, replaced, dry_run="All",
                    _request_timeout=_REQUEST_TIMEOUT_SECONDS)
        except ApiException as exc:
            refusal = _refusal(exc)
            if refusal is not None:
                return refusal
            if exc.status == 403:
                raise DryRunForbidden(
                    f"the server-side dry run of DerivedView {namespace}/{name} is forbidden: "
                    "it needs the create and update rights on derivedviews (nothing is "
                    "stored); grant them, or pass --no-server-dry-run") from None
            raise _views_error(exc, namespace, None if resource_version is None else name) \
                from None
        except urllib3.exceptions.HTTPError as exc:
            raise ApiUnreachable(f"API server unreachable: {_one_line(exc)}") from None
        return None

    def secret_data(self, namespace: str, name: str) -> dict[str, str]:
        """A Secret's data, decoded (`dv diff` connects to the sink as the operator does)."""
        found = self._secret(namespace, name, "comparing indexes needs get on that Secret")
        if found is None:
            raise ViewsError(f"the sink Secret {namespace}/{name} does not exist")
        return found[0]

    def labelled_secret(self, namespace: str, name: str
                        ) -> tuple[dict[str, str], dict[str, str]] | None:
        """A Secret's data, decoded, and its labels (`dv plan` judges them by the tenancy
        policy before connecting with it); None when there is no such Secret."""
        return self._secret(namespace, name, "it needs get on Secrets")

    def _secret(self, namespace: str, name: str, needs: str
                ) -> tuple[dict[str, str], dict[str, str]] | None:
        try:
            secret = client.CoreV1Api(self.custom.api_client).read_namespaced_secret(
                name, namespace, _request_timeout=_REQUEST_TIMEOUT_SECONDS)
        except ApiException as exc:
            if exc.status == 404:
                return None
            if exc.status == 403:
                raise ViewsError(f"reading the Secret {namespace}/{name} is forbidden: "
                                 f"{needs}") from None
            raise _views_error(exc, namespace, None) from None
        except urllib3.exceptions.HTTPError as exc:
            raise ApiUnreachable(f"API server unreachable: {_one_line(exc)}") from None
        data = {k: base64.b64decode(v).decode() for k, v in (secret.data or {}).items()}
        return data, dict(secret.metadata.labels or {})

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
            raise _views_error(exc, namespace, name) from None
        except urllib3.exceptions.HTTPError as exc:
            raise ApiUnreachable(f"API server unreachable: {_one_line(exc)}") from None


def _views_error(exc: ApiException, namespace: str | None, name: str | None) -> ViewsError:
    if exc.status == 404 and name is not None:
        return ViewNotFound(f"DerivedView {namespace}/{name} not found")
    if exc.status == 404:
        return ViewsError("the DerivedView API is not served: is the CRD installed?")
    if exc.status == 409:
        return Conflict(f"DerivedView {namespace}/{name} changed meanwhile; "
                        "run the command again")
    return ViewsError(f"API server answered {exc.status} {exc.reason}: "
                      f"{_one_line(exc.body or '')[:300]}")


def _refusal(exc: ApiException) -> tuple[str, str] | None:
    """What the API server said when it refused the object itself (422 Invalid, 400, or an
    admission policy's or webhook's denial), not the caller's rights or its reachability."""
    try:
        status = json.loads(exc.body or "{}")
    except ValueError:
        status = {}
    status = status if isinstance(status, dict) else {}
    message = _one_line(status.get("message") or exc.reason or "")
    denied = exc.status == 403 and "admission" in message.lower()
    if exc.status in (400, 422) or denied:
        return str(status.get("reason") or exc.reason or exc.status), message
    return None


def _one_line(value: object) -> str:
    return " ".join(str(value).split())
