"""Every hostile transform of the corpus is refused by the running operator before any job.

The operator runs as its own process against the local stack. All hostile views
of tests/hostile_transforms.py are applied at once (as a tenant trying them all
would); each must end Stalled with the corpus's reason and words, and no
SparkApplication may exist for any of them. A transform too long for the CRD's
schema (layer "admission") must be refused by the API server itself. The
outcomes (class, layer, reason, message) go to
`.stack/results/hostile_transforms.json`, from which docs/security.md's table is
made.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from dvstack.testing import replay
from dvstack.testing.waiting import wait_for
from support.corpora.hostile_transforms import HOSTILE, SCHEMA, Hostile
from support.e2e.views import G, P, V, ViewHandle


def body(name: str, sql: str, bootstrap: str, topic: str) -> dict[str, Any]:
    return {"apiVersion": f"{G}/{V}", "kind": "DerivedView", "metadata": {"name": name},
            "spec": {"source": {"kafka": {"bootstrapServers": bootstrap},
                                "topics": [topic], "schema": SCHEMA},
                     "transform": {"sql": sql},
                     "sink": {"postgres": {"secretRef": {"name": "views-db"},
                                           "table": f"{name.replace('-', '_')}_"
                                                    f"{uuid.uuid4().hex[:6]}"},
                              "primaryKey": ["order_id"]}}}


def test_every_hostile_transform_stalls_without_a_job(
        stack: Any, kube_api_client: Any, namespace: str, operator_process: Path) -> None:
    core, custom = client.CoreV1Api(kube_api_client), client.CustomObjectsApi(kube_api_client)
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    replay.create_topic(stack.kafka_bootstrap, topic, 2)
    replay.ensure_namespace_and_sink_secret(core, namespace, "views-db", stack.pg)

    outcomes: list[dict[str, Any]] = []
    applied: dict[str, tuple[Hostile, float]] = {}
    for i, hostile in enumerate(HOSTILE):
        name = f"hostile-{i}"
        try:
            custom.create_namespaced_custom_object(
                G, V, namespace, P, body(name, hostile.text, stack.kafka_bootstrap, topic))
        except ApiException as exc:
            assert hostile.layer == "admission", (hostile.what, exc.status, exc.body)
            assert exc.status == 422 and hostile.operator in str(exc.body), exc.body
            outcomes.append({"class": hostile.cls, "what": hostile.what,
                             "layer": "admission", "reason": "Invalid",
                             "message": json.loads(exc.body).get("message", "")[:500]})
            continue
        assert hostile.layer == "operator", f"{hostile.what}: the API server accepted it"
        applied[name] = (hostile, time.monotonic())

    handles = {name: ViewHandle(custom, namespace, name) for name in applied}
    seconds: dict[str, float] = {}

    def all_stalled() -> bool:
        for name, handle in handles.items():
            if name not in seconds and handle.condition("Stalled").get("reason") == (
                    applied[name][0].reason):
                seconds[name] = round(time.monotonic() - applied[name][1], 2)
        return len(seconds) == len(handles)

    wait_for(all_stalled, timeout=300, interval=1,
             what="every hostile view to end Stalled with the expected reason",
             on_timeout=lambda: str({applied[n][0].what: h.condition("Stalled")
                                     for n, h in handles.items() if n not in seconds}))
    for name, handle in handles.items():
        hostile = applied[name][0]
        stalled = handle.condition("Stalled")
        assert hostile.operator in stalled["message"], (hostile.what, stalled)
        outcomes.append({"class": hostile.cls, "what": hostile.what, "layer": hostile.layer,
                         "reason": stalled["reason"], "message": stalled["message"],
                         "seconds": seconds[name]})
    apps = custom.list_namespaced_custom_object(
        "sparkoperator.k8s.io", "v1beta2", namespace, "sparkapplications")["items"]
    assert apps == [], [a["metadata"]["name"] for a in apps]
    results = Path(stack.state_dir) / "results"
    results.mkdir(parents=True, exist_ok=True)
    (results / "hostile_transforms.json").write_text(json.dumps(outcomes, indent=2))

    for name in handles:
        custom.delete_namespaced_custom_object(G, V, namespace, P, name)
    wait_for(lambda: all(h.gone() for h in handles.values()), timeout=180, interval=1,
             what="the hostile views to be deleted")
