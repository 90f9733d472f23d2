"""Helpers of the operator e2e tests: a view handle, the test's own recomputation, and the
live traffic (a producer and a reader of the alias, from dvstack.testing.traffic, which the demo
shares)."""

from __future__ import annotations

import datetime as dt
import json
import uuid
import warnings
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import psycopg
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from dvstack.testing import replay
from dvstack.testing.waiting import TimedOut, wait_for

G, V, P = "derivedviews.io", "v1alpha1", "derivedviews"


def aggregate(events: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per customer: orders, revenue, biggest and smallest amount — the test's own arithmetic."""
    out: dict[str, dict[str, float]] = defaultdict(dict)
    for e in events:
        row = out[e["customer_id"]]
        row["orders"] = row.get("orders", 0) + 1
        row["revenue"] = row.get("revenue", 0.0) + e["amount"]
        row["biggest"] = max(row.get("biggest", e["amount"]), e["amount"])
        row["smallest"] = min(row.get("smallest", e["amount"]), e["amount"])
    return dict(out)


def expected_rows(events: list[dict[str, Any]], columns: list[str]) -> dict[str, tuple[Any, ...]]:
    return {c: tuple(round(v[k], 6) for k in columns) for c, v in aggregate(events).items()}


def alias_rows(dsn: str, table: str, columns: list[str]) -> dict[str, tuple[Any, ...]]:
    cols = ", ".join(f'"{c}"' for c in columns)
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(f'SELECT customer_id, {cols} FROM "{table}"').fetchall()
    return {r[0]: tuple(round(float(x), 6) for x in r[1:]) for r in rows}


def sink_relations(dsn: str, table: str) -> list[str]:
    """The alias and every index table of `table` left in schema public."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT relname FROM pg_class c JOIN pg_namespace n "
                            "ON n.oid = c.relnamespace WHERE n.nspname = 'public' "
                            "AND c.relkind IN ('r', 'p', 'v', 'm') "  # not the tables' indexes
                            "AND (relname = %s OR relname LIKE %s) ORDER BY 1",
                            (table, f"{table}\\_\\_%")).fetchall()
    return [str(r[0]) for r in rows]


def ledger_rows(dsn: str, revision: str) -> int:
    """The ledger rows a revision's job committed (every view's ledger is dv_ledger). Rows
    the operator has pruned (adapters.postgres.sink.prune_ledger: the newest 20 batches at
    least stay) are not counted: to see batches commit, wait on `newest_batch`."""
    return len(ledger_batch_ids(dsn, revision))


def newest_batch(dsn: str, revision: str) -> int:
    """The revision's newest committed batch, -1 for none: it only grows, pruned or not."""
    return max(ledger_batch_ids(dsn, revision), default=-1)


def ledger_batch_ids(dsn: str, revision: str) -> list[int]:
    """The batch ids of the revision's committed batches, in order: a job resumed from its
    checkpoint carries the sequence on, one replaying from scratch would start at 0 again."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT batch_id FROM dv_ledger WHERE revision = %s "
                            "ORDER BY batch_id", (revision,)).fetchall()
    return [int(r[0]) for r in rows]

def running_batch(dsn: str, revision: str) -> tuple[int, int] | None:
    """(batch id, records its tasks have read) of the batch the revision's job has begun and
    not committed, from the job's own report (`dv_ledger_progress`: at the batch's start,
    then every few seconds while it runs); None between batches."""
    with psycopg.connect(dsn) as conn:
        try:
            row = conn.execute(
                "SELECT p.batch_id, p.records_read FROM dv_ledger_progress p "
                "WHERE p.revision = %s AND NOT EXISTS (SELECT 1 FROM dv_ledger l "
                "WHERE l.revision = p.revision AND l.batch_id = p.batch_id)",
                (revision,)).fetchone()
        except psycopg.errors.UndefinedTable:  # no job has reported yet
            return None
    return (int(row[0]), int(row[1])) if row is not None else None


def parse_time(value: str) -> dt.datetime:
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))


@dataclass
class ViewHandle:
    """One DerivedView in the API server, read fresh on every call."""

    custom: Any
    namespace: str
    name: str

    def get(self) -> dict[str, Any]:
        obj: dict[str, Any] = self.custom.get_namespaced_custom_object(
            G, V, self.namespace, P, self.name)
        return obj

    def status(self) -> dict[str, Any]:
        return dict(self.get().get("status") or {})

    def condition(self, type_: str) -> dict[str, Any]:
        return next((c for c in self.status().get("conditions", []) if c["type"] == type_), {})

    def ready(self) -> bool:
        return self.condition("Ready").get("status") == "True"

    def active(self) -> str | None:
        return (self.status().get("active") or {}).get("revision")

    def phases(self) -> dict[str, str]:
        return {r["revision"]: r["phase"] for r in self.status().get("revisions", [])}

    def record(self, revision: str) -> dict[str, Any]:
        return next(r for r in self.status()["revisions"] if r["revision"] == revision)

    def patch(self, body: dict[str, Any]) -> None:
        self.custom.patch_namespaced_custom_object(G, V, self.namespace, P, self.name, body)

    def wait_serving_new(self, old: str | None, what: str, timeout: float = 600) -> str:
        """Wait until a revision other than `old` serves and the view is Ready; return it.

        The deadline is a failure detector, not a pace: a replay beside two other tests'
        Spark jobs on two cores took over 300 s (CI, OpenSearch lifecycle), and the call
        returns as soon as the condition holds."""
        wait_for(lambda: self.active() not in (None, old) and self.ready(),
                 timeout=timeout, interval=1, what=what, on_timeout=self.brief)
        revision = self.active()
        assert revision is not None
        return revision

    def brief(self) -> str:
        """The status a failed wait reports: conditions and each revision's phase and lag."""
        try:
            status = self.status()
        except Exception as exc:  # the failure report must not fail
            return f"status unreadable: {exc!r}"
        conditions = [{k: c.get(k) for k in ("type", "status", "reason", "message")}
                      for c in status.get("conditions", [])]
        revisions = [{k: r.get(k) for k in ("revision", "phase", "lag", "message")}
                     for r in status.get("revisions", [])]
        text = json.dumps({"active": status.get("active"), "conditions": conditions,
                           "revisions": revisions}, default=str)
        return text[:4000]

    def gone(self) -> bool:
        try:
            self.get()
        except ApiException as exc:
            return exc.status == 404
        return False

    def events(self, core: client.CoreV1Api) -> list[tuple[str, str, str]]:
        items = core.list_namespaced_event(
            self.namespace, field_selector=f"involvedObject.name={self.name}").items
        return [(e.type, e.reason, e.message) for e in items]

    def wait_events(self, core: client.CoreV1Api, *reasons: str,
                    timeout: float = 60) -> list[tuple[str, str, str]]:
        """The view's Events with one of `reasons`, once there is one. The operator posts an
        Event after the status it explains, from a queue: a test that saw the status may not
        see the Event yet."""
        def found() -> list[tuple[str, str, str]]:
            return [e for e in self.events(core) if e[1] in reasons]
        wait_for(lambda: bool(found()), timeout=timeout, interval=0.5,
                 what=f"an Event {' or '.join(reasons)} on view {self.name}",
                 on_timeout=lambda: str(self.events(core)))
        return found()


def wait_alias_equals(dsn: str, table: str, events: list[dict[str, Any]], columns: list[str],
                      what: str, timeout: float = 180) -> None:
    """Wait until the alias equals the test's recomputation of `events`.

    Ready means the served index is within the cutover gate of the log (seconds behind at
    most, by default), not that it holds the last record yet: it gets there by itself.
    """
    expected = expected_rows(events, columns)
    wait_for(lambda: alias_rows(dsn, table, columns) == expected, timeout=timeout, interval=1,
             what=what)


def view_body(namespace: str, name: str, bootstrap: str, topic: str, table: str,
              secret: str = "views-db", max_lag_seconds: int | None = None
              ) -> dict[str, Any]:
    """A view with NO cutover settings but the gate's width when given: the defaults are
    what is under test."""
    body: dict[str, Any] = {"apiVersion": f"{G}/{V}", "kind": "DerivedView",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"source": {"kafka": {"bootstrapServers": bootstrap},
                                "topics": [topic], "schema": replay.ORDER_SCHEMA},
                     "transform": {"sql": replay.ORDERS_BY_CUSTOMER_SQL},
                     "sink": {"postgres": {"secretRef": {"name": secret}, "table": table},
                              "primaryKey": ["customer_id"]},
                     "deletionPolicy": "Delete"}}
    if max_lag_seconds is not None:
        body["spec"]["cutover"] = {"maxLagSeconds": max_lag_seconds}
    return body


def orders_backlog(stack: Any, core: client.CoreV1Api, namespace: str, count: int,
                   seed: int, age_seconds: float = 0.0) -> tuple[str, list[dict[str, Any]]]:
    """A fresh 3-partition topic holding `count` order events (stamped `age_seconds` ago:
    history), and the namespace's sink Secret; returns the topic and the events."""
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    replay.create_topic(stack.kafka_bootstrap, topic, 3)
    backlog = replay.make_orders(count, seed=seed)
    replay.produce(stack.kafka_bootstrap, topic, backlog, age_seconds=age_seconds)
    replay.ensure_namespace_and_sink_secret(core, namespace, "views-db", stack.pg)
    return topic, backlog


def delete_views(api_client: Any, namespace: str, timeout: float = 180) -> None:
    """Delete every DerivedView in `namespace` and wait until they are gone: a test's
    operator removes their jobs, indexes and finalizers before it stops, so neither the
    namespace nor the sink keeps what the test made."""
    custom = client.CustomObjectsApi(api_client)

    def names() -> list[str]:
        listed = custom.list_namespaced_custom_object(G, V, namespace, P)["items"]
        return [item["metadata"]["name"] for item in listed]

    for name in names():
        try:
            custom.delete_namespaced_custom_object(G, V, namespace, P, name)
        except ApiException as exc:
            if exc.status != 404:
                raise
    try:
        wait_for(lambda: not names(), timeout=timeout, interval=0.5,
                 what=f"the views of namespace {namespace} to be deleted by the test's operator")
    except TimedOut as exc:  # the test's own verdict stands; its leftovers are said
        warnings.warn(f"{exc}: left {', '.join(names())}", stacklevel=2)
