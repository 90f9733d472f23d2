"""The lifecycle on OpenSearch, end to end, with a producer writing throughout: v1 serves
through the alias, v2 replays beside it and takes over while a reader searches the alias,
a rollback inside the window needs no replay, and deletion honours both policies.

After each step the documents behind the alias must equal the test's own recomputation
of every event produced, and a witness reading every customer's order count through the
alias must never see one go back, across the cutover and the rollback. Results (reader queries, errors, worst stall, gate -> switch) go
to `.stack/results/opensearch_lifecycle.json`.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

from kubernetes import client
from opensearchpy import NotFoundError, OpenSearch

from dvstack.testing import replay
from dvstack.testing.traffic import LiveProducer, SearchAliasReader, SearchMonotonicWitness
from dvstack.testing.waiting import wait_for
from support.e2e.operator import GATE_SECONDS
from support.e2e.views import G, P, V, ViewHandle, expected_rows, parse_time

SQL = {
    "v1": "SELECT customer_id, count(*) AS orders, sum(amount) AS revenue "
          "FROM events GROUP BY customer_id",
    "v2": "SELECT customer_id, count(*) AS orders, sum(amount) AS revenue, "
          "max(amount) AS biggest FROM events GROUP BY customer_id",
}
COLUMNS = {"v1": ["orders", "revenue"], "v2": ["orders", "revenue", "biggest"]}
RATE = 40
"""Events per second the producer writes during the whole lifecycle."""


def _documents(search: OpenSearch, alias: str, columns: list[str]) -> dict[str, tuple[Any, ...]]:
    """Every document the alias answers with, as the test's rows (a refresh first: the test
    compares all documents, not what the last refresh made visible)."""
    search.indices.refresh(index=alias)
    hits = search.search(index=alias, body={"size": 10_000, "query": {"match_all": {}}})
    return {h["_source"]["customer_id"]: tuple(round(float(h["_source"][c]), 6) for c in columns)
            for h in hits["hits"]["hits"]}


def _secret(core: Any, namespace: str, name: str, url: str) -> None:
    core.create_namespaced_secret(namespace, {
        "metadata": {"name": name, "labels": {"derivedviews.io/view-secret": "true"}},
        "stringData": {"url": url}})


def _view(namespace: str, name: str, topic: str, index: str, stack: Any, policy: str
          ) -> dict[str, Any]:
    return {
        "apiVersion": f"{G}/{V}", "kind": "DerivedView",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"source": {"kafka": {"bootstrapServers": stack.kafka_bootstrap},
                            "topics": [topic], "schema": replay.ORDER_SCHEMA},
                 "transform": {"sql": SQL["v1"]},
                 "sink": {"opensearch": {"secretRef": {"name": "search"}, "index": index},
                          "primaryKey": ["customer_id"]},
                 # The previous job stops at the cutover, so the rollback below restarts
                 # it from its checkpoint (the PostgreSQL lifecycle covers the default,
                 # a job that keeps following and a switch back at once).
                 # the gate's width is not under test here: on two loaded cores a batch
                 # (bulk, refresh) takes seconds, and the time since the last commit spans a
                 # trigger interval plus that, so the default 10 s gate flapped and each flap
                 # asked for a new check run
                 "cutover": {"stableForSeconds": 2, "maxLagSeconds": GATE_SECONDS,
                             "retainPreviousSeconds": 900, "keepPreviousRunningSeconds": 0,
                             "checks": {"rowCount": {"maxDifference": 0},
                                        "keySample": {"size": 200}}},
                 "spark": {"restartPolicy": {"type": "OnFailure", "onFailureRetries": 1,
                                             "onFailureRetryInterval": 1}},
                 "deletionPolicy": policy}}


def _ledger_batches(search: OpenSearch, revision: str) -> list[int]:
    search.indices.refresh(index="dv_ledger")
    hits = search.search(index="dv_ledger", body={
        "size": 10_000, "query": {"bool": {"filter": [{"term": {"revision": revision}},
                                                      {"exists": {"field": "batch_id"}}]}}})
    return sorted(int(h["_source"]["batch_id"]) for h in hits["hits"]["hits"])


def _index_uuid(search: OpenSearch, index: str) -> str | None:
    try:
        settings = search.indices.get_settings(index=index)
    except NotFoundError:
        return None
    return str(settings[index]["settings"]["index"]["uuid"])


def test_opensearch_lifecycle(stack: Any, kube_api_client: Any, namespace: str,
                              operator_process: Path) -> None:
    core, custom = client.CoreV1Api(kube_api_client), client.CustomObjectsApi(kube_api_client)
    search = OpenSearch(hosts=[stack.opensearch], timeout=60)
    topic, alias = f"os-{uuid.uuid4().hex[:8]}", f"orders-{uuid.uuid4().hex[:8]}"
    replay.create_topic(stack.kafka_bootstrap, topic, 3)
    events = replay.make_orders(20_000, seed=11)
    replay.produce(stack.kafka_bootstrap, topic, events)
    _secret(core, namespace, "search", stack.opensearch)
    custom.create_namespaced_custom_object(G, V, namespace, P,
                                           _view(namespace, "life", topic, alias, stack, "Delete"))
    view = ViewHandle(custom, namespace, "life")
    results: dict[str, Any] = {"rate_events_per_s": RATE}

    def equal_to_the_log(version: str) -> bool:
        return (_documents(search, alias, COLUMNS[version])
                == expected_rows(events, COLUMNS[version]))

    # 1. v1 replays the topic and serves through the alias.
    v1 = view.wait_serving_new(None, "v1 to replay and serve")
    v1_index = view.record(v1)["index"]
    assert search.indices.get_alias(name=alias) == {v1_index: {"aliases": {alias: {}}}}
    wait_for(lambda: equal_to_the_log("v1"), timeout=180, interval=1,
             what="the alias to hold every event (v1)")

    reader = SearchAliasReader(stack.opensearch, alias).start()
    # An order count only grows along the log: one read lower than an earlier one is the
    # alias going back in time, which neither the cutover nor the rollback may do.
    witness = SearchMonotonicWitness(stack.opensearch, alias, "customer_id", "orders").start()
    producer = LiveProducer(stack.kafka_bootstrap, topic, rate=RATE, seed=211).start()
    failures: list[str] = []
    try:
        # 2. migrate under traffic: v2 builds its own index beside v1; one _aliases request
        # switches; then the producer stops and v2 must hold every event.
        since = time.time()
        view.patch({"spec": {"transform": {"sql": SQL["v2"]}}})
        v2 = view.wait_serving_new(v1, "v2 to replay and take over")
        v2_index = view.record(v2)["index"]
        events += producer.stop()
        failures += producer.failures
        wait_for(lambda: equal_to_the_log("v2"), timeout=180, interval=1,
                 what="the alias to hold every event (v2)")
        last = migrated = view.status()["lastCutover"]
        gate = parse_time(last["gateHeldAt"]).timestamp()
        seen = reader.first_seen(v2_index, since)
        assert seen is not None, "the reader never got an answer from v2's index"
        results["migrate_v1_to_v2"] = {
            "gate_to_switch_pass_s": round(parse_time(last["switchedAt"]).timestamp() - gate, 3),
            "gate_to_reader_saw_s": round(seen - gate, 3)}
        assert view.phases()[v1] == "Retiring"
        v1_uuid = _index_uuid(search, v1_index)
        assert v1_uuid is not None  # kept for the rollback window

        # 3. rollback inside the window, under traffic: v1's own index serves again, resumed
        # from its checkpoint, not rebuilt; once the producer stops it holds every event.
        v1_batches = _ledger_batches(search, v1)
        producer = LiveProducer(stack.kafka_bootstrap, topic, rate=RATE, seed=212).start()
        since = time.time()
        view.patch({"spec": {"transform": {"sql": SQL["v1"]}}})
        assert view.wait_serving_new(v2, "the rollback to v1") == v1
        rolled_back = time.time()
        events += producer.stop()
        failures += producer.failures
        assert _index_uuid(search, v1_index) == v1_uuid
        wait_for(lambda: equal_to_the_log("v1"), timeout=180, interval=1,
                 what="the alias to hold every event after the rollback (v1)")
        new_batches = [b for b in _ledger_batches(search, v1) if b not in v1_batches]
        assert new_batches and min(new_batches) > max(v1_batches)  # resumed, not replayed
        assert reader.first_seen(v1_index, since) is not None
        results["rollback_v2_to_v1"] = {"apply_to_serving_s": round(rolled_back - since, 1),
                                        "new_batches_after_resume": len(new_batches)}
    finally:
        producer.stop()
        reader.stop()
        witness.stop()
    assert failures == []
    assert reader.errors == [], reader.errors[:3]
    assert witness.errors == [], witness.errors[:3]
    assert witness.history.reads > 50
    assert witness.history.regressions() == {}
    results["witness_reads"] = witness.history.reads
    results["cutover_staleness_seconds"] = {
        "v1_to_v2": migrated.get("stalenessSeconds"),
        "v2_to_v1": view.status()["lastCutover"].get("stalenessSeconds")}
    results["reader"] = {"queries": reader.queries, "errors": len(reader.errors),
                         "worst_stall_ms": round(reader.worst_stall * 1000, 1)}
    results["events"] = len(events)

    # 4. deletion with Delete: jobs stop, then the alias, every index and the ledger go.
    custom.delete_namespaced_custom_object(G, V, namespace, P, "life")
    wait_for(view.gone, timeout=180, interval=1, what="the view (Delete) to be deleted")
    assert not search.indices.exists_alias(name=alias)
    assert _index_uuid(search, v1_index) is None and _index_uuid(search, v2_index) is None
    assert _ledger_batches(search, v1) == [] and _ledger_batches(search, v2) == []

    # 5. deletion with Retain: the alias and the served index stay, with every document.
    kept_alias = f"{alias}-kept"
    custom.create_namespaced_custom_object(
        G, V, namespace, P, _view(namespace, "kept", topic, kept_alias, stack, "Retain"))
    kept = ViewHandle(custom, namespace, "kept")
    revision = kept.wait_serving_new(None, "the Retain view to serve")
    kept_index = kept.record(revision)["index"]
    everything = expected_rows(events, COLUMNS["v1"])
    wait_for(lambda: _documents(search, kept_alias, COLUMNS["v1"]) == everything, timeout=180,
             interval=1, what="the Retain view to hold every event")
    custom.delete_namespaced_custom_object(G, V, namespace, P, "kept")
    wait_for(kept.gone, timeout=180, interval=1, what="the view (Retain) to be deleted")
    wait_for(lambda: custom.list_namespaced_custom_object(
        "sparkoperator.k8s.io", "v1beta2", namespace, "sparkapplications")["items"] == [],
        timeout=120, interval=1, what="the views' jobs to be deleted")
    assert search.indices.get_alias(name=kept_alias) == {kept_index: {"aliases": {kept_alias: {}}}}
    assert _documents(search, kept_alias, COLUMNS["v1"]) == everything

    out = Path(stack.state_dir) / "results"
    out.mkdir(exist_ok=True)
    (out / "opensearch_lifecycle.json").write_text(json.dumps(results, indent=2))
