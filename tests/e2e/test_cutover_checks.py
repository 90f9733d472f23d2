"""Checks before the switch, end to end, with a producer writing and a reader on the alias.

v1 (balances per customer) serves. v2's SQL drops half the customers: it catches up, fails
the row-count parity check and is not promoted; v1 keeps serving and the view is Degraded
naming the check, what it found and what it needed (in `kubectl get dv`, `dv status` and the
status). Before all that, v1 is held by `cutover.minRows` one row above what its history
can give (Reconciling, BelowMinRows, Ready False) until the floor is lowered to the
customers the test counted in what it produced. v3 fixes the SQL, supersedes v2, passes and takes over. v4 makes balances negative:
the team's assertion `no-negative-balances` blocks it while v3 serves. The reader sees no
error throughout, and the alias equals the test's own recomputation of v3 over every event.
What people see, and the checks' durations, go to `.stack/results/cutover_checks.json`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from kubernetes import client

from dvstack.testing import replay
from dvstack.testing.traffic import AliasReader, LiveProducer
from dvstack.testing.waiting import wait_for
from support.e2e.operator import GATE_SECONDS
from support.e2e.views import G, P, V, ViewHandle, aggregate, alias_rows, parse_time

BALANCES = ("SELECT customer_id, count(*) AS orders, sum(amount) AS balance FROM events "
            "{where} GROUP BY customer_id")
V1_SQL = BALANCES.format(where="")
V2_SQL = BALANCES.format(where="WHERE customer_id < 'c-0250'")  # drops customers c-0250..
V3_SQL = ("SELECT customer_id, count(*) AS orders, sum(amount) AS balance, max(amount) AS "
          "biggest FROM events GROUP BY customer_id")
V4_SQL = ("SELECT customer_id, count(*) AS orders, sum(amount) - 100000 AS balance, "
          "max(amount) AS biggest FROM events GROUP BY customer_id")
CHECKS = {"rowCount": {"maxDifference": 0},
          "keySample": {"size": 200},
          "assertions": [{"name": "no-negative-balances",
                          "sql": "SELECT customer_id, balance FROM {index} WHERE balance < 0",
                          "timeoutSeconds": 10}],
          "intervalSeconds": 5}


def shell(stack: Any, *args: str) -> str:
    env = {**os.environ, "KUBECONFIG": stack.kubeconfig}
    return subprocess.run(list(args), env=env, capture_output=True, text=True, check=True,
                          timeout=60).stdout


def column(listing: str, name: str) -> str:
    """A column of `kubectl get` by its header's position (empty cells do not shift it)."""
    header, row = listing.splitlines()[:2]
    start = header.index(name)
    following = [header.index(h) for h in header.split() if header.index(h) > start]
    return row[start:min(following) if following else None].strip()


def failing_check(view: ViewHandle, revision: str, check: str) -> dict[str, Any] | None:
    status = view.status()
    candidate = status.get("candidate") or {}
    degraded = view.condition("Degraded")
    if candidate.get("revision") != revision or degraded.get("reason") != "CheckFailed":
        return None
    results = (candidate.get("checks") or {}).get("results", [])
    failed = [r for r in results if r["name"] == check and r["outcome"] == "Failed"]
    return failed[0] if failed else None


def test_checks_refuse_bad_candidates_while_the_active_serves(
        stack: Any, kube_api_client: Any, namespace: str, operator_process: Path) -> None:
    core, custom = client.CoreV1Api(kube_api_client), client.CustomObjectsApi(kube_api_client)
    topic, table = f"chk-{uuid.uuid4().hex[:8]}", f"chk_{uuid.uuid4().hex[:8]}"
    replay.create_topic(stack.kafka_bootstrap, topic, 3)
    history = replay.make_orders(20_000, seed=23)
    # history older than the gate: records younger than it may be missing from a serving
    # index, and on a quick machine v1 and v2 both came within it of the produce, served
    # empty, and v2 passed the row-count parity (0 = 0)
    replay.produce(stack.kafka_bootstrap, topic, history, age_seconds=3600)
    customers = {e["customer_id"] for e in history}  # v1's rows, by the test's own count
    replay.ensure_namespace_and_sink_secret(core, namespace, "views-db", stack.pg)
    custom.create_namespaced_custom_object(G, V, namespace, P, {
        "apiVersion": f"{G}/{V}", "kind": "DerivedView",
        "metadata": {"name": "balances", "namespace": namespace},
        "spec": {"source": {"kafka": {"bootstrapServers": stack.kafka_bootstrap},
                            "topics": [topic], "schema": replay.ORDER_SCHEMA},
                 "transform": {"sql": V1_SQL},
                 "sink": {"postgres": {"secretRef": {"name": "views-db"}, "table": table},
                          "primaryKey": ["customer_id"]},
                 # a wider gate than the default: see test_opensearch_lifecycle
                 "cutover": {"stableForSeconds": 2, "maxLagSeconds": GATE_SECONDS,
                             "retainPreviousSeconds": 5, "checks": CHECKS,
                             "minRows": len(customers) + 1}}})
    view = ViewHandle(custom, namespace, "balances")
    seen: dict[str, Any] = {}
    live = LiveProducer(stack.kafka_bootstrap, topic, rate=20).start()
    reader: AliasReader | None = None
    try:
        # the first revision's floor: caught up, but one row short of minRows, it is not served
        wait_for(lambda: view.condition("Reconciling").get("reason") == "BelowMinRows",
                 timeout=600, what="v1 to be held by cutover.minRows",
                 on_timeout=view.brief)
        held = view.condition("Reconciling")["message"]
        assert f"fewer than cutover.minRows {len(customers) + 1}" in held, held
        assert view.condition("Ready")["status"] == "False" and view.active() is None
        seen["min_rows_hold"] = held
        view.patch({"spec": {"cutover": {"minRows": len(customers)}}})
        v1 = view.wait_serving_new(None, "v1 to pass its assertion and serve", timeout=600)
        reader = AliasReader(stack.pg_dsn, table).start()

        # v2 drops half the customers: caught up, but the row counts differ
        view.patch({"spec": {"transform": {"sql": V2_SQL}}})
        wait_for(lambda: failing_check(view, view.status()["revision"], "rowCount") is not None,
                 timeout=600, interval=1, what="v2 to fail the row-count parity check")
        status = view.status()
        v2 = status["revision"]
        failed = failing_check(view, v2, "rowCount")
        assert failed is not None
        assert failed["observed"] == "250 rows (the active index: 500)", failed
        assert failed["expected"] == "500 ± 0 rows"
        assert view.active() == v1 and not view.ready()
        degraded = view.condition("Degraded")
        assert degraded["message"].startswith(
            f"revision {v2} is not promoted: check rowCount failed: 250 rows (the active "
            "index: 500), expected 500 ± 0 rows; check keySample failed: "), degraded
        assert f"revision {v1} keeps serving" in degraded["message"]
        listing = shell(stack, "kubectl", "get", "dv", "-n", namespace)
        assert column(listing, "CHECKS") == "rowCount failed +1", listing
        assert column(listing, "ACTIVE") == v1 and column(listing, "CANDIDATE") == v2
        detail = shell(stack, sys.executable, "-m", "derived_views.cli", "status", "balances",
                       "-n", namespace)
        assert "rowCount failed +1" in detail and "Cutover checks" in detail, detail
        assert "250 rows (the active index: 500)" in detail
        seen["v2"] = {"kubectl_get_dv": listing, "dv_status": detail, "degraded": degraded,
                      "candidate": status["candidate"]}
        # it stays refused on re-runs
        first = status["candidate"]["checks"]["checkedAt"]
        wait_for(lambda: ((view.status().get("candidate") or {}).get("checks") or {}).get(
            "checkedAt", first) != first, timeout=120, interval=1,
            what="v2's checks to be re-run")
        assert view.active() == v1 and failing_check(view, v2, "rowCount") is not None

        # v3 fixes the SQL: supersedes v2, passes, takes over
        view.patch({"spec": {"transform": {"sql": V3_SQL}}})
        v3 = view.wait_serving_new(v1, "v3 to pass its checks and take over", timeout=600)
        assert view.phases()[v2] == "Superseded"
        cut = view.status()["lastCutover"]
        v3_record = view.record(v3)
        seen["v3"] = {"last_cutover": cut, "checks": v3_record.get("checks"),
                      "gate_to_switch_seconds": (
                          _seconds(cut["switchedAt"]) - _seconds(cut["gateHeldAt"])),
                      "gate_to_checks_passed_seconds": (
                          _seconds(v3_record["checks"]["checkedAt"])
                          - _seconds(cut["gateHeldAt"]))}
        assert v3_record["checks"]["results"] and all(
            r["outcome"] == "Passed" for r in v3_record["checks"]["results"])

        # v4 makes every balance negative: the assertion blocks it
        view.patch({"spec": {"transform": {"sql": V4_SQL}}})
        wait_for(lambda: failing_check(view, view.status()["revision"],
                                       "no-negative-balances") is not None,
                 timeout=600, interval=1, what="v4 to fail no-negative-balances")
        v4 = view.status()["revision"]
        failed = failing_check(view, v4, "no-negative-balances")
        assert failed is not None and failed["observed"].startswith("500 row(s); first: (c-")
        assert failed["expected"] == "no rows"
        assert view.active() == v3
        seen["v4"] = {"kubectl_get_dv": shell(stack, "kubectl", "get", "dv", "-n", namespace),
                      "candidate": view.status()["candidate"],
                      "degraded": view.condition("Degraded")}
        assert column(seen["v4"]["kubectl_get_dv"], "CHECKS") == "no-negative-balances failed"
    finally:
        if reader is not None:
            reader.stop()
        events = live.stop()
    assert not live.failures, live.failures
    assert reader is not None and reader.errors == [], reader.errors if reader else None
    # v3 serves every event, as the test computes it
    expected = {c: (v["orders"], round(v["revenue"], 6), round(v["biggest"], 6))
                for c, v in aggregate(history + events).items()}
    wait_for(lambda: alias_rows(stack.pg_dsn, table, ["orders", "balance", "biggest"])
             == expected, timeout=180, interval=1, what="v3's alias to hold every event")
    seen["reader"] = {"queries": reader.queries, "errors": len(reader.errors),
                      "worst_stall_ms": round(reader.worst_stall * 1000, 1)}
    seen["live"] = {"events": len(events), "rate": round(live.achieved_rate(), 1)}
    results = Path(stack.state_dir) / "results"
    results.mkdir(parents=True, exist_ok=True)
    (results / "cutover_checks.json").write_text(json.dumps(seen, indent=2, default=str))


def _seconds(stamp: str) -> float:
    return parse_time(stamp).timestamp()
