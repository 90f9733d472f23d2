"""Mistakes in a view's SQL or schema are refused within seconds of the apply, before any job.

The operator runs as its own process against the local stack. Once it has handled a
first view, several broken views are created at once (as a team applying a directory
would); each must say Stalled with the reason and Spark's wording within one pass, and
no SparkApplication may be created for any of them. The seconds from apply to the Stalled reason go to
`.stack/results/sql_checked_first.json`.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

from kubernetes import client

from dvstack.testing import replay
from dvstack.testing.waiting import wait_for
from support.e2e.views import G, P, V, ViewHandle

GOOD_SQL = "SELECT customer_id, count(*) AS orders FROM events GROUP BY customer_id"
BROKEN: dict[str, tuple[str, str, str, str]] = {
    # name: (schema, sql, reason, what the message must say)
    "syntax": (replay.ORDER_SCHEMA, "SELEC customer_id FROM events GROUP BY customer_id",
               "InvalidTransform", "[PARSE_SYNTAX_ERROR] Syntax error at or near"),
    "column": (replay.ORDER_SCHEMA,
               "SELECT customer_id, sum(amout) AS revenue FROM events GROUP BY customer_id",
               "InvalidTransform", "`amout` cannot be resolved. Did you mean one of the "
                                   "following? [`amount`"),
    "key": (replay.ORDER_SCHEMA, "SELECT order_id, amount FROM events",
            "InvalidTransform", "sink.primaryKey: customer_id not in the transform's output"),
    "table": (replay.ORDER_SCHEMA, "SELECT customer_id FROM orders",
              "InvalidTransform", "[TABLE_OR_VIEW_NOT_FOUND]"),
    "schema": ("order_id STRING, customer_id STRNG, amount DOUBLE", GOOD_SQL,
               "InvalidSchema", '[UNSUPPORTED_DATATYPE] Unsupported data type "STRNG"'),
}
LIMIT_SECONDS = 15.0


def body(name: str, schema: str, sql: str, bootstrap: str, topic: str) -> dict[str, Any]:
    return {"apiVersion": f"{G}/{V}", "kind": "DerivedView",
            "metadata": {"name": name},
            "spec": {"source": {"kafka": {"bootstrapServers": bootstrap},
                                "topics": [topic], "schema": schema},
                     "transform": {"sql": sql},
                     "sink": {"postgres": {"secretRef": {"name": "views-db"},
                                           "table": f"{name}_{uuid.uuid4().hex[:6]}"},
                              "primaryKey": ["customer_id"]}}}


def test_broken_sql_and_schema_stall_within_seconds_without_a_job(
        stack: Any, kube_api_client: Any, namespace: str, operator_process: Path) -> None:
    core, custom = client.CoreV1Api(kube_api_client), client.CustomObjectsApi(kube_api_client)
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    replay.create_topic(stack.kafka_bootstrap, topic, 2)
    replay.ensure_namespace_and_sink_secret(core, namespace, "views-db", stack.pg)
    # Measure from a running operator, not its start-up: a canary (a topic that does not
    # exist, so no job either) must have been handled first.
    canary = ViewHandle(custom, namespace, "canary")
    custom.create_namespaced_custom_object(G, V, namespace, P, body(
        "canary", replay.ORDER_SCHEMA, GOOD_SQL, stack.kafka_bootstrap, f"absent-{topic}"))
    wait_for(lambda: canary.condition("Stalled").get("reason") == "TopicMissing", timeout=180,
             interval=0.5, what="the operator to handle a first view")
    handles = {name: ViewHandle(custom, namespace, name) for name in BROKEN}
    applied: dict[str, float] = {}
    for name, (schema, sql, _, _) in BROKEN.items():
        custom.create_namespaced_custom_object(
            G, V, namespace, P, body(name, schema, sql, stack.kafka_bootstrap, topic))
        applied[name] = time.monotonic()

    seconds: dict[str, float] = {}

    def all_stalled() -> bool:
        for name, handle in handles.items():
            if name not in seconds and handle.condition("Stalled").get("reason") == BROKEN[name][2]:
                seconds[name] = round(time.monotonic() - applied[name], 2)
        return len(seconds) == len(BROKEN)

    wait_for(all_stalled, timeout=LIMIT_SECONDS * 4, interval=0.1,
             what="every broken view to say Stalled with its reason")
    for name, handle in handles.items():
        stalled = handle.condition("Stalled")
        assert BROKEN[name][3] in stalled["message"], (name, stalled)
        assert "no job is started" in stalled["message"]
        assert handle.condition("Ready").get("status") == "False"
        assert handle.status().get("revisions", []) == []  # no revision recorded
    apps = custom.list_namespaced_custom_object(
        "sparkoperator.k8s.io", "v1beta2", namespace, "sparkapplications")["items"]
    assert apps == []
    wide = subprocess.run(["kubectl", "get", "dv", "-n", namespace, "-o", "wide"],
                          env={**os.environ, "KUBECONFIG": stack.kubeconfig},
                          capture_output=True, text=True, check=True, timeout=30).stdout
    results = Path(stack.state_dir) / "results"
    results.mkdir(exist_ok=True)
    (results / "sql_checked_first.json").write_text(json.dumps({
        "seconds_from_apply_to_stalled": seconds,
        "stalled_messages": {n: h.condition("Stalled")["message"] for n, h in handles.items()},
        "kubectl_get_dv_wide": wide}, indent=2))
    assert max(seconds.values()) < LIMIT_SECONDS, seconds
    # Fixing the SQL starts the job: the refusal was about the spec, not the view.
    handles["column"].patch({"spec": {"transform": {"sql": GOOD_SQL}}})
    wait_for(lambda: handles["column"].condition("Stalled").get("reason") != "InvalidTransform"
             and handles["column"].status().get("revisions"), timeout=30, interval=0.5,
             what="the fixed view to start its revision")
    for name in [*BROKEN, "canary"]:
        custom.delete_namespaced_custom_object(G, V, namespace, P, name)
    wait_for(lambda: all(h.gone() for h in [*handles.values(), canary]), timeout=120, interval=1,
             what="the views to be deleted")
