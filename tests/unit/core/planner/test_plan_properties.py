"""Properties of the planner over random histories of edits, failures, outages and time.

The world (core_world) is the independent judge: it measures lag itself,
applies actions like the adapters, can crash the shell mid-plan, and notes
real corruption (a job resuming from a spent checkpoint, a table dropped under
a running job). After each step we check the invariants; after each history
we let the world settle and check that the view converges.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from derived_views.api.spec import DerivedViewSpec
from derived_views.api.status import DerivedViewStatus, Phase
from derived_views.core import actions as A
from derived_views.core.naming import index_table
from derived_views.core.plan import plan
from derived_views.core.revision import revision_of
from support.world.samples import SQLS, spec_body
from support.world.world import SECRET_VALUES, World

BASE_TABLE = "orders_by_customer"

Step = tuple[str, int]

steps = st.lists(st.one_of(
    st.tuples(st.just("tick"), st.integers(1, 40)),
    st.tuples(st.just("edit"), st.integers(0, 2)),
    st.tuples(st.just("policy"), st.integers(0, 3)),
    st.tuples(st.just("topics"), st.integers(0, 1)),
    st.tuples(st.just("fail"), st.integers(0, 1)),
    st.tuples(st.just("retry"), st.integers(0, 1_000)),
    st.tuples(st.just("promote"), st.integers(0, 1)),
    st.tuples(st.just("pause"), st.integers(0, 1)),
    st.tuples(st.just("sink"), st.integers(0, 1)),
    st.tuples(st.just("kafka"), st.integers(0, 1)),
    st.tuples(st.just("crash"), st.integers(0, 6)),
    st.tuples(st.just("burst"), st.integers(1, 400)),
    st.tuples(st.just("slow"), st.integers(0, 60)),
    st.tuples(st.just("hijack"), st.integers(0, 5)),
), min_size=1, max_size=40)


def body_for(sql_index: int, topics: int, policy: int, manual: bool) -> dict[str, Any]:
    # The judge tracks the gate in messages only (maxLagSeconds 0); the gate in time has its
    # own scenarios (phases/test_cutover.py: live traffic) and hand-worked cases (test_lag).
    cutover: dict[str, Any] = {"maxLagMessages": [0, 0, 25, 5][policy], "maxLagSeconds": 0,
                               "stableForSeconds": [10, 0, 20, 5][policy],
                               "deadlineSeconds": 600, "retainPreviousSeconds": [60, 0, 30, 120][policy],
                               "mode": "manual" if manual else "auto"}
    source = {"topics": ["orders", "payments"] if topics else ["orders"]}
    return spec_body(SQLS[sql_index], cutover=cutover, source=source,
                     spark={"executor": {"instances": 1 + policy}})


class Judge:
    """Checks every plan against the world it was made from."""

    def __init__(self, world: World, gate_continuity: bool) -> None:
        self.world = world
        self.gate_continuity = gate_continuity
        self.below_gate_since: dict[str, dt.datetime | None] = {}

    def world_lag(self, revision: str, topics: list[str]) -> int:
        position = self.world.ledger.get(revision, ({}, None))[0]
        return sum(end - position.get(tp, 0) for tp, end in self.world.ends.items()
                   if tp[0] in topics)

    def check(self, spec: DerivedViewSpec, actions: list[A.Action]) -> None:
        world = self.world
        observed = world.observe()
        # Deterministic: the same observation and time give the same plan.
        assert plan(spec, observed, world.now) == actions
        status_before = DerivedViewStatus.model_validate(world.status)
        # Track, independently, how long each known revision has been within the gate.
        gate = spec.cutover.max_lag_messages
        for record in status_before.revisions:
            if record.content is None or not world.sink_up or not world.kafka_up:
                continue
            lag = self.world_lag(record.revision, record.content.topics)
            if lag <= gate:
                self.below_gate_since.setdefault(record.revision, world.now)
                if self.below_gate_since[record.revision] is None:
                    self.below_gate_since[record.revision] = world.now
            else:
                self.below_gate_since[record.revision] = None
        active_before = next((r.revision for r in status_before.revisions
                              if r.phase == Phase.Active), None)
        for action in actions:
            if isinstance(action, A.SwitchAlias):
                assert world.sink_up
                assert action.to_index in world.tables, "switch to a missing index"
                revision = action.to_index.rsplit("__", 1)[1]
                if revision != active_before:  # a cutover, not a repair
                    target = status_before.record(revision)
                    assert target is not None and target.content is not None
                    assert self.world_lag(revision, target.content.topics) <= gate
                    assert any(app.config["revision"] == revision and app.state == "RUNNING"
                               and not app.deleting for app in world.apps.values()), \
                        "cutover to an index whose job is not running"
                    if self.gate_continuity:
                        since = self.below_gate_since.get(revision)
                        assert since is not None
                        # the gate holds for stableFor before readers move; a first revision
                        # serves once it holds (nothing served before it)
                        needed = (spec.cutover.stable_for_seconds if active_before is not None
                                  else 0)
                        assert (world.now - since).total_seconds() >= needed
            if isinstance(action, A.DropIndex):
                assert action.index != world.alias, "dropped the alias target"
                assert all(not (isinstance(s, A.SwitchAlias) and s.to_index == action.index)
                           for s in actions)
                assert not any(a.config["revision"] == action.revision
                               for a in world.apps.values()), "dropped under a job object"
            if isinstance(action, A.CreateSparkApplication):
                text = json.dumps(action.manifest)
                assert not any(secret in text for secret in SECRET_VALUES)
                config = json.loads(action.manifest["spec"]["arguments"][1])
                assert config["revision"] == action.revision
                assert action.manifest["metadata"]["labels"]["derivedviews.io/revision"] == \
                    action.revision
            if isinstance(action, A.UpdateStatus):
                actives = [r for r in action.status.revisions if r.phase == Phase.Active]
                assert len(actives) <= 1, "two Active revisions"
                for record in action.status.revisions:
                    assert record.index == index_table(BASE_TABLE, record.revision)
        kinds = [type(a) for a in actions]
        if A.RecordIntent in kinds:
            assert kinds[0] is A.RecordIntent
            assert A.UpdateStatus in kinds or A.RemoveFinalizer in kinds

    def after(self) -> None:
        world = self.world
        assert world.violations == []
        if world.ever_served and not world.gone:
            assert world.alias is not None and world.alias in world.tables, "stranded readers"
        DerivedViewStatus.model_validate(world.status)
        actives = [r for r in world.status.get("revisions", []) if r["phase"] == "Active"]
        assert len(actives) <= 1


def replay_same_time(world: World, judge: Judge, spec: DerivedViewSpec,
                     previous: list[A.Action]) -> None:
    """After a plan fully succeeded, replanning at the same time repeats none of its effects,
    and a few more passes reach a fixpoint: no actions but the ledger's pruning, which every
    pass that observed the sink plans (upkeep, core.actions.UPKEEP)."""
    done = [a for a in previous if isinstance(a, A.EFFECTS)]
    again = plan(spec, world.observe(), world.now)
    for action in again:
        if isinstance(action, A.EFFECTS):
            assert action not in done, f"repeated {action}"
    for _ in range(4):
        actions = plan(spec, world.observe(), world.now)
        judge.check(spec, actions)
        world.reconcile()
        judge.after()
        if all(isinstance(a, A.PruneLedger) for a in actions):
            return
    raise AssertionError(f"no fixpoint: still planning {actions}")


def drive(history: list[Step], manual: bool, seed: int) -> None:
    sql, topics, policy = 0, 0, 0
    world = World(body_for(sql, topics, policy, manual))
    world.rng.seed(seed)
    world.delete_lingers = bool(seed % 2)
    crashes = any(kind == "crash" for kind, _ in history) or any(
        kind in ("sink", "kafka") for kind, _ in history)
    judge = Judge(world, gate_continuity=not crashes)
    crash_next: int | None = None
    for kind, value in history:
        if kind == "tick":
            world.tick(seconds=value, growth=world.rng.randint(0, 20))
        elif kind == "edit":
            sql = value
        elif kind == "policy":
            policy = value
        elif kind == "topics":
            topics = value
        elif kind == "fail":
            world.fail_job(None if value else revision_of(world.spec))
        elif kind == "retry":
            world.annotations["derivedviews.io/retry"] = str(value)
        elif kind == "promote":
            world.annotations["derivedviews.io/promote"] = revision_of(world.spec)
        elif kind == "pause":
            if value:
                world.annotations["derivedviews.io/paused"] = "true"
            else:
                world.annotations.pop("derivedviews.io/paused", None)
        elif kind == "sink":
            world.sink_up = not value
        elif kind == "kafka":
            world.kafka_up = not value
        elif kind == "crash":
            crash_next = value
        elif kind == "burst":
            world.ends[("orders", 0)] += value
        elif kind == "slow":
            world.rate = value
        elif kind == "hijack":  # someone points the alias at another of the view's tables
            others = sorted(world.tables - {world.alias})
            if others:
                world.alias = others[value % len(others)]
        world.edit(body_for(sql, topics, policy, manual))
        spec = world.spec
        actions = plan(spec, world.observe(), world.now)
        judge.check(spec, actions)
        applied = world.reconcile(stop_after=crash_next)
        assert applied == actions
        if crash_next is None and world.sink_up and world.kafka_up:
            replay_same_time(world, judge, spec, actions)
        crash_next = None
        judge.after()

    # Settle: services back, no more failures, a retry for anything that failed, time passes.
    world.sink_up = world.kafka_up = True
    world.annotations.pop("derivedviews.io/paused", None)
    world.annotations["derivedviews.io/retry"] = "settle"
    world.annotations["derivedviews.io/promote"] = revision_of(world.spec)
    world.rate = 200
    for i in range(80):
        if world.condition("Stalled") == ("True", "DeadlineExceeded") or world.condition(
                "Stalled") == ("True", "JobFailed"):
            world.annotations["derivedviews.io/retry"] = f"settle-{i}"  # what a person would do
        spec = world.spec
        actions = plan(spec, world.observe(), world.now)
        judge.check(spec, actions)
        world.reconcile()
        judge.after()
        world.tick(seconds=5, growth=2)
    world.reconcile()
    status = world.parsed_status()
    desired = revision_of(world.spec)
    assert status.active is not None and status.active.revision == desired, world.phases()
    assert world.alias == index_table(BASE_TABLE, desired)
    ready = status.condition("Ready")
    assert ready is not None and ready.status == "True", status.conditions
    assert world.tables == {index_table(BASE_TABLE, desired)}, "left indexes behind"
    assert set(world.apps) == {f"orders-by-customer-{desired}"}
    assert world.violations == []


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=steps, manual=st.booleans(), seed=st.integers(0, 2**16))
def test_random_histories_keep_the_invariants_and_converge(
        history: list[Step], manual: bool, seed: int) -> None:
    drive(history, manual, seed)


@settings(max_examples=100, deadline=None)
@given(history=steps, seed=st.integers(0, 2**16),
       delay=st.integers(0, 3), deleting=st.sampled_from(["Retain", "Delete"]))
def test_deletion_after_any_history_releases_the_view(
        history: list[Step], seed: int, delay: int, deleting: str) -> None:
    world = World(body_for(0, 0, 0, False))
    world.delete_lingers = bool(seed % 2)
    for kind, value in history:
        if kind == "tick":
            world.tick(seconds=value)
        elif kind == "edit":
            world.edit(body_for(value, 0, 0, False))
        world.reconcile()
    body = copy.deepcopy(world.spec_body)
    body["deletionPolicy"] = deleting
    world.edit(body)
    world.reconcile()
    world.deletion_timestamp = world.now
    for _ in range(5 + delay):
        world.reconcile()
        world.tick()
    assert world.gone
    assert world.apps == {}
    if deleting == "Delete":
        assert world.tables == set() and world.alias is None
    assert world.violations == []


@settings(max_examples=50, deadline=None)
@given(offset=st.integers(-10**6, 10**6), history=steps)
def test_now_is_only_the_argument(offset: int, history: list[Step]) -> None:
    """Shifting the whole history in time shifts every timestamp and changes nothing else."""
    def run(start_shift: int) -> list[str]:
        world = World(body_for(0, 0, 0, False))
        world.now += dt.timedelta(seconds=start_shift)
        for kind, value in history[:10]:
            if kind == "tick":
                world.tick(seconds=value)
            elif kind == "edit":
                world.edit(body_for(value, 0, 0, False))
            world.reconcile()
        return [type(a).__name__ + ":" + (a.reason if isinstance(a, A.EmitEvent) else "")
                for p in world.plans for a in p]
    assert run(0) == run(offset)
