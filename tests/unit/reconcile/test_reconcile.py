"""The shell's three steps without a cluster: observe reads and writes nothing, a pass
returns its outcome, and a spec that cannot run is Stalled once, not on every poll.

The Kubernetes side is an in-memory stand-in; the sink Secret is absent and the Kafka
cluster outside the default tenancy policy, so nothing here connects anywhere
(tests/integration/resource/test_unjudged_pass.py drives the same paths on a real API
server).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from typing import Any, cast

import pytest

from derived_views.adapters.sink_contract import SinkSession, SwitchDeferred
from derived_views.api.spec import DerivedViewSpec
from derived_views.api.status import DerivedViewStatus
from derived_views.core import actions as A
from derived_views.core.check_runs import CheckRequest, Held
from derived_views.core.cutover.monotonic import Guard
from derived_views.core.observed import Observed
from derived_views.core.settings import CheckpointSettings, Settings, SparkSettings
from derived_views.reconcile.act import act
from derived_views.reconcile.deps import Deps, PassRecord
from derived_views.reconcile.observe import observe
from derived_views.reconcile.run import PassOutcome, reconcile, run_pass
from support.stand_ins.deps import pass_deps
from support.stand_ins.kube import FakeKube

CONFIG = Settings(spark=SparkSettings(template="", image="i"), checkpoints=CheckpointSettings(base="/c"))
NOW = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
SPEC = {"source": {"kafka": {"bootstrapServers": "k:9092"}, "topics": ["a"],
                   "schema": "a STRING"},
        "transform": {"sql": "SELECT a FROM events"},
        "sink": {"postgres": {"secretRef": {"name": "db"}, "table": "orders", "schema": "shop"},
                 "primaryKey": ["a"]}}


def _deps(kube: FakeKube) -> Deps:
    return pass_deps(kube, settings=CONFIG)


def _body(spec: dict[str, Any], status: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"metadata": {"namespace": "shop", "name": "orders", "uid": "u1",
                                         "generation": 2, "finalizers": []},
                            "spec": spec}
    if status is not None:
        body["status"] = status
    return body


def raising(spec: DerivedViewSpec, observed: Observed, now: dt.datetime) -> list[A.Action]:
    raise RecursionError("maximum recursion depth exceeded")


def test_observe_reads_everything_and_writes_nothing() -> None:
    kube = FakeKube(read_only=True)
    seen = observe(DerivedViewSpec.model_validate(SPEC), _body(SPEC), _deps(kube))
    try:
        assert (seen.observed.view.namespace, seen.observed.view.name) == ("shop", "orders")
        assert seen.session is None and seen.observed.sink is None
        assert seen.observed.sink_problem is not None
        assert seen.observed.sink_problem[0] == "SecretMissing"
        assert seen.observed.end_offsets is None and seen.source.reason is not None
        assert seen.observed.checks == Held()
    finally:
        seen.close()
    assert kube.statuses == [] and kube.released == []


def test_a_pass_returns_its_outcome_and_the_release() -> None:
    kube = FakeKube()

    def releasing(spec: DerivedViewSpec, observed: Observed, now: dt.datetime
                  ) -> list[A.Action]:
        return [A.RemoveFinalizer("derivedviews.io/cleanup")]

    assert run_pass(_body(SPEC), _deps(kube), NOW, planner=releasing) == PassOutcome(
        released=True)
    assert kube.released == ["derivedviews.io/cleanup"]
    assert run_pass(_body(SPEC), _deps(kube), NOW, planner=lambda s, o, n: []) == PassOutcome(
        released=False, settled=None)  # not settled: no status says it is served


def test_an_invalid_spec_is_stalled_once_and_keeps_its_transition_time() -> None:
    kube = FakeKube()
    spec = {**SPEC, "transform": {"sql": ""}}
    assert run_pass(_body(spec), _deps(kube), NOW) == PassOutcome(released=False)
    assert len(kube.statuses) == 1
    stalled = {c["type"]: c for c in kube.statuses[0]["conditions"]}["Stalled"]
    assert (stalled["status"], stalled["reason"]) == ("True", "InvalidSpec")
    later = NOW + dt.timedelta(minutes=5)
    assert reconcile(_body(spec, kube.statuses[0]), _deps(kube), later) is False
    assert len(kube.statuses) == 1  # unchanged: no status write on this poll


def test_a_judge_that_raises_stalls_the_view_once() -> None:
    kube = FakeKube()
    assert run_pass(_body(SPEC), _deps(kube), NOW, planner=raising) == PassOutcome(
        released=False)
    assert len(kube.statuses) == 1
    stalled = {c["type"]: c for c in kube.statuses[0]["conditions"]}["Stalled"]
    assert stalled["reason"] == "SpecNotJudged"
    later = NOW + dt.timedelta(minutes=5)
    assert reconcile(_body(SPEC, kube.statuses[0]), _deps(kube), later,
                     planner=raising) is False
    assert len(kube.statuses) == 1


def test_the_pass_carries_the_planned_check_runs_out_on_the_runner() -> None:
    """A planned run goes to the check runner (which reads the sink Secret on its own, here
    absent: the run is an error of each check, saying why); a taken run is cleared."""
    deps = _deps(FakeKube())
    spec = DerivedViewSpec.model_validate(
        {**SPEC, "cutover": {"checks": {"assertions": [
            {"name": "a", "sql": "SELECT 1 FROM {index} WHERE false"}]}}})
    assert spec.cutover.checks is not None
    request = CheckRequest(revision="r1", schema="shop", index="orders__r1", active_index=None,
                           primary_key=("a",), same_key=False, checks=spec.cutover.checks,
                           checks_hash="h")

    def submitting(s: DerivedViewSpec, o: Observed, n: dt.datetime) -> list[A.Action]:
        return [A.SubmitChecks(request, n)]

    run_pass(_body(spec.model_dump(mode="json", by_alias=True, exclude_none=True)), deps, NOW,
             planner=submitting)
    deadline = time.monotonic() + 30  # the runner measures on its own thread
    while (finished := deps.check_runner.held(("shop", "orders")).finished) is None:
        assert time.monotonic() < deadline, "the submitted run did not finish in 30 s"
        time.sleep(0.02)
    assert finished.run.checked_at == NOW
    [result] = finished.run.results
    assert result.outcome.value == "Error" and "db" in (result.observed or "")

    def taking(s: DerivedViewSpec, o: Observed, n: dt.datetime) -> list[A.Action]:
        assert o.checks.finished is not None  # observation read it, and left it
        return [A.TakeChecks("r1", o.checks.finished.run)]

    run_pass(_body(SPEC), deps, NOW, planner=taking)
    assert deps.check_runner.held(("shop", "orders")) == Held()


def test_pruning_planned_without_the_sink_stops_the_pass() -> None:
    def pruning(s: DerivedViewSpec, o: Observed, n: dt.datetime) -> list[A.Action]:
        return [A.PruneLedger()]

    with pytest.raises(RuntimeError, match="prune the sink's ledger planned without the sink"):
        run_pass(_body(SPEC), _deps(FakeKube()), NOW, planner=pruning)


class DeferringSink:
    """A sink whose switch is deferred (the candidate stayed behind the serving index)."""

    def switch_alias(self, schema: str, alias: str, to_index: str, from_index: str | None, *,
                     owner: str, not_behind: Guard | None = None) -> None:
        raise SwitchDeferred("revision c stayed behind the serving revision a on t/0 by 2")


def test_a_deferred_switch_stops_the_pass_and_the_next_observation_says_so() -> None:
    kube = FakeKube()
    deps = _deps(kube)
    guard = Guard("a", "c", frozenset({("t", 0)}))
    actions: list[A.Action] = [
        A.SwitchAlias("shop", "orders", "orders__c", "orders__a", guard),
        A.UpdateStatus(DerivedViewStatus(), {"active": {"revision": "c"}})]
    released = act(actions, _body(SPEC), ("shop", "orders"), deps,
                   cast(SinkSession, DeferringSink()), PassRecord(),
                   spec=DerivedViewSpec.model_validate(SPEC))
    assert not released
    assert kube.statuses == []  # the status would have said the switch happened
    seen = observe(DerivedViewSpec.model_validate(SPEC), _body(SPEC), deps)
    assert seen.observed.switch_deferred == (
        "c", "revision c stayed behind the serving revision a on t/0 by 2")
    seen.close()
    again = observe(DerivedViewSpec.model_validate(SPEC), _body(SPEC), deps)
    assert again.observed.switch_deferred is None  # shown for one pass, then tried again
    again.close()


def test_a_cutover_is_logged_with_the_staleness_its_pass_read(
        caplog: pytest.LogCaptureFixture) -> None:
    kube = FakeKube()
    status = DerivedViewStatus.model_validate({"lastCutover": {
        "from": "a", "to": "c", "switchedAt": "2026-03-01T12:00:00Z", "stalenessSeconds": 3,
        "lagMessages": 12}})
    patch = {"lastCutover": {"from": "a", "to": "c"}}
    with caplog.at_level(logging.INFO, logger="derived_views"):
        act([A.UpdateStatus(status, patch), A.UpdateStatus(status, {"phase": "Active"})],
            _body(SPEC), ("shop", "orders"), _deps(kube), None, PassRecord(),
            spec=DerivedViewSpec.model_validate(SPEC))
    said = [r.getMessage() for r in caplog.records if "alias serves" in r.getMessage()]
    assert said == ["shop/orders: the alias serves revision c (from a); the switching pass "
                    "read staleness 3 s, lag 12 messages"]  # once: the second patch moved nothing
