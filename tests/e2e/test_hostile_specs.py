"""A hostile spec cannot wedge the shared operator: it ends Stalled with a bounded, clear
message, can still be updated, and is deleted cleanly.

The operator runs as its own process against the local stack, with a producer writing to
the views' topic throughout. 400 nested parentheses (within the SQL's size limit) once raised
RecursionError out of every pass, and a 32 K identifier overflowed the condition's message:
such a view could be neither updated nor deleted. No job starts for either, so no Spark is
needed. The messages and the seconds to Stalled and to gone go to
`.stack/results/hostile_specs.json`.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

from kubernetes import client

from dvstack.testing import replay
from dvstack.testing.traffic import LiveProducer
from dvstack.testing.waiting import wait_for
from support.e2e.views import G, P, V, ViewHandle

MESSAGE_LIMIT = 1024  # written out: the test's own expectation of a condition's length
DEEP_SQL = ("SELECT customer_id, " + "(" * 400 + "amount" + ")" * 400
            + " AS revenue FROM events")
WIDE_SQL = "SELECT customer_id, " + "x" * 32768 + " AS revenue FROM events"
TYPO_SQL = "SELECT customer_id, sum(amout) AS revenue FROM events GROUP BY customer_id"
REFUSED = ("SpecNotJudged", "InvalidTransform", "PolicyViolation")
"""Refused by the SQL check or the tenancy policy, which refuse what they cannot read, or,
should a parser raise anyway, by the pass's backstop (SpecNotJudged): Stalled before any
job either way."""


def _body(name: str, sql: str, bootstrap: str, topic: str) -> dict[str, Any]:
    return {"apiVersion": f"{G}/{V}", "kind": "DerivedView", "metadata": {"name": name},
            "spec": {"source": {"kafka": {"bootstrapServers": bootstrap}, "topics": [topic],
                                "schema": replay.ORDER_SCHEMA},
                     "transform": {"sql": sql},
                     "sink": {"postgres": {"secretRef": {"name": "views-db"},
                                           "table": f"{name}_{uuid.uuid4().hex[:6]}"},
                              "primaryKey": ["customer_id"]}}}


def _stalled_clearly(handle: ViewHandle) -> dict[str, Any]:
    stalled = handle.condition("Stalled")
    assert stalled.get("status") == "True" and stalled.get("reason") in REFUSED, stalled
    message = stalled["message"]
    assert 0 < len(message) <= MESSAGE_LIMIT, len(message)
    assert "Traceback" not in message and "\n" not in message
    if stalled["reason"] == "SpecNotJudged":
        assert "failed on this spec" in message and "fix the spec" in message, message
    assert handle.condition("Ready").get("status") == "False"
    assert handle.status().get("revisions", []) == []  # no revision, so no job
    return stalled


def _passes(log: Path, name: str) -> int:
    """The operator's SpecNotJudged lines for the view: one per pass that judged it."""
    text = log.read_text(errors="replace")
    return sum(1 for line in text.splitlines() if f"/{name}: SpecNotJudged:" in line)


def test_hostile_specs_stall_clearly_update_and_delete(
        stack: Any, kube_api_client: Any, namespace: str, operator_process: Path) -> None:
    core, custom = client.CoreV1Api(kube_api_client), client.CustomObjectsApi(kube_api_client)
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    replay.create_topic(stack.kafka_bootstrap, topic, 2)
    replay.ensure_namespace_and_sink_secret(core, namespace, "views-db", stack.pg)
    producer = LiveProducer(stack.kafka_bootstrap, topic, rate=20, seed=83).start()
    handles = {name: ViewHandle(custom, namespace, name) for name in ("deep", "wide")}
    figures: dict[str, Any] = {}
    try:
        started = time.monotonic()
        for name, sql in (("deep", DEEP_SQL), ("wide", WIDE_SQL)):
            assert len(sql) <= 65536  # within the CRD's limit: the API server accepts it
            custom.create_namespaced_custom_object(
                G, V, namespace, P, _body(name, sql, stack.kafka_bootstrap, topic))
        wait_for(lambda: all(h.condition("Stalled").get("reason") in REFUSED
                             for h in handles.values()),
                 timeout=120, interval=0.5, what="both hostile views to say Stalled")
        figures["seconds_to_stalled"] = round(time.monotonic() - started, 2)
        stalled = {name: _stalled_clearly(h) for name, h in handles.items()}
        figures["stalled"] = stalled

        # No status write per poll: later passes leave the stored view as it is.
        if stalled["deep"]["reason"] == "SpecNotJudged":
            seen = _passes(operator_process, "deep")
            before = handles["deep"].get()["metadata"]["resourceVersion"]
            wait_for(lambda: _passes(operator_process, "deep") >= seen + 3, timeout=60,
                     interval=0.5, what="three more passes of the deep view")
            after = handles["deep"].get()
            assert after["metadata"]["resourceVersion"] == before
            assert handles["deep"].condition("Stalled") == stalled["deep"]

        # It can still be updated: the next spec is judged on its own.
        handles["deep"].patch({"spec": {"transform": {"sql": TYPO_SQL}}})
        wait_for(lambda: "`amout` cannot be resolved"
                 in handles["deep"].condition("Stalled").get("message", ""),
                 timeout=60, interval=0.5, what="the updated view to be judged afresh")

        apps = custom.list_namespaced_custom_object(
            "sparkoperator.k8s.io", "v1beta2", namespace, "sparkapplications")["items"]
        assert apps == []
        # The wide view is deleted as it is (still unjudged), the deep one after its update.
        deleted = time.monotonic()
        for name in handles:
            custom.delete_namespaced_custom_object(G, V, namespace, P, name)
        wait_for(lambda: all(h.gone() for h in handles.values()), timeout=60, interval=0.5,
                 what="the hostile views to be deleted (their finalizer removed)")
        figures["seconds_to_gone"] = round(time.monotonic() - deleted, 2)
    finally:
        producer.stop()
        left = [name for name, handle in handles.items() if not handle.gone()]
        for name in left:  # a failed test must not leave views behind the operator
            custom.delete_namespaced_custom_object(G, V, namespace, P, name)
        if left:
            wait_for(lambda: all(handles[n].gone() for n in left), timeout=60, interval=0.5,
                     what="the test's views to be deleted before the operator stops")
    assert producer.failures == []
    results = Path(stack.state_dir) / "results"
    results.mkdir(exist_ok=True)
    (results / "hostile_specs.json").write_text(json.dumps(figures, indent=2))
    assert handles["wide"].wait_events(core, "Deleted", "LeftBehind")
