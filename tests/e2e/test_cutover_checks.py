"""Checks before the switch, end to end, with a producer writing and a reader on the alias.

v1 (balances per customer) serves. v2's SQL drops half the customers: it catches up, fails
the row-count parity check and is not promoted; v1 keeps serving and the view is Degraded
naming the check, what it found and what it needed (in `kubectl get dv`, `dv status` and the
status). Before all that, v1 is held by `cutover.minRows` one row above what its history
can give (Reconciling, BelowMinRows, Ready False) until the floor is lowered to the
customers the test counted in what it produced. v3 fixes the SQL but adds one to the
balances of 15 of the 500 customers (3 %): the `diff` check (at most 1 % of rows changed)
blocks it, naming the column and example keys, and `dv diff` says the same; raised to 5 % (a
change of checks alone: no replay) v3 passes and takes over. v4 makes balances negative:
the team's assertion `no-negative-balances` blocks it while v3 serves. The reader sees no
error throughout, and the alias equals the test's own recomputation of v3 over every event.

Before each apply, `dv plan` reads the manifests (the chart as `helm template` renders it,
then the view) and says what the apply will do; the test then checks the operator did just
that: a new view and a content change replay with the revision id it named, the minRows
and the diff changes are applied in place with no replay, and a view whose SQL reads a
column the source lacks is refused with the operator's own reason.
What people see, and the checks' durations, go to `.stack/results/cutover_checks.json`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from kubernetes import client

from dvstack.helm import helm_binary
from dvstack.settings import load
from dvstack.testing import replay
from dvstack.testing.traffic import AliasReader, LiveProducer
from dvstack.testing.waiting import wait_for
from support.cli_harness import OPERATOR, installed_operator
from support.e2e.operator import GATE_SECONDS
from support.e2e.views import G, P, V, ViewHandle, aggregate, alias_rows, parse_time
from support.paths import REPO

CHART = REPO / "charts" / "derived-views"

BALANCES = ("SELECT customer_id, count(*) AS orders, sum(amount) AS balance FROM events "
            "{where} GROUP BY customer_id")
V1_SQL = BALANCES.format(where="")
V2_SQL = BALANCES.format(where="WHERE customer_id < 'c-0250'")  # drops customers c-0250..
BUMPED = 15
"""v3 adds one to the balance of customers c-0000..c-0014: 3 % of the 500 rows differ."""
V3_SQL = ("SELECT customer_id, count(*) AS orders, sum(amount) + CASE WHEN customer_id < "
          f"'c-{BUMPED:04d}' THEN 1 ELSE 0 END AS balance, max(amount) AS biggest "
          "FROM events GROUP BY customer_id")
V4_SQL = ("SELECT customer_id, count(*) AS orders, sum(amount) - 100000 AS balance, "
          "max(amount) AS biggest FROM events GROUP BY customer_id")
CHECKS = {"rowCount": {"maxDifference": 0},
          "keySample": {"size": 200},
          "assertions": [{"name": "no-negative-balances",
                          "sql": "SELECT customer_id, balance FROM {index} WHERE balance < 0",
                          "timeoutSeconds": 10}],
          "intervalSeconds": 5}
DIFF_BLOCKS = {"maxChangedRows": "1%"}
DIFF_PASSES = {"maxChangedRows": "5%"}
REFUSED_SQL = "SELECT customer_id, colour FROM events"


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


def dv(stack: Any, *args: str) -> subprocess.CompletedProcess[str]:
    """The `dv` CLI as a user runs it (its exit code is the caller's to judge)."""
    return subprocess.run([sys.executable, "-m", "derived_views.cli", *args],
                          env={**os.environ, "KUBECONFIG": stack.kubeconfig},
                          capture_output=True, text=True, check=False, timeout=120)


def chart_manifests() -> str:
    """The chart as a GitOps pipeline renders it: the stream `dv plan` reads around the views."""
    done = subprocess.run([str(helm_binary(load())), "template", "dv", str(CHART),
                           "--namespace", "derived-views"],
                          capture_output=True, text=True, check=True, timeout=120)
    return done.stdout


def plan(stack: Any, tmp: Path, rendered: str, *views: dict[str, Any]
         ) -> tuple[int, dict[str, Any]]:
    """`dv plan -o json` over the rendered chart and `views`: its exit code and its answer.

    Without the server-side dry run: beside this test the chart's own integration tests
    install releases that watch the whole cluster, whose admission policy then judges views
    in every namespace for a while (tests/integration/cli holds the dry run to the API
    server); what is held here is what the operator's own functions say."""
    manifests = tmp / f"manifests-{uuid.uuid4().hex[:6]}.yaml"
    manifests.write_text(rendered + "".join(f"\n---\n{json.dumps(v)}\n" for v in views))
    namespace = views[0]["metadata"]["namespace"]
    done = dv(stack, "plan", "-f", str(manifests), "-o", "json", "--no-server-dry-run",
              "--operator-namespace", namespace, "--operator-name", OPERATOR)
    assert done.returncode in (0, 1, 2) and done.stdout, done.stderr
    answer = json.loads(done.stdout)
    assert answer["skipped"] > 0  # the chart's own objects are read past, not refused
    assert not any("tenancy policy was not read" in w for w in answer["warnings"]), answer
    return done.returncode, answer


def planned(answer: dict[str, Any], name: str) -> dict[str, Any]:
    return next(v for v in answer["views"] if v["name"] == name)


def with_spec(body: dict[str, Any], **cutover: Any) -> dict[str, Any]:
    """`body` with its cutover fields replaced (a manifest's next commit)."""
    spec = json.loads(json.dumps(body["spec"]))
    spec["cutover"].update(cutover)
    return {**body, "spec": spec}


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
        stack: Any, kube_api_client: Any, namespace: str, operator_process: Path,
        tmp_path: Path) -> None:
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
    body: dict[str, Any] = {
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
                             "minRows": len(customers) + 1}}}
    rendered = chart_manifests()
    installed_operator(kube_api_client, namespace, stack.kafka_bootstrap)
    seen: dict[str, Any] = {"plan": {}}
    # (a) a new view: planned as a replay, under the revision id the operator then gives it
    code, answer = plan(stack, tmp_path, rendered, body)
    first = planned(answer, "balances")
    assert (code, first["change"]["kind"], first["refused"]) == (2, "replay", False), \
        first["refusals"]
    # read from the log as the operator reads it: the 20,000 records the test wrote, whole
    assert first["cost"]["records"] == len(history), first["cost"]
    assert [p["firstOffset"] for p in first["cost"]["partitions"]] == [0, 0, 0], first["cost"]
    seen["plan"]["new_view"] = first
    custom.create_namespaced_custom_object(G, V, namespace, P, body)
    view = ViewHandle(custom, namespace, "balances")
    wait_for(lambda: view.status().get("revision") is not None, timeout=60, interval=0.5,
             what="the view's first revision")
    assert view.status()["revision"] == first["change"]["revision"]
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
        # (b) a settings change: in place, no replay
        body = with_spec(body, minRows=len(customers))
        code, answer = plan(stack, tmp_path, rendered, body)
        lowered = planned(answer, "balances")["change"]
        assert (code, lowered["kind"], lowered["fields"]) == (
            2, "settings", ["spec.cutover.minRows"]), answer
        seen["plan"]["settings"] = lowered
        view.patch({"spec": {"cutover": {"minRows": len(customers)}}})
        v1 = view.wait_serving_new(None, "v1 to pass its assertion and serve", timeout=600)
        assert v1 == first["change"]["revision"]  # the same revision: nothing replayed
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

        # (c) v3, a content change, with the diff check: planned as a replay beside v1
        body = with_spec({**body, "spec": {**body["spec"], "transform": {"sql": V3_SQL}}},
                         checks={**CHECKS, "diff": DIFF_BLOCKS})
        code, answer = plan(stack, tmp_path, rendered, body)
        content = planned(answer, "balances")["change"]
        assert (code, content["kind"], content["active"]) == (2, "replay", v1), answer
        assert any(line.startswith("+ spec.transform.sql:") for line in content["contentDiff"])
        seen["plan"]["content"] = content
        view.patch({"spec": {"transform": {"sql": V3_SQL},
                             "cutover": {"checks": {"diff": DIFF_BLOCKS}}}})
        wait_for(lambda: failing_check(view, content["revision"], "diff") is not None,
                 timeout=600, interval=1, what="v3 to be blocked by the diff check")
        v3 = content["revision"]
        diffed = failing_check(view, v3, "diff")
        assert diffed is not None
        # Only what the test's SQL bumped differs: keys the producer's events kept in flight
        # between the two jobs are left out (and may be bumped ones), never counted.
        differ = re.match(r"(\d+) of 500 rows differ \(row by row\): 0 only in the "
                          r"candidate, 0 only in the active, (\d+) changed \(e\.g\. ([^)]*)\)"
                          r"; by column: balance (\d+)", diffed["observed"])
        assert differ is not None, diffed
        changed = int(differ[1])
        assert 5 < changed <= BUMPED and int(differ[2]) == int(differ[4]) == changed, diffed
        assert all(k < f"c-{BUMPED:04d}" for k in differ[3].split(", ")), diffed
        assert view.active() == v1 and view.phases()[v2] == "Superseded"
        shown = dv(stack, "diff", "balances", "-n", namespace, "-o", "json")
        seen["v3_blocked"] = {"check": diffed, "dv_diff": shown.stdout or shown.stderr}
        assert shown.returncode == 2, (shown.stdout, shown.stderr)  # over the 1 %, as the check
        measured = json.loads(shown.stdout)
        assert measured["onlyInRevision"]["rows"] == measured["onlyInAgainst"]["rows"] == 0
        assert 5 < measured["changed"]["rows"] <= BUMPED, measured
        assert all(k < f"c-{BUMPED:04d}" for k in measured["changed"]["examples"]), measured
        # (d) the diff allowed 5 %: checks alone change, v3 passes without a replay
        body = with_spec(body, checks={**CHECKS, "diff": DIFF_PASSES})
        code, answer = plan(stack, tmp_path, rendered, body)
        relaxed = planned(answer, "balances")["change"]
        assert (code, relaxed["kind"], relaxed["revision"]) == (2, "checks", v3), answer
        seen["plan"]["checks"] = relaxed
        builds = view.record(v3).get("build")
        view.patch({"spec": {"cutover": {"checks": {"diff": DIFF_PASSES}}}})
        assert view.wait_serving_new(v1, "v3 to pass its checks and take over",
                                     timeout=600) == v3
        assert view.record(v3).get("build") == builds  # judged again, not rebuilt
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

        # (e) a view whose SQL reads a column the source lacks: refused, as the operator says
        refused_body = {**body, "metadata": {"name": "balances-refused", "namespace": namespace},
                        "spec": {**body["spec"], "transform": {"sql": REFUSED_SQL},
                                 "sink": {**body["spec"]["sink"],
                                          "postgres": {"secretRef": {"name": "views-db"},
                                                       "table": f"{table}_refused"}}}}
        code, answer = plan(stack, tmp_path, rendered, refused_body)
        refusal = planned(answer, "balances-refused")
        assert code == 1 and refusal["refused"], answer
        seen["plan"]["refused"] = refusal
        custom.create_namespaced_custom_object(G, V, namespace, P, refused_body)
        other = ViewHandle(custom, namespace, "balances-refused")
        wait_for(lambda: other.condition("Stalled").get("status") == "True", timeout=120,
                 interval=0.5, what="the operator to refuse the view")
        stalled = other.condition("Stalled")
        assert stalled["reason"] == refusal["refusals"][0]["reason"], (stalled, refusal)
        assert stalled["message"] == refusal["refusals"][0]["message"], (stalled, refusal)
        custom.delete_namespaced_custom_object(G, V, namespace, P, "balances-refused")
        wait_for(other.gone, timeout=60, interval=0.5, what="the refused view to be deleted")

        # v4 makes every balance negative: the assertion blocks it (the diff is dropped, so
        # the assertion is the one check that fails)
        view.patch({"spec": {"transform": {"sql": V4_SQL},
                             "cutover": {"checks": {"diff": None}}}})
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
    expected = {c: (v["orders"], round(v["revenue"] + (1 if c < f"c-{BUMPED:04d}" else 0), 6),
                    round(v["biggest"], 6))
                for c, v in aggregate(history + events).items()}
    wait_for(lambda: alias_rows(stack.pg_dsn, table, ["orders", "balance", "biggest"])
             == expected, timeout=180, interval=1, what="v3's alias to hold every event")
    seen["reader"] = {"queries": reader.queries, "errors": len(reader.errors),
                      "worst_stall_ms": round(reader.worst_stall * 1000, 1)}
    seen["live"] = {"events": len(events), "rate": round(live.achieved_rate(), 1)}
    results = Path(stack.state_dir) / "results"
    results.mkdir(parents=True, exist_ok=True)
    (results / "cutover_checks.json").write_text(json.dumps(seen, indent=2, default=str))
    # the operator stops with the test: its views go first, so their finalizers are run
    custom.delete_namespaced_custom_object(G, V, namespace, P, "balances")
    wait_for(view.gone, timeout=120, interval=0.5, what="the view to be deleted")


def _seconds(stamp: str) -> float:
    return parse_time(stamp).timestamp()
