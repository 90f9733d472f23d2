"""Fixtures for the `dv` CLI against the real API server of the local stack.

These tests stand in for the operator: they write a view's status themselves.
An operator watching all namespaces (a demo, an e2e run) would race them and
overwrite that status, so each test namespace is shielded by a
ValidatingAdmissionPolicy: only the test's own service account may update
DerivedViews there. The CLI runs with that account's token, through a
kubeconfig whose context names the test namespace, as a namespaced user would.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from dvstack.cli import apply_crds
from support.cli_harness import REPO, CliEnv, G, P, V, spec_v1, wait_for

CRD = REPO / "crds" / "derivedviews.io_derivedviews.yaml"
SHIELD_LABEL = "dv-cli-test/shield"
ACCOUNT = "dv-cli"


@pytest.fixture(scope="session")
def crd_installed(kube_api_client: Any) -> None:
    apply_crds(kube_api_client, [CRD])


@pytest.fixture(scope="session")
def shield(kube_api_client: Any, crd_installed: None) -> Iterator[str]:
    """A policy denying DerivedView creates and updates in labelled namespaces to all but
    ACCOUNT (creates too, so an admin dry-run create can probe that it is in force)."""
    adm = client.AdmissionregistrationV1Api(kube_api_client)
    session = uuid.uuid4().hex[:8]
    name = f"dv-cli-test-{session}"
    adm.create_validating_admission_policy({"metadata": {"name": name}, "spec": {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "namespaceSelector": {"matchLabels": {SHIELD_LABEL: session}},
            "resourceRules": [{"apiGroups": [G], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"],
                               "resources": [P, f"{P}/status"]}]},
        "validations": [{
            "expression": f'request.userInfo.username == "system:serviceaccount:" + '
                          f'request.namespace + ":{ACCOUNT}"',
            "message": "reserved for the dv CLI integration tests"}]}})
    adm.create_validating_admission_policy_binding({"metadata": {"name": name}, "spec": {
        "policyName": name, "validationActions": ["Deny"]}})
    try:
        yield session
    finally:
        adm.delete_validating_admission_policy_binding(name)
        adm.delete_validating_admission_policy(name)


def _shielded(admin: Any, namespace: str) -> bool:
    """True once the policy denies an admin's (dry-run) create in the namespace."""
    try:
        client.CustomObjectsApi(admin).create_namespaced_custom_object(
            G, V, namespace, P, {"apiVersion": f"{G}/{V}", "kind": "DerivedView",
                                 "metadata": {"name": "shield-probe"}, "spec": spec_v1()},
            dry_run="All")
    except ApiException as exc:
        if exc.status in (403, 422):
            return True
        raise
    return False


def _authorized(account: Any, namespace: str) -> bool:
    """True once the API server's authorizer, which reads Roles from a cache, lets the account
    create DerivedViews: a loaded server answered 403 to a create just after the binding."""
    review = client.AuthorizationV1Api(account).create_self_subject_access_review({
        "spec": {"resourceAttributes": {"namespace": namespace, "group": G, "resource": P,
                                        "verb": "create"}}})
    return bool(review.status.allowed)


@pytest.fixture()
def cli_env(stack: Any, kube_api_client: Any, shield: str, tmp_path: Path) -> Iterator[CliEnv]:
    core = client.CoreV1Api(kube_api_client)
    rbac = client.RbacAuthorizationV1Api(kube_api_client)
    namespace = f"t-cli-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": namespace, "labels": {SHIELD_LABEL: shield}}})
    try:
        core.create_namespaced_service_account(namespace, {"metadata": {"name": ACCOUNT}})
        rbac.create_namespaced_role(namespace, {"metadata": {"name": ACCOUNT}, "rules": [
            {"apiGroups": [G], "resources": [P],
             "verbs": ["get", "list", "watch", "create", "patch", "update", "delete"]},
            {"apiGroups": [G], "resources": [f"{P}/status"], "verbs": ["get", "patch", "update"]},
        ]})
        rbac.create_namespaced_role_binding(namespace, {
            "metadata": {"name": ACCOUNT},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ACCOUNT},
            "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": namespace}]})
        token = core.create_namespaced_service_account_token(
            ACCOUNT, namespace, {"spec": {"expirationSeconds": 3600}}).status.token
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(json.dumps(_kubeconfig(stack.kubeconfig, token, namespace)))
        as_account = config.new_client_from_config(config_file=str(kubeconfig))
        wait_for(lambda: _authorized(as_account, namespace), "the account's Role to apply")
        wait_for(lambda: _shielded(kube_api_client, namespace), "the admission policy")
        yield CliEnv(namespace, str(kubeconfig), as_account, kube_api_client)
    finally:
        core.delete_namespace(namespace)


def _kubeconfig(admin_kubeconfig: str, token: str, namespace: str) -> dict[str, Any]:
    admin = yaml.safe_load(Path(admin_kubeconfig).read_text())  # YAML or JSON
    cluster = admin["clusters"][0]
    return {"apiVersion": "v1", "kind": "Config", "clusters": [cluster],
            "users": [{"name": ACCOUNT, "user": {"token": token}}],
            "contexts": [{"name": "test", "context": {"cluster": cluster["name"], "user": ACCOUNT,
                                                      "namespace": namespace}}],
            "current-context": "test"}
