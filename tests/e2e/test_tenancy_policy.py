"""The operator enforces the tenancy policy itself, on a cluster without the chart's admission policy.

The operator runs with the default (strict) policy. Every attempt of the
catalogue (tests/tenancy_attempts.py) is applied straight to the API server,
as on a cluster where the ValidatingAdmissionPolicy is not installed: each must
end Stalled with the policy's reason and words, and no SparkApplication may
exist for any. A view naming a Secret its owner has not labelled for views, or
one that does not exist, is refused the same way; once the owner labels it, the
view replays and serves
with a producer writing, equal to the test's own recomputation. Outcomes go to
`.stack/results/tenancy_operator.json` (docs/security.md).
"""

from __future__ import annotations

import copy
import json
import time
import uuid
from pathlib import Path
from typing import Any

from kubernetes import client

from dvstack.testing import replay
from dvstack.testing.traffic import LiveProducer
from dvstack.testing.waiting import wait_for
from support.corpora.tenancy_attempts import ADMISSION, MISSING_SECRET, SQL, Attempt
from support.e2e.views import G, P, V, ViewHandle, wait_alias_equals

COLUMNS = ["orders", "revenue"]
SECRET_LABEL = "derivedviews.io/view-secret"


def _body(attempt: Attempt, name: str, bootstrap: str, topic: str) -> dict[str, Any]:
    body = attempt.body(name)
    spec = body["spec"]
    spec["source"] = {"kafka": {"bootstrapServers": bootstrap}, "topics": [topic],
                      "schema": replay.ORDER_SCHEMA, **(attempt.source or {})}
    spec["sink"] = {"postgres": {"secretRef": {"name": "views-db"},
                                 "table": f"{name.replace('-', '_')}_{uuid.uuid4().hex[:6]}"},
                    "primaryKey": ["customer_id"]}
    if attempt.transform is None:
        spec["transform"] = {"sql": replay.ORDERS_BY_CUSTOMER_SQL}
    return body


def test_the_operator_refuses_every_attempt_before_any_job_and_a_labelled_secret_serves(
        stack: Any, kube_api_client: Any, namespace: str, operator_process: Path) -> None:
    core, custom = client.CoreV1Api(kube_api_client), client.CustomObjectsApi(kube_api_client)
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    replay.create_topic(stack.kafka_bootstrap, topic, 2)
    replay.produce(stack.kafka_bootstrap, topic, replay.make_orders(500, seed=5))
    replay.ensure_namespace_and_sink_secret(core, namespace, "views-db", stack.pg)
    unlabelled = copy.deepcopy(replay.sink_secret("team-db", stack.pg))
    unlabelled["metadata"].pop("labels")
    core.create_namespaced_secret(namespace, unlabelled)

    attempts: dict[str, tuple[str, str, str]] = {}  # view -> (what, reason, expected words)
    applied: dict[str, float] = {}
    for i, attempt in enumerate(ADMISSION):
        name = f"adm-{i}"
        custom.create_namespaced_custom_object(
            G, V, namespace, P, _body(attempt, name, stack.kafka_bootstrap, topic))
        attempts[name] = (attempt.what, "PolicyViolation", attempt.expected)
        applied[name] = time.monotonic()
    for i, (what, sql, expected) in enumerate(SQL):
        name = f"sql-{i}"
        custom.create_namespaced_custom_object(G, V, namespace, P, _body(
            Attempt(what, transform={"sql": sql}), name, stack.kafka_bootstrap, topic))
        attempts[name] = (what, "PolicyViolation", expected)
        applied[name] = time.monotonic()
    secret_view = _body(Attempt("a Secret not labelled for views"), "secret",
                        stack.kafka_bootstrap, topic)
    secret_view["spec"]["sink"]["postgres"]["secretRef"]["name"] = "team-db"
    table = secret_view["spec"]["sink"]["postgres"]["table"]
    custom.create_namespaced_custom_object(G, V, namespace, P, secret_view)
    attempts["secret"] = ("a Secret not labelled for views", "SecretNotLabelled",
                          f"secret {namespace}/team-db is not labelled {SECRET_LABEL}=true")
    applied["secret"] = time.monotonic()
    missing = _body(MISSING_SECRET, "missing", stack.kafka_bootstrap, topic)
    missing["spec"]["sink"]["postgres"]["secretRef"]["name"] = "never-created"
    custom.create_namespaced_custom_object(G, V, namespace, P, missing)
    attempts["missing"] = (MISSING_SECRET.what, "SecretMissing",
                           f"secret {namespace}/never-created {MISSING_SECRET.expected}")
    applied["missing"] = time.monotonic()

    handles = {name: ViewHandle(custom, namespace, name) for name in attempts}
    seconds: dict[str, float] = {}

    def all_stalled() -> bool:
        for name, handle in handles.items():
            if name not in seconds and (
                    handle.condition("Stalled").get("reason") == attempts[name][1]):
                seconds[name] = round(time.monotonic() - applied[name], 2)
        return len(seconds) == len(attempts)

    wait_for(all_stalled, timeout=180, interval=0.5,
             what="every attempt to end Stalled with the policy's reason",
             on_timeout=lambda: str({n: h.condition("Stalled") for n, h in handles.items()
                                     if n not in seconds}))
    outcomes = []
    for name, handle in handles.items():
        stalled = handle.condition("Stalled")
        what, _reason, expected = attempts[name]
        assert expected in stalled["message"], (name, stalled)
        assert "no job" in stalled["message"], (name, stalled)
        outcomes.append({"attempt": what, "reason": stalled["reason"],
                         "message": stalled["message"], "seconds": seconds[name]})
    apps = custom.list_namespaced_custom_object(
        "sparkoperator.k8s.io", "v1beta2", namespace, "sparkapplications")["items"]
    assert apps == [], [a["metadata"]["name"] for a in apps]
    results = Path(stack.state_dir) / "results"
    results.mkdir(exist_ok=True)
    (results / "tenancy_operator.json").write_text(json.dumps(outcomes, indent=2))
    for name in attempts:
        if name != "secret":
            custom.delete_namespaced_custom_object(G, V, namespace, P, name)

    # The Secret's owner consents: the view replays and serves, under live traffic.
    view = handles["secret"]
    live = LiveProducer(stack.kafka_bootstrap, topic, rate=20).start()
    try:
        core.patch_namespaced_secret("team-db", namespace,
                                     {"metadata": {"labels": {SECRET_LABEL: "true"}}})
        view.wait_serving_new(None, "the view to serve once its Secret is labelled",
                              timeout=900)
    finally:
        events = live.stop()
    assert not live.failures, live.failures
    wait_alias_equals(stack.pg_dsn, table, replay.make_orders(500, seed=5) + events, COLUMNS,
                      "the alias to equal the test's recomputation of every order")
    custom.delete_namespaced_custom_object(G, V, namespace, P, "secret")
    wait_for(lambda: all(h.gone() for h in handles.values()), timeout=180, interval=1,
             what="the views to be deleted")
