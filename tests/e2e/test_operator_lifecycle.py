"""The rest of a view's life, end to end: events keep flowing, migrate, roll back without a
replay, supersede a candidate, manual promotion, a broken transform, deletion with Retain,
and the name applied again (a new view) refused the alias the old one left.

One view walks through every step so each Spark job start is paid once.  After
each step the alias's rows must equal the test's own recomputation from the
events it produced.  One reader queries the alias through every cutover; it
must see no error.  Results (worst stall, gate-to-switch times) go to
`.stack/results/operator_lifecycle.json`.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
from kubernetes import client

from dvstack.testing import replay
from dvstack.testing.traffic import AliasReader, LiveProducer
from dvstack.testing.waiting import wait_for
from support.e2e.operator import GATE_SECONDS
from support.e2e.views import G, P, V, ViewHandle, alias_rows, expected_rows, parse_time

SQL = {
    "v1": "SELECT customer_id, count(*) AS orders, sum(amount) AS revenue "
          "FROM events GROUP BY customer_id",
    "v2": "SELECT customer_id, count(*) AS orders, sum(amount) AS revenue, "
          "max(amount) AS biggest FROM events GROUP BY customer_id",
    "v3": "SELECT customer_id, min(amount) AS smallest FROM events GROUP BY customer_id",
    "v4": "SELECT customer_id, count(*) AS orders, min(amount) AS smallest "
          "FROM events GROUP BY customer_id",
    # Refused by the operator before any job starts (core/judges/transform) ...
    "broken": "SELECT customer_id, no_such_column FROM events GROUP BY customer_id",
    # ... and one only Spark's analyzer can refuse (the operator does not type-check
    # expressions; an unknown function it refuses itself, by the allowlist): the job fails.
    "fails_in_spark": "SELECT customer_id, sum(array(amount)) AS x FROM events "
                      "GROUP BY customer_id",
}
COLUMNS = {"v1": ["orders", "revenue"], "v2": ["orders", "revenue", "biggest"],
           "v4": ["orders", "smallest"]}


def _table_oid(dsn: str, table: str) -> int | None:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT to_regclass(%s)::oid", (f'public."{table}"',)).fetchone()
    return None if row is None or row[0] is None else int(row[0])


def _alias_owner_uid(dsn: str, table: str) -> str | None:
    """The UID the alias VIEW's comment records as its owner's."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT obj_description(to_regclass(%s), 'pg_class')",
                           (f'public."{table}"',)).fetchone()
    if row is None or row[0] is None:
        return None
    uid: str = json.loads(row[0])["derivedviews.io/owner"]["uid"]
    return uid


def _ledger_batches(dsn: str, revision: str) -> list[int]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT batch_id FROM dv_ledger WHERE revision = %s ORDER BY 1",
                            (revision,)).fetchall()
    return [int(r[0]) for r in rows]


def _gate_held_for(record: dict[str, Any], seconds: float) -> bool:
    held = record.get("caughtUpSince")
    return held is not None and time.time() - parse_time(held).timestamp() >= seconds


def _switch_delay(view: ViewHandle, reader: AliasReader, column: str, since: float
                  ) -> dict[str, float]:
    """Gate satisfied (operator's record) -> switched (operator) and -> seen by the reader."""
    last = view.status()["lastCutover"]
    gate = parse_time(last["gateHeldAt"]).timestamp()
    switched = parse_time(last["switchedAt"]).timestamp()
    seen = reader.first_seen(column, since)
    assert seen is not None, f"the reader never saw column {column}"
    return {"gate_to_switch_pass_s": round(switched - gate, 3),
            "gate_to_reader_saw_s": round(seen - gate, 3)}


def test_view_lifecycle(stack: Any, kube_api_client: Any, namespace: str,
                        operator_process: Path) -> None:
    core, custom = client.CoreV1Api(kube_api_client), client.CustomObjectsApi(kube_api_client)
    topic, table = f"life-{uuid.uuid4().hex[:8]}", f"life_{uuid.uuid4().hex[:8]}"
    replay.create_topic(stack.kafka_bootstrap, topic, 3)
    events = replay.make_orders(20_000, seed=5)
    replay.produce(stack.kafka_bootstrap, topic, events)
    replay.ensure_namespace_and_sink_secret(core, namespace, "views-db", stack.pg)
    custom.create_namespaced_custom_object(G, V, namespace, P, {
        "apiVersion": f"{G}/{V}", "kind": "DerivedView",
        "metadata": {"name": "life", "namespace": namespace},
        "spec": {"source": {"kafka": {"bootstrapServers": stack.kafka_bootstrap},
                            "topics": [topic], "schema": replay.ORDER_SCHEMA},
                 "transform": {"sql": SQL["v1"]},
                 "sink": {"postgres": {"secretRef": {"name": "views-db"}, "table": table},
                          "primaryKey": ["customer_id"]},
                 # The previous job follows the log for a minute after each cutover: long
                 # enough for step 4's rollback, short enough not to crowd step 5's build.
                 "cutover": {"stableForSeconds": 2, "maxLagSeconds": GATE_SECONDS,
                             "retainPreviousSeconds": 900,
                             "keepPreviousRunningSeconds": 60},
                 "spark": {"restartPolicy": {"type": "OnFailure", "onFailureRetries": 1,
                                             "onFailureRetryInterval": 1}},
                 "deletionPolicy": "Retain"}})
    view = ViewHandle(custom, namespace, "life")
    results: dict[str, Any] = {"scenarios": {}}
    scenarios: dict[str, str] = results["scenarios"]

    def rows_equal(version: str) -> bool:
        return (alias_rows(stack.pg_dsn, table, COLUMNS[version])
                == expected_rows(events, COLUMNS[version]))

    # 1. first revision: backfill, Active, alias serves; exactly one finalizer.
    v1 = view.wait_serving_new(None, "v1 to replay and serve")
    wait_for(lambda: rows_equal("v1"), timeout=180, interval=1,
             what="the alias to hold every event (v1)")
    assert view.get()["metadata"]["finalizers"] == ["derivedviews.io/cleanup"]
    scenarios["apply v1 -> Active, alias serves"] = "PASS"

    reader = AliasReader(stack.pg_dsn, table).start()
    try:
        # 2. events keep flowing: the active index follows the log.
        more = replay.make_orders(5_000, seed=6)
        replay.produce(stack.kafka_bootstrap, topic, more)
        events += more
        wait_for(lambda: rows_equal("v1"), timeout=120, interval=1,
                 what="v1 to index the events produced after it went live")
        scenarios["events keep flowing into the active index"] = "PASS"

        # 3. migrate: v2 replays from genesis beside v1, lag falls, cutover.
        lags: list[int] = []

        def v2_serving() -> bool:
            candidate = view.status().get("candidate") or {}
            if (candidate.get("lag") or {}).get("messages") is not None:
                lags.append(candidate["lag"]["messages"])
            return view.active() not in (None, v1) and view.ready()

        since = time.time()
        view.patch({"spec": {"transform": {"sql": SQL["v2"]}}})
        wait_for(v2_serving, timeout=300, interval=0.5, what="v2 to replay and take over")
        v2 = view.active()
        assert v2 is not None
        wait_for(lambda: rows_equal("v2"), timeout=180, interval=1,
                 what="the alias to hold every event (v2)")
        assert lags and lags[-1] <= lags[0]
        results["migrate_v1_to_v2"] = _switch_delay(view, reader, "biggest", since)
        assert view.phases()[v1] == "Retiring"  # retained for rollback
        assert view.record(v1).get("followUntil")  # and its job keeps following the log
        assert [a for a in custom.list_namespaced_custom_object(
            "sparkoperator.k8s.io", "v1beta2", namespace, "sparkapplications")["items"]
            if a["metadata"]["labels"].get("derivedviews.io/revision") == v1]
        scenarios["migrate v1 -> v2 while v1 serves; v1's job keeps following"] = "PASS"

        # 4. rollback inside the window: v1's job never stopped, so readers switch back at
        # once: no job start, no replay.
        v1_record = view.record(v1)
        v1_oid = _table_oid(stack.pg_dsn, v1_record["index"])
        v1_batches = _ledger_batches(stack.pg_dsn, v1)
        live = LiveProducer(stack.kafka_bootstrap, topic, rate=100, seed=307).start()
        try:
            # Under steady traffic the retiring job holds its gate (its commit rate is
            # measured over 30 s, so right after an idle spell it may not yet).
            wait_for(lambda: _gate_held_for(view.record(v1), 3), timeout=120, interval=0.5,
                     what="v1's following job to hold its gate under traffic")
            since = time.time()
            view.patch({"spec": {"transform": {"sql": SQL["v1"]}}})
            assert view.wait_serving_new(v2, "the rollback to v1", timeout=60) == v1
            switched = parse_time(view.status()["lastCutover"]["switchedAt"]).timestamp()
        finally:
            events += live.stop()
        assert live.failures == []
        wait_for(lambda: rows_equal("v1"), timeout=180, interval=1,
                 what="the alias to hold every event (v1)")
        after = view.record(v1)
        assert after["checkpointLocation"] == v1_record["checkpointLocation"]
        assert after.get("build", 0) == v1_record.get("build", 0)
        assert _table_oid(stack.pg_dsn, after["index"]) == v1_oid  # same table, not rebuilt
        new_batches = [b for b in _ledger_batches(stack.pg_dsn, v1) if b not in v1_batches]
        assert all(b > max(v1_batches) for b in new_batches)  # continued, never restarted at 0
        seen = reader.first_seen("orders", since)
        assert seen is not None and reader.first_seen("biggest", seen) is None
        results["rollback_v2_to_v1"] = {"apply_to_switch_s": round(switched - since, 2),
                                        "apply_to_reader_saw_s": round(seen - since, 2),
                                        "new_batches_after_apply": len(new_batches)}
        scenarios["revert to v1 inside the window -> switched back without a restart"] = "PASS"

        # 5. supersede: v3 (manual mode, never promoted) is replaced by v4 mid-migration.
        view.patch({"spec": {"transform": {"sql": SQL["v3"]}, "cutover": {"mode": "manual"}}})
        wait_for(lambda: (view.status().get("candidate") or {}).get("phase")
                 in ("Backfilling", "CaughtUp"), timeout=180, interval=1,
                 what="v3 to start building")
        v3 = view.status()["candidate"]["revision"]
        v3_index = view.status()["candidate"]["index"]
        view.patch({"spec": {"transform": {"sql": SQL["v4"]}}})
        wait_for(lambda: view.phases().get(v3) == "Superseded"
                 and _table_oid(stack.pg_dsn, v3_index) is None,
                 timeout=120, interval=1, what="v3 to be superseded and its index dropped")
        assert view.active() == v1 and rows_equal("v1")
        scenarios["a change mid-migration supersedes the candidate"] = "PASS"

        # 6. manual promotion: v4 waits at the gate until promoted by annotation.
        wait_for(lambda: view.condition("Reconciling").get("reason") == "AwaitingPromotion",
                 timeout=300, interval=1, what="v4 to catch up and await promotion")
        v4 = view.status()["candidate"]["revision"]
        assert view.active() == v1
        since = time.time()
        view.patch({"metadata": {"annotations": {"derivedviews.io/promote": v4}}})
        assert view.wait_serving_new(v1, "v4 to be promoted") == v4
        wait_for(lambda: rows_equal("v4"), timeout=180, interval=1,
                 what="the alias to hold every event (v4)")
        results["promote_v1_to_v4"] = _switch_delay(view, reader, "smallest", since)
        scenarios["manual mode: cutover only after the promote annotation"] = "PASS"

        # 7. a broken transform: refused before any job starts, the active keeps serving.
        apps_before = {a["metadata"]["name"] for a in custom.list_namespaced_custom_object(
            "sparkoperator.k8s.io", "v1beta2", namespace, "sparkapplications")["items"]}
        view.patch({"spec": {"transform": {"sql": SQL["broken"]}}})
        wait_for(lambda: view.condition("Stalled").get("reason") == "InvalidTransform",
                 timeout=30, interval=0.5, what="the broken SQL to be refused (Stalled)")
        stalled = view.condition("Stalled")
        assert "`no_such_column` cannot be resolved" in stalled["message"]
        assert f"revision {v4} keeps serving" in stalled["message"]
        apps_after = {a["metadata"]["name"] for a in custom.list_namespaced_custom_object(
            "sparkoperator.k8s.io", "v1beta2", namespace, "sparkapplications")["items"]}
        assert apps_after <= apps_before  # no job for the refused revision
        assert view.active() == v4 and rows_equal("v4")
        # A mistake only Spark finds (a type mismatch): the job fails, Degraded.
        view.patch({"spec": {"transform": {"sql": SQL["fails_in_spark"]}}})
        wait_for(lambda: view.condition("Degraded").get("reason") == "JobFailed",
                 timeout=240, interval=1, what="the failing candidate to mark the view Degraded")
        degraded = view.condition("Degraded")
        assert "datatype_mismatch" in degraded["message"].lower()
        assert view.active() == v4 and rows_equal("v4")
        assert view.wait_events(core, "JobFailed")
        view.patch({"spec": {"transform": {"sql": SQL["v4"]}}})
        wait_for(lambda: view.ready() and view.condition("Degraded").get("status") == "False",
                 timeout=120, interval=1, what="reverting the broken change to clear Degraded")
        scenarios["broken transform -> refused (SQL) or Degraded (Spark) while the active "
                  "serves"] = "PASS"
    finally:
        reader.stop()
    assert reader.errors == []
    results["reader"] = {"queries": reader.queries, "errors": len(reader.errors),
                         "worst_stall_ms": round(reader.worst_stall * 1000, 1)}

    # 8. deletion with Retain: jobs stop, the alias and the served index stay.
    served_index = view.status()["active"]["index"]
    old_uid = view.get()["metadata"]["uid"]
    custom.delete_namespaced_custom_object(G, V, namespace, P, "life")
    wait_for(view.gone, timeout=120, interval=1, what="the view to be deleted")
    # Foreground deletion: each SparkApplication goes once its driver pod is gone
    wait_for(lambda: custom.list_namespaced_custom_object(
        "sparkoperator.k8s.io", "v1beta2", namespace, "sparkapplications")["items"] == [],
        timeout=120, interval=1, what="the view's jobs to be deleted")
    assert _table_oid(stack.pg_dsn, served_index) is not None
    assert rows_equal("v4")  # the alias still answers from the retained index
    scenarios["deletion with Retain keeps alias and index, stops jobs"] = "PASS"

    # 9. the name applied again with other SQL is a new view (a new UID): the alias the old
    # one left records that one's UID, so the new one is refused it, starts no job, and,
    # deleted (even with Delete), drops nothing (docs/security.md, "Ownership, not names").
    again = ViewHandle(custom, namespace, "life")
    custom.create_namespaced_custom_object(G, V, namespace, P, {
        "apiVersion": f"{G}/{V}", "kind": "DerivedView",
        "metadata": {"name": "life", "namespace": namespace},
        "spec": {"source": {"kafka": {"bootstrapServers": stack.kafka_bootstrap},
                            "topics": [topic], "schema": replay.ORDER_SCHEMA},
                 "transform": {"sql": SQL["v3"]},
                 "sink": {"postgres": {"secretRef": {"name": "views-db"}, "table": table},
                          "primaryKey": ["customer_id"]},
                 "deletionPolicy": "Delete"}})
    new_uid = again.get()["metadata"]["uid"]
    wait_for(lambda: again.condition("Stalled").get("reason") == "SinkTableClaimed",
             timeout=60, interval=0.5, what="the re-created view to be refused the alias",
             on_timeout=again.brief)
    claimed = again.condition("Stalled")["message"]
    assert f"belongs to DerivedView {namespace}/life (uid {old_uid})" in claimed
    assert new_uid in claimed and f"drop public.{table} and its indexes" in claimed
    assert custom.list_namespaced_custom_object(
        "sparkoperator.k8s.io", "v1beta2", namespace, "sparkapplications")["items"] == []
    assert _alias_owner_uid(stack.pg_dsn, table) == old_uid and rows_equal("v4")
    custom.delete_namespaced_custom_object(G, V, namespace, P, "life")
    wait_for(again.gone, timeout=60, interval=1, what="the re-created view to be deleted")
    assert _table_oid(stack.pg_dsn, served_index) is not None
    assert _alias_owner_uid(stack.pg_dsn, table) == old_uid and rows_equal("v4")
    scenarios["the name re-created with other SQL never takes the retained alias"] = "PASS"

    out = Path(stack.state_dir) / "results"
    out.mkdir(exist_ok=True)
    (out / "operator_lifecycle.json").write_text(json.dumps(results, indent=2))
