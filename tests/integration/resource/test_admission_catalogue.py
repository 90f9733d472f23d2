"""The admission catalogue: every invalid view of admission_catalogue.CASES is refused by the
real API server with the expected message, and docs/admission.md is exactly what it said."""

from __future__ import annotations

import copy
import json
import os
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from dvstack.cli import apply_crds
from support.corpora.admission_catalogue import CASES, VALID, Case, G, P, V, render
from support.paths import REPO

ROOT = REPO
CRD = ROOT / "crds" / "derivedviews.io_derivedviews.yaml"
DOC = ROOT / "docs" / "admission.md"
MINIMUM_CASES = 30


def _message(error: ApiException) -> str:
    """The Status message without the `DerivedView.derivedviews.io "<name>" is invalid: `
    prefix, which names the object rather than the problem."""
    try:
        message = str(json.loads(error.body)["message"])
    except (TypeError, ValueError, KeyError):
        message = str(error.body)
    _, found, rest = message.partition(" is invalid: ")
    return rest if found else message


def _refusal(api: client.CustomObjectsApi, namespace: str, number: int, case: Case
             ) -> tuple[int, str]:
    body = copy.deepcopy(VALID)
    body["metadata"]["name"] = f"bad-{number:02d}"
    if case.update:
        api.create_namespaced_custom_object(G, V, namespace, P, copy.deepcopy(body))
    case.mutate(body)
    try:
        if case.update:
            api.patch_namespaced_custom_object(G, V, namespace, P, body["metadata"]["name"],
                                               {"spec": body["spec"]},
                                               field_validation="Strict")
        else:
            api.create_namespaced_custom_object(G, V, namespace, P, body,
                                                field_validation="Strict")
    except ApiException as error:
        return error.status, _message(error)
    pytest.fail(f"case {number} ({case.what}) was accepted by the API server")


def test_every_catalogued_view_is_refused_and_the_doc_says_so(
        kube_api_client: Any, namespace: str) -> None:
    apply_crds(kube_api_client, [CRD])
    api = client.CustomObjectsApi(kube_api_client)
    api.create_namespaced_custom_object(G, V, namespace, P, copy.deepcopy(VALID),
                                        field_validation="Strict")  # the base is valid
    assert len({c.what for c in CASES}) == len(CASES) >= MINIMUM_CASES
    answers = []
    for number, case in enumerate(CASES, 1):
        code, message = _refusal(api, namespace, number, case)
        assert code in (400, 422), (case.what, code, message)
        assert case.expected in message, (case.what, message)
        answers.append((case, code, message))
    document = render(answers)
    if os.environ.get("DV_WRITE_DOCS") == "1":
        DOC.write_text(document)
    assert DOC.read_text() == document, "docs/admission.md is stale: run make admission-doc"
