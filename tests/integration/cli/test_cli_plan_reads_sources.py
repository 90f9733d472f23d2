"""`dv plan` reading what the operator reads before a job, against the local stack's API
server, Kafka and schema registry: the views' Secrets (missing, unlabelled, or not readable
with the CLI's credentials), the registry of an Avro view, and a new view's topic offsets."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from kubernetes import client

from derived_views.core.judges.tenancy import SECRET_LABEL
from dvstack.testing import replay
from support.cli_harness import OPERATOR, CliEnv, installed_operator, spec_v1


def plan(env: CliEnv, tmp: Path, spec: dict[str, Any], stack: Any = None
         ) -> tuple[int, dict[str, Any]]:
    """`dv plan -o json` of `spec` as the namespace's view `orders`, judged by the tests'
    operators' tenancy policy as installed (with `stack`, it lists the stack's Kafka and
    registry, which beside the real node are on the node's address)."""
    path = tmp / f"views-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(json.dumps({"apiVersion": "derivedviews.io/v1alpha1", "kind": "DerivedView",
                                "metadata": {"name": "orders", "namespace": env.namespace},
                                "spec": spec}))
    apps = client.AppsV1Api(env.admin)
    if not apps.list_namespaced_stateful_set(env.namespace).items:
        installed_operator(env.admin, env.namespace, stack.kafka_bootstrap if stack else
                           spec["source"]["kafka"]["bootstrapServers"], reader="dv-cli")
    done = env.dv("plan", "-f", str(path), "-o", "json", "--operator-namespace", env.namespace,
                  "--operator-name", OPERATOR)
    assert done.returncode in (0, 1, 2) and done.stdout, done.stderr
    return done.returncode, json.loads(done.stdout)["views"][0]


def grant_secrets(env: CliEnv) -> None:
    rbac = client.RbacAuthorizationV1Api(env.admin)
    name = f"dv-cli-secrets-{uuid.uuid4().hex[:6]}"
    rbac.create_namespaced_role(env.namespace, {"metadata": {"name": name}, "rules": [
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]}]})
    rbac.create_namespaced_role_binding(env.namespace, {
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": "dv-cli", "namespace": env.namespace}]})


def secret(env: CliEnv, name: str, data: dict[str, str], *, labelled: bool) -> None:
    core = client.CoreV1Api(env.admin)
    labels = {SECRET_LABEL: "true"} if labelled else {}
    try:
        core.delete_namespaced_secret(name, env.namespace)
    except client.exceptions.ApiException as exc:
        if exc.status != 404:
            raise
    core.create_namespaced_secret(env.namespace, {
        "metadata": {"name": name, "labels": labels}, "stringData": data})


def kafka_spec(stack: Any, topic: str) -> dict[str, Any]:
    spec = spec_v1()
    spec["source"]["kafka"]["bootstrapServers"] = stack.kafka_bootstrap
    spec["source"]["topics"] = [topic]
    return spec


def test_secrets_missing_unlabelled_or_unreadable(cli_env: CliEnv, tmp_path: Path,
                                                  stack: Any) -> None:
    topic = f"plan-{uuid.uuid4().hex[:8]}"
    replay.create_topic(stack.kafka_bootstrap, topic, 1)
    spec = kafka_spec(stack, topic)
    code, view = plan(cli_env, tmp_path, spec, stack)  # the account may not read Secrets yet
    assert (code, view["refused"]) == (2, False), view
    assert any(f"reading secret {cli_env.namespace}/views-db is forbidden (HTTP 403): grant get "
               f"on secrets in namespace {cli_env.namespace}" in said
               for said in view["notJudged"]), view["notJudged"]
    grant_secrets(cli_env)
    code, view = plan(cli_env, tmp_path, spec, stack)
    assert code == 1
    assert [r["reason"] for r in view["refusals"]] == ["SecretMissing"], view["refusals"]
    assert view["refusals"][0]["message"].startswith(
        f"secret {cli_env.namespace}/views-db not found")
    secret(cli_env, "views-db", {"host": "x"}, labelled=False)
    code, view = plan(cli_env, tmp_path, spec, stack)
    assert [r["reason"] for r in view["refusals"]] == ["SecretNotLabelled"], view["refusals"]
    secret(cli_env, "views-db", {"host": "x"}, labelled=True)
    code, view = plan(cli_env, tmp_path, spec, stack)
    assert (code, view["refusals"]) == (2, [])


def test_a_new_views_replay_reads_its_topics_offsets(cli_env: CliEnv, tmp_path: Path,
                                                     stack: Any) -> None:
    topic = f"plan-{uuid.uuid4().hex[:8]}"
    replay.create_topic(stack.kafka_bootstrap, topic, 3)
    replay.produce(stack.kafka_bootstrap, topic, replay.make_orders(30, seed=5))
    spec = kafka_spec(stack, topic)
    _, view = plan(cli_env, tmp_path, spec, stack)
    cost = view["cost"]
    assert cost["fromLog"] is True, view
    assert cost["records"] == 30  # the test wrote 30 records, over its three partitions
    assert sorted(p["partition"] for p in cost["partitions"]) == [f"{topic}/{p}" for p in range(3)]
    assert all(p["holdsBeginning"] is True and p["firstOffset"] == 0 for p in cost["partitions"])
    fullest = max(cost["partitions"], key=lambda p: p["endOffset"])
    partition = int(fullest["partition"].rsplit("/", 1)[1])
    replay.delete_records_before(stack.kafka_bootstrap, topic, {partition: 1})
    _, view = plan(cli_env, tmp_path, spec, stack)
    cost = view["cost"]
    assert cost["records"] == 29
    [lost] = [p for p in cost["partitions"] if p["holdsBeginning"] is False]
    assert (lost["partition"], lost["firstOffset"]) == (fullest["partition"], 1)
    assert cost["held"].startswith("the log no longer holds offset 0: at least "
                                   f"{fullest['partition']} (1 record) were deleted")


def test_an_unreachable_cluster_falls_back_and_says_why(cli_env: CliEnv, tmp_path: Path) -> None:
    code, view = plan(cli_env, tmp_path, spec_v1())  # 127.0.0.1:9: nothing listens there
    assert (code, view["refused"], view["cost"]["fromLog"]) == (2, False, False), view
    assert any(said.startswith("the source log (records per partition, whether it holds its "
                               "beginning): not read (") for said in view["notJudged"]), view


def test_the_registry_of_an_avro_view(cli_env: CliEnv, tmp_path: Path, stack: Any) -> None:
    grant_secrets(cli_env)
    secret(cli_env, "views-db", {"host": "x"}, labelled=True)
    spec = spec_v1()
    subject = f"plan-{uuid.uuid4().hex[:8]}-value"
    spec["source"] = {**spec["source"], "format": "avro", "avro": {
        "registry": {"secretRef": {"name": "registry"}},
        "readerSchema": {"subject": subject, "version": 1}}}
    spec["source"].pop("schema")
    secret(cli_env, "registry", {"url": "http://registry.example:8081/apis/ccompat/v7"},
           labelled=True)
    _, view = plan(cli_env, tmp_path, spec, stack)
    [refusal] = view["refusals"]
    assert refusal["reason"] == "PolicyViolation"
    assert refusal["message"].startswith("schema registry registry.example:8081 (the registry "
                                         "Secret's url): refused by the tenancy policy")
    secret(cli_env, "registry", {"url": stack.schema_registry_url}, labelled=True)
    _, view = plan(cli_env, tmp_path, spec, stack)
    [refusal] = view["refusals"]
    assert refusal["reason"] == "ReaderSchemaNotFound", view["refusals"]
    assert subject in refusal["message"]
