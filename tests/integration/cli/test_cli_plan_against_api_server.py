"""`dv plan`'s server-side dry run against the real API server of the local stack: what the
CRD's CEL rules and an admission policy refuse shows as a refusal, in the server's words,
and nothing is stored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kubernetes import client

from derived_views.api.spec import ROW_COUNT_MESSAGE
from support.cli_harness import CliEnv, G, P, V, spec_v1


def manifest(tmp: Path, namespace: str, spec: dict[str, Any]) -> Path:
    path = tmp / "views.yaml"
    path.write_text(json.dumps({"apiVersion": f"{G}/{V}", "kind": "DerivedView",
                                "metadata": {"name": "orders", "namespace": namespace},
                                "spec": spec}))
    return path


def stored(env: CliEnv) -> list[str]:
    found = client.CustomObjectsApi(env.admin).list_namespaced_custom_object(
        G, V, env.namespace, P)["items"]
    return [item["metadata"]["name"] for item in found]


def test_a_cel_rule_s_refusal_shows_in_the_server_s_words(cli_env: CliEnv,
                                                          tmp_path: Path) -> None:
    spec = spec_v1()
    spec["cutover"]["checks"] = {"rowCount": {}}  # the CRD's CEL: a bound is required
    done = cli_env.dv("plan", "-f", str(manifest(tmp_path, cli_env.namespace, spec)),
                      "-o", "json")
    assert done.returncode == 1, (done.stdout, done.stderr)
    view = json.loads(done.stdout)["views"][0]
    server = [r for r in view["refusals"] if r["reason"] == "Invalid"]
    assert server and ROW_COUNT_MESSAGE in server[0]["message"], view["refusals"]
    assert stored(cli_env) == []  # a dry run stores nothing


def test_an_admission_policy_s_denial_shows_too(cli_env: CliEnv, tmp_path: Path,
                                               stack: Any) -> None:
    """The namespace's policy admits only the test's account: the stack's admin is denied,
    and `dv plan` run with the admin's kubeconfig says so (the operator would never see it)."""
    path = manifest(tmp_path, cli_env.namespace, spec_v1())
    admin = CliEnv(cli_env.namespace, stack.kubeconfig, cli_env.admin, cli_env.admin)
    done = admin.dv("plan", "-f", str(path), "-o", "json")
    assert done.returncode == 1, (done.stdout, done.stderr)
    refusals = json.loads(done.stdout)["views"][0]["refusals"]
    assert any("reserved for the dv CLI integration tests" in r["message"] for r in refusals), \
        refusals
    # the account the policy admits: nothing refused, a new view that replays
    done = cli_env.dv("plan", "-f", str(path), "-o", "json")
    assert done.returncode == 2, (done.stdout, done.stderr)
    view = json.loads(done.stdout)["views"][0]
    assert (view["refused"], view["change"]["kind"]) == (False, "replay"), view
    assert stored(cli_env) == []
