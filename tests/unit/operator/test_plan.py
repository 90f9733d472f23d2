"""The planner, driven through a small simulated world (table-driven + property-based).

The world here is written independently of the planner: it applies actions
the way the adapters do (jobs start and commit offsets, the alias moves,
indexes are dropped), so the tests check behaviour over time, not code shape.
"""

from __future__ import annotations

import copy
import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from tests_support_spec import BASE  # type: ignore[import-not-found]

from derived_views.planning import actions as A
from derived_views.planning.observed import Job, Observed, Progress
from derived_views.planning.plan import Plan, plan
from derived_views.resource.spec import DerivedViewSpec
from derived_views.resource.status import DerivedViewStatus
from derived_views.revision import revision_of

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
TOPIC = "orders"


def make_spec(sql: str = "SELECT * FROM events", **cutover: Any) -> DerivedViewSpec:
    body = copy.deepcopy(BASE)
    body["transform"] = {"sql": sql}
    body["cutover"] = {"stableForSeconds": 10, "deadlineSeconds": 600, "retainPreviousSeconds": 60,
                       **cutover}
    return DerivedViewSpec.model_validate(body)


@dataclass
class World:
    """Kafka + Spark + PostgreSQL as far as the planner can see them."""

    ends: dict[tuple[str, int], int] = field(default_factory=lambda: {(TOPIC, 0): 100, (TOPIC, 1): 50})
    jobs: dict[str, Job] = field(default_factory=dict)
    committed: dict[str, dict[tuple[str, int], int]] = field(default_factory=dict)
    indexes: set[str] = field(default_factory=set)
    alias: str | None = None
    status: DerivedViewStatus = field(default_factory=DerivedViewStatus)
    annotations: dict[str, str] = field(default_factory=dict)
    now: dt.datetime = T0
    deleting: bool = False
    finalizer: bool = True
    rate: int = 40  # messages per partition per tick a running job commits
    history: list[Plan] = field(default_factory=list)
    ever_served: bool = False

    def observe(self) -> Observed:
        return Observed(
            generation=1, status=self.status, annotations=dict(self.annotations),
            deleting=self.deleting, jobs=dict(self.jobs), indexes=frozenset(self.indexes),
            progress={r: Progress(dict(c), self.now) for r, c in self.committed.items()},
            topic_ends=dict(self.ends), alias_target=self.alias)

    def reconcile(self, spec: DerivedViewSpec) -> Plan:
        p = plan(spec, self.observe(), self.now)
        self.status = p.status
        for action in p.actions:
            self.apply(action, spec)
        self.history.append(p)
        return p

    def apply(self, action: A.Action, spec: DerivedViewSpec) -> None:
        if isinstance(action, A.CreateSparkApplication):
            self.jobs[action.revision] = Job(name=f"orders-{action.revision}", state="RUNNING")
            self.indexes.add(f"{spec.sink.postgres.table}__{action.revision}")
            self.committed.setdefault(action.revision, {})
        elif isinstance(action, A.DeleteSparkApplication):
            self.jobs.pop(action.revision, None)
        elif isinstance(action, A.SwitchAlias):
            assert self.alias in (action.from_index, action.to_index), "alias moved under us"
            assert action.to_index in self.indexes, "switch to a missing index"
            self.alias = action.to_index
            self.ever_served = True
        elif isinstance(action, A.DropIndex):
            assert action.index != self.alias, "dropped the serving index"
            self.indexes.discard(action.index)
            self.committed.pop(action.revision, None)
        elif isinstance(action, A.DropAlias):
            self.alias = None
        elif isinstance(action, A.RemoveFinalizer):
            self.finalizer = False

    def tick(self, seconds: float = 5) -> None:
        self.now += dt.timedelta(seconds=seconds)
        for rev, job in self.jobs.items():
            if job.state != "RUNNING":
                continue
            done = self.committed.setdefault(rev, {})
            for tp, end in self.ends.items():
                done[tp] = min(end, done.get(tp, 0) + self.rate)

    def run_until(self, spec: DerivedViewSpec, predicate: Any, steps: int = 60) -> None:
        for _ in range(steps):
            self.reconcile(spec)
            if predicate(self):
                return
            self.tick()
        raise AssertionError(f"not reached in {steps} steps; status: {self.status}")

    def phase(self, revision: str) -> str:
        return next(r.phase.value for r in self.status.revisions if r.revision == revision)

    def events(self) -> list[str]:
        return [a.reason for p in self.history for a in p.actions if isinstance(a, A.EmitEvent)]


def cond(world: World, type_: str) -> str:
    return next(c.status for c in world.status.conditions if c.type == type_)


def test_first_revision_backfills_then_serves() -> None:
    w, spec = World(), make_spec()
    rev = revision_of(spec)
    p = w.reconcile(spec)
    assert A.CreateSparkApplication(rev) in p.actions
    assert w.alias is None and cond(w, "Ready") == "False" and cond(w, "Reconciling") == "True"
    w.run_until(spec, lambda w: w.alias is not None)
    assert w.alias == f"orders__{rev}"
    assert w.status.active is not None and w.status.active.revision == rev
    assert cond(w, "Ready") == "True" and cond(w, "Reconciling") == "False"
    assert w.events()[:1] == ["BackfillStarted"] and "CutoverCompleted" in w.events()


def test_gate_needs_lag_to_hold_for_stable_seconds() -> None:
    w, spec = World(rate=1000), make_spec(stableForSeconds=12)
    w.reconcile(spec)  # creates the job
    w.tick(1)          # the job catches up at once
    w.reconcile(spec)  # gate holds from now
    assert w.alias is None and w.status.candidate is not None
    assert w.status.candidate.phase.value == "CaughtUp"
    w.tick(11)
    w.reconcile(spec)
    assert w.alias is None  # 11s < 12s
    w.tick(1)
    w.reconcile(spec)
    assert w.alias is not None


def test_lag_rising_resets_the_gate() -> None:
    w, spec = World(rate=1000), make_spec(stableForSeconds=10)
    w.reconcile(spec)
    w.tick(1)
    w.reconcile(spec)
    w.now += dt.timedelta(seconds=5)
    w.ends[(TOPIC, 0)] += 500  # new events arrive faster than the job commits
    w.reconcile(spec)
    assert w.status.candidate is not None and w.status.candidate.caughtUpSince is None
    assert w.status.candidate.lag is not None and w.status.candidate.lag.messages == 500


def serve(w: World, spec: DerivedViewSpec) -> str:
    w.run_until(spec, lambda w: w.status.active is not None and w.status.candidate is None)
    return revision_of(spec)


def test_content_change_replays_beside_active_then_cuts_over_and_retires() -> None:
    w = World()
    v1 = serve(w, make_spec())
    spec2 = make_spec("SELECT order_id FROM events")
    v2 = revision_of(spec2)
    w.reconcile(spec2)
    assert w.alias == f"orders__{v1}"  # v1 keeps serving while v2 replays
    assert set(w.jobs) == {v1, v2}
    assert w.committed[v2] == {}
    w.run_until(spec2, lambda w: w.alias == f"orders__{v2}")
    assert w.phase(v1) == "Retiring" and v1 not in w.jobs
    assert f"orders__{v1}" in w.indexes
    w.now += dt.timedelta(seconds=61)
    w.reconcile(spec2)
    assert w.phase(v1) == "Retired" and f"orders__{v1}" not in w.indexes


def test_rollback_inside_the_window_resumes_without_replay() -> None:
    w = World()
    spec1, spec2 = make_spec(), make_spec("SELECT order_id FROM events")
    v1 = serve(w, spec1)
    v2 = serve(w, spec2)
    assert w.phase(v1) == "Retiring"
    committed_before = dict(w.committed[v1])
    p = w.reconcile(spec1)
    assert A.CreateSparkApplication(v1) in p.actions
    assert w.committed[v1] == committed_before  # same index, same checkpoint: no replay
    assert "RollbackStarted" in w.events()
    w.run_until(spec1, lambda w: w.alias == f"orders__{v1}")
    assert w.phase(v2) == "Retiring"


def test_new_spec_before_cutover_supersedes_the_candidate() -> None:
    w = World(rate=1)
    v1 = serve(World(), make_spec())  # just the hash
    w.reconcile(make_spec())
    spec2 = make_spec("SELECT order_id FROM events")
    p = w.reconcile(spec2)
    assert A.DeleteSparkApplication(v1) in p.actions
    assert A.DropIndex(f"orders__{v1}", v1) in p.actions
    assert w.phase(v1) == "Superseded" and "Superseded" in w.events()


def test_failed_job_degrades_while_the_active_keeps_serving() -> None:
    w = World()
    v1 = serve(w, make_spec())
    spec2 = make_spec("SELECT broken FROM events")
    v2 = revision_of(spec2)
    w.reconcile(spec2)
    w.jobs[v2] = Job(name="x", state="FAILED", error="AnalysisException: broken")
    w.reconcile(spec2)
    assert w.alias == f"orders__{v1}"
    assert w.phase(v2) == "Failed"
    assert cond(w, "Degraded") == "True" and cond(w, "Stalled") == "True"
    degraded = next(c for c in w.status.conditions if c.type == "Degraded")
    assert "AnalysisException: broken" in degraded.message
    p = w.reconcile(spec2)  # no retry loop
    assert not any(isinstance(a, A.CreateSparkApplication) and a.revision == v2 for a in p.actions)


def test_deadline_aborts_the_candidate() -> None:
    w = World(rate=1)
    v1 = serve(World(), make_spec())
    spec = make_spec(deadlineSeconds=30)
    w.reconcile(spec)
    w.now += dt.timedelta(seconds=31)
    p = w.reconcile(spec)
    assert A.DeleteSparkApplication(v1) in p.actions
    assert w.phase(v1) == "Failed" and cond(w, "Degraded") == "True"
    assert next(c for c in w.status.conditions if c.type == "Degraded").reason == "DeadlineExceeded"


def test_manual_mode_waits_for_the_promote_annotation() -> None:
    w, spec = World(rate=1000), make_spec(mode="manual")
    rev = revision_of(spec)
    for _ in range(6):
        w.reconcile(spec)
        w.tick()
    assert w.alias is None and w.status.candidate is not None
    w.annotations["derivedviews.io/promote"] = rev
    w.reconcile(spec)
    assert w.alias == f"orders__{rev}"


def test_pause_annotation_stops_all_actions() -> None:
    w = World()
    w.annotations["derivedviews.io/paused"] = "true"
    assert w.reconcile(make_spec()).actions == ()


def test_half_done_cutover_is_finished_by_the_next_reconcile() -> None:
    w = World()
    v1 = serve(w, make_spec())
    spec2 = make_spec("SELECT order_id FROM events")
    v2 = revision_of(spec2)
    w.run_until(spec2, lambda w: w.status.candidate is not None
                and w.status.candidate.phase.value == "CaughtUp")
    status_before_switch = w.status
    w.alias = f"orders__{v2}"  # the switch committed, then the operator died
    w.status = status_before_switch
    w.reconcile(spec2)
    assert w.status.active is not None and w.status.active.revision == v2
    assert w.phase(v1) == "Retiring"


def test_deletion_under_each_policy() -> None:
    for policy, alias_after in (("Retain", True), ("Delete", False)):
        w = World()
        body = make_spec().model_dump(by_alias=True)
        body["deletionPolicy"] = policy
        spec = DerivedViewSpec.model_validate(body)
        serve(w, spec)
        w.deleting = True
        p = w.reconcile(spec)
        assert w.jobs == {} and not w.finalizer
        assert (w.alias is not None) == alias_after
        assert bool(w.indexes) == alias_after
        assert isinstance(p.actions[-1], A.RemoveFinalizer)


def test_kafka_unreachable_makes_no_gate_decision() -> None:
    w, spec = World(rate=1000), make_spec(stableForSeconds=0)
    w.reconcile(spec)
    w.tick()
    obs = w.observe()
    blind = Observed(**{**obs.__dict__, "topic_ends": None})
    p = plan(spec, blind, w.now)
    assert not any(isinstance(a, A.SwitchAlias) for a in p.actions)


SQLS = ["SELECT * FROM events", "SELECT order_id FROM events", "SELECT amount FROM events"]
steps = st.lists(st.one_of(
    st.tuples(st.just("tick"), st.integers(1, 30)),
    st.tuples(st.just("produce"), st.integers(0, 300)),
    st.tuples(st.just("spec"), st.integers(0, 2)),
    st.tuples(st.just("fail"), st.just(0)),
), min_size=1, max_size=40)


@settings(max_examples=150, deadline=None)
@given(steps)
def test_invariants_over_random_histories(history: list[tuple[str, int]]) -> None:
    w, spec = World(), make_spec(SQLS[0])
    for kind, n in history:
        if kind == "tick":
            w.tick(n)
        elif kind == "produce":
            w.ends[(TOPIC, n % 2)] += n
        elif kind == "spec":
            spec = make_spec(SQLS[n])
        elif kind == "fail" and w.status.candidate is not None and w.status.candidate.revision in w.jobs:
            w.jobs[w.status.candidate.revision] = Job(name="x", state="FAILED", error="boom")
        before = w.observe()
        p = w.reconcile(spec)  # World.apply asserts: no drop of the alias target, no switch to a missing index
        assert plan(spec, before, w.now) == p  # deterministic: only the arguments matter
        actives = [r for r in w.status.revisions if r.phase.value == "Active"]
        assert len(actives) <= 1
        if w.ever_served:
            assert w.alias is not None and w.alias in w.indexes
        for a in p.actions:
            if isinstance(a, A.SwitchAlias) and a.from_index is not None:
                target = next(r for r in w.status.revisions if r.index == a.to_index)
                assert target.lag is not None and target.lag.messages == 0
