"""`Views.dry_run`: the API server's refusal of the object is an answer, its refusal of the
caller is an error saying what to do; a create for a new view, a replace of a live one."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from derived_views.adapters.kube.views import DryRunForbidden, Views

BODY = {"apiVersion": "derivedviews.io/v1alpha1", "kind": "DerivedView",
        "metadata": {"name": "orders", "namespace": "shop"}, "spec": {}}


class Custom:
    def __init__(self, status: int | None = None, answer: dict[str, Any] | None = None) -> None:
        self.status, self.answer = status, answer
        self.calls: list[tuple[str, str, dict[str, Any]]] = []

    def _maybe_fail(self) -> dict[str, Any]:
        if self.status is None:
            return {}
        exc = ApiException(status=self.status, reason="Refused")
        exc.body = json.dumps(self.answer or {})
        raise exc

    def create_namespaced_custom_object(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(("create", kwargs["dry_run"], args[4]["metadata"]))
        return self._maybe_fail()

    def replace_namespaced_custom_object(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(("replace", kwargs["dry_run"], args[5]["metadata"]))
        return self._maybe_fail()


def views(custom: Custom) -> Views:
    found = Views.__new__(Views)
    found.custom = custom
    return found


def test_a_new_view_is_created_and_a_live_one_replaced_at_its_version() -> None:
    custom = Custom()
    assert views(custom).dry_run("shop", BODY, None) is None
    assert views(custom).dry_run("shop", BODY, "7") is None
    assert custom.calls == [("create", "All", BODY["metadata"]),
                            ("replace", "All", {**BODY["metadata"], "resourceVersion": "7"})]


def test_an_invalid_object_is_the_servers_answer() -> None:
    said = {"reason": "Invalid", "message": 'DerivedView.derivedviews.io "orders" is invalid:\n'
                                            " spec.cutover: Invalid value"}
    assert views(Custom(422, said)).dry_run("shop", BODY, None) == (
        "Invalid", 'DerivedView.derivedviews.io "orders" is invalid: spec.cutover: Invalid value')


def test_an_admission_policys_denial_is_the_servers_answer() -> None:
    said = {"reason": "Forbidden", "message": "derivedviews.derivedviews.io \"orders\" is "
            "forbidden: ValidatingAdmissionPolicy 'dv-tenancy' denied request: no"}
    assert views(Custom(403, said)).dry_run("shop", BODY, None) == ("Forbidden",
                                                                    said["message"])


def test_a_caller_without_the_right_is_told_what_to_do() -> None:
    said = {"reason": "Forbidden", "message": "User cannot create resource derivedviews"}
    with pytest.raises(DryRunForbidden, match="pass --no-server-dry-run"):
        views(Custom(403, said)).dry_run("shop", BODY, None)
