"""Argo CD's own health test format: health_test.yaml beside health.lua, inputs in testdata/.

Argo CD runs these for every resource customization it ships
(resource_customizations/<group>/<kind>/health_test.yaml: each test names an input object
and the health status and message it must get). The inputs are objects the operator wrote
on the local stack (tests/e2e/test_argocd_health_live.py captures them); the expectations
are written by hand. Run here under Lua 5.1, the language of Argo CD's gopher-lua.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from support.argocd_lua import CUSTOMIZATION, health

SPEC = yaml.safe_load((CUSTOMIZATION / "health_test.yaml").read_text())
TESTS: list[dict[str, Any]] = SPEC["tests"]


def test_every_testdata_object_is_tested() -> None:
    named = {t["inputPath"] for t in TESTS}
    present = {f"testdata/{p.name}" for p in (CUSTOMIZATION / "testdata").glob("*.yaml")}
    assert named == present


def test_every_health_status_the_script_can_give_is_covered() -> None:
    assert {t["healthStatus"]["status"] for t in TESTS} == {
        "Healthy", "Progressing", "Degraded", "Suspended"}


@pytest.mark.parametrize("case", TESTS, ids=[t["inputPath"] for t in TESTS])
def test_health(case: dict[str, Any]) -> None:
    obj = yaml.safe_load((CUSTOMIZATION / case["inputPath"]).read_text())
    status, message = health(obj)
    assert {"status": status, "message": message} == case["healthStatus"]
