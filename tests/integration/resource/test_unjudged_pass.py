"""The pass's backstop against a judge that raises, with the real API server.

The SQL check and the tenancy policy refuse what they cannot read, so no hostile spec is
known to make them raise today; the backstop is driven here by handing the pass a judge
that raises as sqlglot once did (RecursionError). The view ends Stalled with a bounded
message and no status write on later passes; deleting it removes the finalizer, through the
planner's deletion on the stand-in spec when only the judging of the author's text raises,
and through the spec-free cleanup when the planner itself cannot run.

What the pass sent is read from a pass-through Kube (every call reaches the API server),
so another operator watching every namespace on the shared stack cannot blur it.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import pytest
from kubernetes import client

from derived_views.adapters.kafka.offsets import EndOffsetsCache
from derived_views.adapters.kube.client import Kube
from derived_views.api.spec import DerivedViewSpec
from derived_views.core import actions as A
from derived_views.core.observed import Observed
from derived_views.core.plan import plan
from derived_views.reconcile.deps import Deps
from derived_views.reconcile.run import reconcile
from dvstack.cli import apply_crds
from dvstack.testing.waiting import wait_for
from support.paths import REPO
from support.stand_ins.deps import pass_deps

CRD = REPO / "crds" / "derivedviews.io_derivedviews.yaml"

G, V, P = "derivedviews.io", "v1alpha1", "derivedviews"
FINALIZER = "derivedviews.io/cleanup"  # written out: the test's own expectation
MESSAGE_LIMIT = 1024
NOW = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)


class Sent(Kube):
    """The real adapter, remembering what the pass sent through it."""

    def __init__(self, api_client: Any) -> None:
        super().__init__(api_client)
        self.statuses: list[dict[str, Any]] = []
        self.events: list[str] = []
        self.released: list[str] = []

    def patch_view_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        self.statuses.append(status)
        super().patch_view_status(namespace, name, status)

    def event(self, view: dict[str, Any], *, reason: str, message: str,
              type_: str = "Normal") -> None:
        self.events.append(reason)
        super().event(view, reason=reason, message=message, type_=type_)

    def remove_finalizer(self, namespace: str, name: str, finalizer: str) -> None:
        self.released.append(finalizer)
        super().remove_finalizer(namespace, name, finalizer)


def _deps(kube: Sent) -> Deps:
    return pass_deps(kube, offsets=EndOffsetsCache(interval=5))


def _conditions(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status["conditions"]}


def raising(spec: DerivedViewSpec, observed: Observed, now: dt.datetime) -> list[A.Action]:
    raise RecursionError("maximum recursion depth exceeded " + "x" * 40000)


def raising_on_the_authors_sql(spec: DerivedViewSpec, observed: Observed, now: dt.datetime
                               ) -> list[A.Action]:
    """Raises on the author's SQL only: the stand-in spec is planned for real."""
    if spec.transform.sql != "SELECT * FROM events":
        raising(spec, observed, now)
    return plan(spec, observed, now)


def _view(name: str, bootstrap: str) -> dict[str, Any]:
    return {"apiVersion": f"{G}/{V}", "kind": "DerivedView",
            "metadata": {"name": name, "finalizers": [FINALIZER]},
            "spec": {"source": {"kafka": {"bootstrapServers": bootstrap},
                                "topics": [f"absent-{uuid.uuid4().hex[:6]}"],
                                "schema": "a STRING"},
                     "transform": {"sql": "SELECT a FROM events"},
                     "sink": {"postgres": {"secretRef": {"name": "no-such-db"},
                                           "table": f"t_{uuid.uuid4().hex[:6]}"},
                              "primaryKey": ["a"]}}}


@pytest.mark.parametrize("judge", [raising_on_the_authors_sql, raising],
                         ids=["stand-in-deletion", "spec-free-deletion"])
def test_a_judge_that_raises_stalls_the_view_and_deletion_still_releases_it(
        stack: Any, kube_api_client: Any, namespace: str, judge: Any) -> None:
    apply_crds(kube_api_client, [CRD])
    custom = client.CustomObjectsApi(kube_api_client)
    custom.create_namespaced_custom_object(G, V, namespace, P,
                                           _view("hostile", stack.kafka_bootstrap))
    kube = Sent(kube_api_client)
    deps = _deps(kube)

    def fresh() -> dict[str, Any]:
        body: dict[str, Any] = custom.get_namespaced_custom_object(G, V, namespace, P, "hostile")
        return body

    first = fresh()
    assert reconcile(first, deps, NOW, planner=judge) is False  # nothing escapes
    assert len(kube.statuses) == 1
    conditions = _conditions(kube.statuses[0])
    stalled = conditions["Stalled"]
    assert (stalled["status"], stalled["reason"]) == ("True", "SpecNotJudged")
    assert len(stalled["message"]) <= MESSAGE_LIMIT
    assert "RecursionError: maximum recursion depth exceeded" in stalled["message"]
    assert "fix the spec" in stalled["message"] and "report this" in stalled["message"]
    assert conditions["Ready"]["status"] == "False"
    # a later pass over what it wrote writes nothing (the transition time stays)
    later = NOW + dt.timedelta(minutes=3)
    stored = {**first, "status": kube.statuses[0]}
    assert reconcile(stored, deps, later, planner=judge) is False
    assert len(kube.statuses) == 1

    custom.delete_namespaced_custom_object(G, V, namespace, P, "hostile")
    deleting = fresh()
    assert deleting["metadata"].get("deletionTimestamp")
    assert reconcile(deleting, deps, later, planner=judge) is True
    assert kube.released == [FINALIZER]

    def gone() -> bool:
        try:
            fresh()
        except client.ApiException as exc:
            return exc.status == 404
        return False

    wait_for(gone, timeout=30, interval=0.2, what="the view to be released")
    assert kube.events == (["Deleted"] if judge is raising_on_the_authors_sql
                           else ["LeftBehind"])


def test_a_view_stored_before_a_limit_was_tightened_stalls_and_is_deleted(
        stack: Any, kube_api_client: Any, namespace: str) -> None:
    """Its stored SQL is over today's limit (the API server kept it): InvalidSpec, naming
    the field; its deletion runs the planner's on the stand-in spec."""
    apply_crds(kube_api_client, [CRD])
    custom = client.CustomObjectsApi(kube_api_client)
    custom.create_namespaced_custom_object(G, V, namespace, P, _view("old", stack.kafka_bootstrap))
    kube = Sent(kube_api_client)
    deps = _deps(kube)

    def stored_long_ago() -> dict[str, Any]:
        body: dict[str, Any] = custom.get_namespaced_custom_object(G, V, namespace, P, "old")
        body["spec"]["transform"]["sql"] = "SELECT a FROM events -- " + "x" * 300_000
        return body

    assert reconcile(stored_long_ago(), deps, NOW) is False
    stalled = _conditions(kube.statuses[-1])["Stalled"]
    assert (stalled["status"], stalled["reason"]) == ("True", "InvalidSpec")
    assert stalled["message"].startswith("spec.transform.sql: String should have at most 65536")
    assert len(stalled["message"]) <= MESSAGE_LIMIT
    custom.delete_namespaced_custom_object(G, V, namespace, P, "old")
    assert reconcile(stored_long_ago(), deps, NOW) is True
    assert kube.events == ["Deleted"] and kube.released == [FINALIZER]
