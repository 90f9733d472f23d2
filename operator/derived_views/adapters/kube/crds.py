"""Read and server-side apply a CustomResourceDefinition."""

from __future__ import annotations

from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

FIELD_MANAGER = "derived-views-crds"
_TIMEOUT_SECONDS = 30


class Crds:
    def __init__(self, api_client: Any) -> None:
        self.api = client.ApiextensionsV1Api(api_client)
        self.api_client = api_client

    def get(self, name: str) -> dict[str, Any] | None:
        try:
            obj = self.api.read_custom_resource_definition(name, _request_timeout=_TIMEOUT_SECONDS)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        out: dict[str, Any] = self.api_client.sanitize_for_serialization(obj)
        return out

    def apply(self, crd: dict[str, Any]) -> None:
        """Server-side apply: fields other managers own (e.g. Helm's labels) are kept."""
        self.api.patch_custom_resource_definition(
            crd["metadata"]["name"], crd, field_manager=FIELD_MANAGER, force=True,
            _content_type="application/apply-patch+yaml", _request_timeout=_TIMEOUT_SECONDS)

    def create(self, crd: dict[str, Any]) -> None:
        self.api.create_custom_resource_definition(crd, field_manager=FIELD_MANAGER,
                                                   _request_timeout=_TIMEOUT_SECONDS)
