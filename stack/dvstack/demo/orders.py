"""`make demo`: the product's promise on the local stack, in one command.

The operator runs (as its own process, as a user runs it); a producer writes order
events the whole time; DerivedView v1 is applied and replays the topic with progress;
then v2 (a new column) is applied while a reader queries the alias: the candidate
replays beside the live index, readers are switched atomically, v1 retires. The demo
prints the reader's error count and worst stall, and checks the index against its own
recomputation of every event it produced. The stack stays up (`make stack-down`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import psycopg
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from dvstack import cli
from dvstack.settings import Settings, load
from dvstack.testing import replay
from dvstack.testing.traffic import AliasReader, LiveProducer

_NAMESPACE = "demo"
_VIEW = "orders-by-customer"
G, V, P = "derivedviews.io", "v1alpha1", "derivedviews"
SQL_V1 = ("SELECT customer_id, count(*) AS orders, sum(amount) AS revenue "
          "FROM events GROUP BY customer_id")
SQL_V2 = ("SELECT customer_id, count(*) AS orders, sum(amount) AS revenue, "
          "max(amount) AS biggest FROM events GROUP BY customer_id")
_RATE = 100  # events/s written during the whole demo
_TIMEOUT = 900


def _view(bootstrap: str, topic: str, table: str, sql: str) -> dict[str, Any]:
    return {"apiVersion": f"{G}/{V}", "kind": "DerivedView",
            "metadata": {"name": _VIEW, "namespace": _NAMESPACE},
            "spec": {"source": {"kafka": {"bootstrapServers": bootstrap}, "topics": [topic],
                                "schema": replay.ORDER_SCHEMA},
                     "transform": {"sql": sql},
                     "sink": {"postgres": {"secretRef": {"name": "views-db"}, "table": table},
                              "primaryKey": ["customer_id"]},
                     "cutover": {"retainPreviousSeconds": 0},
                     "deletionPolicy": "Delete"}}


def start_operator(settings: Settings, info: dict[str, Any], run: str) -> subprocess.Popen[bytes]:
    s3 = info["s3"]
    log = open(settings.logs_dir / "operator-demo.log", "ab")  # noqa: SIM115
    env = {**os.environ, "KUBECONFIG": info["kubeconfig"], "DV_LAG_POLL_SECONDS": "1",
           "DV_CHECKPOINT_BASE": f"s3a://{s3['bucket']}/demo/{run}",
           "DV_CHECKPOINT_SECRET": replay.CHECKPOINT_SECRET,
           "DV_CHECKPOINT_S3_ENDPOINT": s3["endpoint"], "DV_CHECKPOINT_S3_REGION": s3["region"],
           **replay.kafka_tenancy_env(info["kafka_bootstrap"], os.environ.get("DV_TENANCY_POLICY"))}
    return subprocess.Popen([sys.executable, "-m", "derived_views.main", "-A"], stdout=log,
                            stderr=subprocess.STDOUT, env=env)


class Watch:
    """Prints the view's progress, one line whenever what `kubectl get dv` shows changes."""

    def __init__(self, custom: Any, namespace: str = _NAMESPACE, name: str = _VIEW) -> None:
        self.custom, self.namespace, self.name = custom, namespace, name
        self.started = time.monotonic()
        self.last = ""
        self.last_key: tuple[Any, ...] = ()
        self.printed_at = 0.0

    def status(self) -> dict[str, Any]:
        try:
            obj = self.custom.get_namespaced_custom_object(G, V, self.namespace, P, self.name)
        except ApiException as exc:
            if exc.status == 404:
                return {}
            raise
        return dict(obj.get("status") or {})

    def line(self, status: dict[str, Any]) -> str:
        active = (status.get("active") or {}).get("revision") or "-"
        candidate = status.get("candidate") or {}
        lag = candidate.get("lag") or {}
        ready: dict[str, Any] = next(
            (c for c in status.get("conditions", []) if c["type"] == "Ready"), {})
        if not status:
            return "no view"
        if candidate:
            return (f"active {active:10}  candidate {candidate.get('revision')} "
                    f"{candidate.get('phase', ''):11} lag {lag.get('messages', '?'):>7} msgs, "
                    f"oldest missing {lag.get('seconds', '?'):>4}s old, "
                    f"ETA {lag.get('etaSeconds', '?')}s"
                    + (" (estimate)" if lag.get("etaEstimated") else "")
                    + (f", running batch has read {lag['batchRead']}"
                       if lag.get("batchRead") is not None else ""))
        return f"active {active:10}  ready {ready.get('status', '?')}: {ready.get('message', '')}"

    def until(self, done: Any, what: str) -> dict[str, Any]:
        deadline = time.monotonic() + _TIMEOUT
        while True:
            status = self.status()
            line = self.line(status)
            # A line when the phase or a revision changes, else every 5 s while lag moves.
            candidate = status.get("candidate") or {}
            key = ((status.get("active") or {}).get("revision"), candidate.get("revision"),
                   candidate.get("phase"), bool(status))
            now = time.monotonic()
            if key != self.last_key or (line != self.last and now - self.printed_at >= 5):
                print(f"   [{now - self.started:6.1f}s] {line}", flush=True)
                self.last, self.last_key, self.printed_at = line, key, now
            if done(status):
                return status
            if time.monotonic() > deadline:
                sys.exit(f"timed out waiting for {what}; operator log: "
                         f"{load().logs_dir / 'operator-demo.log'}")
            time.sleep(0.5)


def ready(status: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True"
               for c in status.get("conditions", []))


def recompute(events: list[dict[str, Any]]) -> dict[str, tuple[int, float, float]]:
    """The demo's own arithmetic over every event it produced."""
    acc: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, float("-inf")])
    for e in events:
        row = acc[e["customer_id"]]
        row[0] += 1
        row[1] += e["amount"]
        row[2] = max(row[2], e["amount"])
    return {k: (int(v[0]), round(v[1], 6), round(v[2], 6)) for k, v in acc.items()}


def alias_rows(dsn: str, table: str) -> dict[str, tuple[int, float, float]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            f'SELECT customer_id, orders, revenue, biggest FROM "{table}"').fetchall()
    return {r[0]: (int(r[1]), round(float(r[2]), 6), round(float(r[3]), 6)) for r in rows}


def stack_up() -> tuple[Settings, dict[str, Any], Any, Any]:
    """Bring the stack up with the DerivedView CRD installed: (settings, stack.json's
    endpoints, CoreV1Api, CustomObjectsApi)."""
    settings = load()
    info = cli.up(settings)
    api = config.new_client_from_config(config_file=info["kubeconfig"])
    cli.apply_crds(api, [Path(settings.repo) / "crds" / "derivedviews.io_derivedviews.yaml"])
    return settings, info, client.CoreV1Api(api), client.CustomObjectsApi(api)


def run_orders_demo() -> None:
    events_n = int(os.environ.get("DEMO_EVENTS", "50000"))
    settings, info, core, custom = stack_up()
    run = uuid.uuid4().hex[:8]
    topic, table = f"demo-orders-{run}", f"orders_by_customer_{run}"
    bootstrap = info["kafka_bootstrap"]

    print(f"\n1. topic {topic} (3 partitions): {events_n:,} order events, then {_RATE}/s "
          "live for the whole demo")
    replay.create_topic(bootstrap, topic, 3)
    backlog = replay.make_orders(events_n)
    replay.produce(bootstrap, topic, backlog)
    producer = LiveProducer(bootstrap, topic, rate=_RATE).start()
    replay.ensure_namespace_and_sink_secret(core, _NAMESPACE, "views-db", info["pg"])
    replay.ensure_checkpoint_secret(core, _NAMESPACE, info["s3"])
    operator = start_operator(settings, info, run)
    print(f"   operator started (pid {operator.pid}; log {settings.logs_dir}/operator-demo.log)")
    try:
        try:
            custom.delete_namespaced_custom_object(G, V, _NAMESPACE, P, _VIEW)
        except ApiException as exc:
            if exc.status != 404:
                raise
        watch = Watch(custom)
        watch.until(lambda _s: gone(custom), "an earlier demo's view to be deleted")

        print(f"\n2. kubectl apply DerivedView {_NAMESPACE}/{_VIEW} v1: {SQL_V1}")
        custom.create_namespaced_custom_object(G, V, _NAMESPACE, P,
                                               _view(bootstrap, topic, table, SQL_V1))
        applied = time.monotonic()
        status = watch.until(lambda s: ready(s) and s.get("active"), "v1 to serve")
        v1 = status["active"]["revision"]
        print(f"   v1 = revision {v1} serves through the alias \"{table}\" "
              f"({time.monotonic() - applied:.0f}s after the apply)")

        migrate(custom, watch, info["pg_dsn"], table, SQL_V2, v1, step=3)

        live = producer.stop()
        events = backlog + live
        print(f"\n4. producer stopped after {len(live):,} live events; checking the index "
              f"against the demo's own recomputation of all {len(events):,}...")
        expected = recompute(events)
        deadline = time.monotonic() + 300
        while alias_rows(info["pg_dsn"], table) != expected:
            if time.monotonic() > deadline:
                got = alias_rows(info["pg_dsn"], table)
                sys.exit(f"the index differs from the recomputation in "
                         f"{len(set(got.items()) ^ set(expected.items()))} rows")
            time.sleep(1)
        print(f"   {len(expected)} customers: 0 rows differ")
        top = sorted(expected.items(), key=lambda kv: (-kv[1][1], kv[0]))[:3]
        for cid, (orders, revenue, biggest) in top:
            print(f"   {cid:12} orders {orders:>5}  revenue {revenue:>10.2f}  "
                  f"biggest {biggest:>7.2f}")
        custom.delete_namespaced_custom_object(G, V, _NAMESPACE, P, _VIEW)
        watch.until(lambda _s: gone(custom), "the view to be deleted")
        print("\n5. view deleted (deletionPolicy Delete dropped its alias and indexes); "
              "the stack is still up (make stack-down stops it)")
    finally:
        producer.stop()
        operator.terminate()
        operator.wait(timeout=60)
        replay.delete_topic(bootstrap, topic)


def migrate(custom: Any, watch: Watch, dsn: str, table: str, sql: str, v1: str, *,
            step: int) -> str:
    """Apply `sql` (v2) while a reader queries the alias; wait until v2 serves and v1 retires,
    and print the cutover and what the reader saw. Returns v2's revision."""
    reader = AliasReader(dsn, table).start()
    try:
        print(f"\n{step}. a reader queries \"{table}\" in a loop; kubectl apply v2: {sql}")
        custom.patch_namespaced_custom_object(G, V, watch.namespace, P, watch.name,
                                              {"spec": {"transform": {"sql": sql}}})
        applied = time.monotonic()
        status = watch.until(lambda s: ready(s) and (s.get("active") or {}).get(
            "revision") not in (None, v1), "v2 to replay and cut over")
        v2: str = status["active"]["revision"]
        switched = time.monotonic() - applied
        status = watch.until(lambda s: phase(s, v1) in ("Retired", None), "v1 to retire")
    finally:
        reader.stop()
    print(f"   cutover: v2 = revision {v2} serves, {switched:.0f}s after the apply; "
          f"v1 {phase(status, v1) or 'dropped'}")
    print(f"   reader: {reader.queries:,} queries, {len(reader.errors)} errors, "
          f"worst stall {reader.worst_stall * 1000:.0f} ms")
    if reader.errors:
        print(f"   first error: {reader.errors[0]}")
    return v2


def gone(custom: Any, namespace: str = _NAMESPACE, name: str = _VIEW) -> bool:
    try:
        custom.get_namespaced_custom_object(G, V, namespace, P, name)
    except ApiException as exc:
        return bool(exc.status == 404)
    return False


def phase(status: dict[str, Any], revision: str) -> str | None:
    return next((r.get("phase") for r in status.get("revisions", [])
                 if r.get("revision") == revision), None)


if __name__ == "__main__":
    run_orders_demo()
