"""The local Kubernetes API behaves like a cluster where the operator relies on it."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from dvstack.testing.waiting import wait_for


def test_owner_reference_garbage_collection(kube_api_client: Any, namespace: str) -> None:
    """The controller manager deletes dependents of a deleted owner."""
    core = client.CoreV1Api(kube_api_client)
    owner = core.create_namespaced_config_map(namespace, {"metadata": {"name": "owner"}})
    core.create_namespaced_config_map(namespace, {"metadata": {
        "name": "dependent",
        "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
                             "uid": owner.metadata.uid}]}})
    core.delete_namespaced_config_map("owner", namespace)

    def gone() -> bool:
        try:
            core.read_namespaced_config_map("dependent", namespace)
        except ApiException as exc:
            return exc.status == 404
        return False

    wait_for(gone, timeout=60, what="the dependent ConfigMap to be garbage-collected")


def test_rbac_is_enforced_for_service_account_tokens(kube_api_client: Any,
                                                     namespace: str) -> None:
    """Tokens issued by the TokenRequest API authenticate, and RBAC limits them."""
    core = client.CoreV1Api(kube_api_client)
    rbac = client.RbacAuthorizationV1Api(kube_api_client)
    sa = f"reader-{uuid.uuid4().hex[:6]}"
    core.create_namespaced_service_account(namespace, {"metadata": {"name": sa}})
    token = core.create_namespaced_service_account_token(
        sa, namespace, {"spec": {"expirationSeconds": 600}}).status.token
    cfg = client.Configuration()
    cfg.host = kube_api_client.configuration.host
    cfg.ssl_ca_cert = kube_api_client.configuration.ssl_ca_cert
    cfg.api_key = {"authorization": f"Bearer {token}"}
    as_sa = client.CoreV1Api(client.ApiClient(cfg))

    with pytest.raises(ApiException) as denied:
        as_sa.list_namespaced_config_map(namespace)
    assert denied.value.status == 403

    rbac.create_namespaced_role(namespace, {"metadata": {"name": "cm-reader"}, "rules": [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]})
    rbac.create_namespaced_role_binding(namespace, {
        "metadata": {"name": "cm-reader"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": namespace}]})
    wait_for(lambda: as_sa.list_namespaced_config_map(namespace) is not None, timeout=30,
             what="the new RoleBinding to take effect")
    with pytest.raises(ApiException) as still_denied:
        as_sa.list_namespaced_secret(namespace)
    assert still_denied.value.status == 403
