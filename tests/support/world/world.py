"""A simulated world for driving the planner over time, written independently of it.

Kafka, the Spark Operator with the replay job, PostgreSQL (indexes, ledger,
alias) and the API server (the view's metadata and status) as far as the
planner can see them. Actions are applied the way the adapters described in
core.actions apply them; jobs read their configuration from the manifest's
arguments, like the real job. The world also records what would be a real
corruption (a job resuming from a checkpoint whose index was dropped, a table
dropped under a running job) so tests can assert it never happens.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import random
from dataclasses import dataclass, field
from typing import Any

from derived_views.api.spec import DerivedViewSpec
from derived_views.api.status import DerivedViewStatus
from derived_views.core import actions as A
from derived_views.core.judges.tenancy import SECRET_LABEL, secrets_of
from derived_views.core.observed import (
    IndexOwner,
    LedgerPosition,
    Observed,
    RegistryObserved,
    SinkObserved,
    TopicRetention,
    ViewObserved,
    drivers_by_revision,
    revisions_to_observe,
    spark_application_from_object,
    with_drivers,
)
from derived_views.core.patch import apply_merge_patch
from derived_views.core.plan import plan
from derived_views.core.settings import Settings
from support.world.samples import I1, NAMESPACE, SQL_V1, T0, UID, VIEW, make_settings, spec_body

SECRET_VALUES = ("pg-password-value", "kafka-password-value")
PARTITIONS = {("orders", 0): 0, ("orders", 1): 0, ("payments", 0): 0}


class ActionFailed(Exception):
    """An adapter refused (alias moved, table in use): the shell stops the plan there."""


def driver_pod(name: str, phase: str = "Running", *, waiting: tuple[str, str] | None = None,
               terminated: tuple[int, str, str] | None = None, last: bool = False,
               deleting: bool = False) -> dict[str, Any]:
    """A driver Pod object as the kubelet reports it: `waiting` is (reason, message),
    `terminated` (exitCode, reason, message), in `lastState` when `last`."""
    state: dict[str, Any] = {}
    last_state: dict[str, Any] = {}
    if waiting is not None:
        state["waiting"] = {"reason": waiting[0], "message": waiting[1]}
    if terminated is not None:
        done = {"exitCode": terminated[0], "reason": terminated[1], "message": terminated[2]}
        (last_state if last else state)["terminated"] = done
    if not state:
        state["running"] = {"startedAt": "2026-03-01T12:00:00Z"}
    meta: dict[str, Any] = {"name": name, "labels": {"spark-role": "driver"}}
    if deleting:
        meta["deletionTimestamp"] = "2026-03-01T12:00:00Z"
    return {"metadata": meta, "status": {"phase": phase, "containerStatuses": [
        {"name": "spark-kubernetes-driver", "state": state, "lastState": last_state}]}}


@dataclass
class App:
    """A SparkApplication object plus the job it runs."""

    obj: dict[str, Any]
    config: dict[str, Any]
    state: str = ""
    error: str = ""
    attempts: int = 0
    deleting: bool = False
    started: bool = False
    position: dict[tuple[str, int], int] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return str(self.obj["metadata"]["name"])

    def as_object(self) -> dict[str, Any]:
        # what the API server would return: a fresh object (the top level and metadata are
        # what this method writes; the rest is never changed by a reader)
        obj = {**self.obj, "metadata": dict(self.obj["metadata"])}
        obj["status"] = {"applicationState": {"state": self.state, "errorMessage": self.error},
                         "executionAttempts": self.attempts}
        if self.deleting:
            obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        return obj


@dataclass
class World:
    spec_body: dict[str, Any]
    settings: Settings = field(default_factory=make_settings)
    now: dt.datetime = T0
    ends: dict[tuple[str, int], int] = field(default_factory=lambda: {
        ("orders", 0): 120, ("orders", 1): 80, ("payments", 0): 40})
    starts: dict[tuple[str, int], int] = field(default_factory=dict)
    """Log start offsets (retention, delete-records); absent: 0."""
    topic_configs: dict[str, TopicRetention] = field(default_factory=dict)
    history_starts: dict[str, dict[tuple[str, int], int]] = field(default_factory=dict)
    """Checkpoint -> where its job's replay began (Spark's resolved `earliest`)."""
    rate: int = 50
    """Messages per partition a running job commits per tick."""
    traffic: int = 0
    """Messages per partition that arrive each tick after the jobs' batches: a busy topic,
    on which no reading ever finds the lag at 0."""
    missing_topics: set[str] = field(default_factory=set)
    """Topics the cluster reports as not existing."""
    sink_problem: tuple[str, str] | None = None
    """Why the sink cannot be read while `sink_up` is False (None: no reason given)."""
    apps: dict[str, App] = field(default_factory=dict)
    tables: set[str] = field(default_factory=set)
    ledger: dict[str, tuple[dict[tuple[str, int], int], dt.datetime]] = field(default_factory=dict)
    ledger_starts: dict[str, dict[tuple[str, int], int]] = field(default_factory=dict)
    """Revision -> the history start its job writes with each ledger row."""
    ledger_history: dict[str, list[tuple[dict[tuple[str, int], int], dt.datetime]]] = field(
        default_factory=dict)
    """Every committed batch per revision, oldest first (the real ledger keeps them all)."""
    checkpoints: dict[str, dict[tuple[str, int], int]] = field(default_factory=dict)
    spent_checkpoints: set[str] = field(default_factory=set)
    alias: str | None = None
    alias_owner: IndexOwner | str | None = None
    """The owner the alias records; a `namespace/name` string is a record from before UIDs
    were (judged by name)."""
    owners: dict[str, IndexOwner] = field(default_factory=dict)
    """Owner each index records (the job records its view's when it creates the table)."""
    namespace: str = NAMESPACE
    name: str = VIEW
    uid: str = UID
    drop_blockers: tuple[str, ...] = ()
    """Others' objects depending on the alias or an index, as the sink reports them."""
    held_secrets: set[str] = field(default_factory=set)
    """Secrets carrying the operator's sink-secret finalizer."""
    """The view named in the alias's ownership comment (None: unmarked)."""
    status: dict[str, Any] = field(default_factory=dict)
    generation: int = 1
    annotations: dict[str, str] = field(default_factory=dict)
    finalizers: list[str] = field(default_factory=list)
    deletion_timestamp: dt.datetime | None = None
    gone: bool = False
    sink_up: bool = True
    kafka_up: bool = True
    registry: RegistryObserved | None = None
    """What the schema registry of an Avro view told the pass (None: not asked)."""
    events: list[A.EmitEvent] = field(default_factory=list)
    plans: list[list[A.Action]] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    ever_served: bool = False
    rng: random.Random = field(default_factory=lambda: random.Random(7))
    delete_lingers: bool = False
    """Deleted SparkApplications stay (deleting) until the next tick, like a slow GC."""
    deferred: tuple[str, str] | None = None
    """A switch the sink deferred (candidate behind the serving index), for the next pass."""
    stamps: dict[tuple[str, int], list[tuple[int, dt.datetime]]] = field(default_factory=dict)
    """Per partition, (first offset, time) of each run of records that arrived together: the
    Kafka timestamps staleness is read from (records found at an observation arrived then)."""
    stamped_end: dict[tuple[str, int], int] = field(default_factory=dict)
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Driver pods by name: only those a test puts here (jobs run without pods otherwise). A
    deleted application stays, deleting, while its driver pod exists (foreground deletion)."""
    _spec_of: tuple[dict[str, Any] | None, DerivedViewSpec | None] = field(
        default=(None, None), repr=False, compare=False)

    # the spec ----------------------------------------------------------------------------------

    @property
    def spec(self) -> DerivedViewSpec:
        """Validated once per body: the property tests read it a few hundred thousand times.
        Bodies are replaced, never changed in place (`edit` stores a copy)."""
        body, spec = self._spec_of
        if body is not self.spec_body or spec is None:
            spec = DerivedViewSpec.model_validate(self.spec_body)
            self._spec_of = (self.spec_body, spec)
        return spec

    def edit(self, body: dict[str, Any]) -> None:
        if body != self.spec_body:
            self.spec_body = copy.deepcopy(body)
            self.generation += 1

    # time --------------------------------------------------------------------------------------

    def tick(self, seconds: int = 5, growth: int = 0) -> None:
        """Time passes: the log grows, jobs start, commit batches, finish deleting."""
        self.now += dt.timedelta(seconds=seconds)
        for tp in self.ends:
            self.ends[tp] += growth
        for pod_name, pod in list(self.pods.items()):
            if pod["metadata"].get("deletionTimestamp"):
                del self.pods[pod_name]  # the kubelet killed the driver
        for name in list(self.apps):
            app = self.apps[name]
            if app.deleting:
                if f"{name}-driver" not in self.pods:
                    del self.apps[name]
                continue
            if app.state == "":
                app.state = "SUBMITTED"
            elif app.state == "SUBMITTED":
                app.state, app.attempts = "RUNNING", app.attempts + 1
                self.start_job(app)
            elif app.state == "RUNNING":
                self.run_batch(app)
        for tp in self.ends:
            self.ends[tp] += self.traffic
        self.stamp_arrivals()

    def stamp_arrivals(self) -> None:
        """Records past the last stamped end arrived now; a log below it was recreated now."""
        for tp, end in self.ends.items():
            runs = self.stamps.setdefault(tp, [])
            stamped = self.stamped_end.get(tp, 0)
            if end < stamped:
                runs[:] = [(0, self.now)]
            elif end > stamped:
                runs.append((stamped, self.now))
            self.stamped_end[tp] = end

    def record_time(self, tp: tuple[str, int], offset: int) -> dt.datetime | None:
        """Timestamp of the record at `offset` (None: none there yet)."""
        if offset >= self.ends[tp]:
            return None
        return [at for first, at in self.stamps[tp] if first <= offset][-1]

    def start_job(self, app: App) -> None:
        cfg = app.config
        revision, location = cfg["revision"], cfg["checkpointLocation"]
        table = cfg["sink"]["table"]
        if location in self.checkpoints:
            if location in self.spent_checkpoints or revision not in self.ledger:
                self.violations.append(f"{app.name} resumed from spent checkpoint {location}")
            app.position = dict(self.checkpoints[location])
        else:
            if revision in self.ledger:
                app.state, app.error = "FAILED", "LedgerMismatchError: checkpoint is new"
                self.violations.append(f"{app.name} started a fresh checkpoint over a ledger")
                return
            # Spark resolves `earliest` once, on a new checkpoint: the log start now
            app.position = {tp: self.starts.get(tp, 0) for tp in self.ends
                            if tp[0] in cfg["source"]["topics"]}
            self.history_starts[location] = dict(app.position)
        owner = cfg["owner"]
        recorded = self.owners.get(table)
        if recorded is not None and recorded.uid != owner["uid"]:
            # the real job refuses at start, before it writes anything
            app.state, app.error = "FAILED", f"ConfigError: {table} belongs to another view"
            return
        if table not in self.tables:
            self.owners[table] = IndexOwner(owner["namespace"], owner["name"], owner["uid"])
        self.tables.add(table)
        app.started = True

    def run_batch(self, app: App) -> None:
        cfg = app.config
        table = cfg["sink"]["table"]
        if table not in self.tables:
            self.violations.append(f"{table} was dropped under running job {app.name}")
            app.state, app.error = "FAILED", f"relation {table} does not exist"
            return
        moved = False
        lossy = cfg["source"]["kafkaOptions"].get("failOnDataLoss") == "false"
        for tp in self.ends:
            if tp[0] not in cfg["source"]["topics"]:
                continue
            if self.starts.get(tp, 0) > app.position.get(tp, 0):
                if not lossy:  # Spark: the offsets it must read next are gone
                    app.state, app.error = "FAILED", (
                        f"Cannot fetch offset {app.position.get(tp, 0)} of {tp[0]}-{tp[1]}: "
                        "Some data may have been lost because they are not available in "
                        "Kafka any more")
                    return
                app.position[tp] = self.starts[tp]
            # never backwards: a log recreated below the position is not re-read (Spark fails
            # on the data loss or, with failOnDataLoss off, waits for new offsets)
            new = max(app.position.get(tp, 0),
                      min(self.ends[tp], app.position.get(tp, 0) + self.rate))
            moved = moved or new != app.position.get(tp, 0)
            app.position[tp] = new
        if moved:
            self.ledger_starts[cfg["revision"]] = self.history_starts.get(
                cfg["checkpointLocation"], {})
            self.ledger[cfg["revision"]] = (dict(app.position), self.now)
            self.ledger_history.setdefault(cfg["revision"], []).append(
                (dict(app.position), self.now))
            self.checkpoints[cfg["checkpointLocation"]] = dict(app.position)

    def fail_job(self, revision: str | None = None, message: str = "OOMKilled") -> bool:
        for app in self.apps.values():
            if app.state == "RUNNING" and revision in (None, app.config["revision"]):
                app.state, app.error = "FAILED", message
                return True
        return False

    def recorded_alias_owner(self) -> IndexOwner | None:
        owner = self.alias_owner
        if isinstance(owner, str):
            namespace, name = owner.split("/")
            return IndexOwner(namespace, name, "")
        return owner

    def refuse_a_foreign_alias(self, done: str) -> None:
        """The planner never asks to switch or drop an alias recorded for another view (by
        UID; by name when recorded without one); the switch's adapter refuses it too."""
        owner = self.recorded_alias_owner()
        if owner is None or (owner.uid == self.uid if owner.uid
                             else (owner.namespace, owner.name) == (self.namespace, self.name)):
            return
        self.violations.append(f"{done} the alias of {owner.describe()}")
        raise ActionFailed(f"the alias belongs to {owner.describe()}")

    # observation --------------------------------------------------------------------------------

    def observe(self) -> Observed:
        self.stamp_arrivals()
        base = self.spec.sink.postgres.table
        sink = None
        if self.sink_up:
            sink = SinkObserved(
                indexes=frozenset(t for t in self.tables if t.startswith(base + "__")),
                alias_target=self.alias,
                ledger={rev: LedgerPosition(dict(pos), at, earlier=self.earlier_batch(rev),
                                            history_start=self.ledger_starts.get(rev))
                        for rev, (pos, at) in self.ledger.items()},
                alias_owner=self.recorded_alias_owner(),
                index_owners={t: o for t, o in self.owners.items() if t in self.tables},
                drop_blockers=self.drop_blockers if self.deletion_timestamp else ())
        apps = {}
        for app in self.apps.values():
            seen = spark_application_from_object(app.as_object())
            assert seen is not None
            apps[seen.revision] = seen
        drivers = drivers_by_revision(
            self.pods.values(), self.name, apps,
            revisions_to_observe(self.spec, DerivedViewStatus.model_validate(self.status)))
        apps = with_drivers(apps, drivers)
        return Observed(
            view=ViewObserved(namespace=self.namespace, name=self.name, uid=self.uid,
                              generation=self.generation,
                              annotations=dict(self.annotations),
                              finalizers=tuple(self.finalizers),
                              deletion_timestamp=self.deletion_timestamp),
            status=DerivedViewStatus.model_validate(self.status),
            settings=self.settings, spark_applications=apps, sink=sink,
            end_offsets=({tp: end for tp, end in self.ends.items()
                          if tp[0] not in self.missing_topics} if self.kafka_up else None),
            log_starts=({tp: self.starts.get(tp, 0) for tp in self.ends
                         if tp[0] not in self.missing_topics} if self.kafka_up else None),
            topic_configs=dict(self.topic_configs),
            record_times=self.record_times() if self.kafka_up else {},
            switch_deferred=self.take_deferred(),
            missing_topics=frozenset(self.missing_topics),
            sink_problem=None if self.sink_up else self.sink_problem,
            secret_labels={n: {SECRET_LABEL: "true"} for n in secrets_of(self.spec)},
            driver_pods=drivers, registry=self.registry)

    def take_deferred(self) -> tuple[str, str] | None:
        deferred, self.deferred = self.deferred, None
        return deferred

    def record_times(self) -> dict[tuple[tuple[str, int], int], dt.datetime | None]:
        """Times at every ledger head's offsets and at offset 0 (a revision without a batch)."""
        offsets = {(tp, self.starts.get(tp, 0)) for tp in self.ends}
        offsets |= {(tp, max(pos.get(tp, 0), self.starts.get(tp, 0)))
                    for pos, _ in self.ledger.values() for tp in self.ends}
        return {(tp, offset): self.record_time(tp, offset) for tp, offset in offsets
                if tp[0] not in self.missing_topics}

    def earlier_batch(self, revision: str) -> LedgerPosition | None:
        """The newest batch 30 s or more before the newest, else the first (as the adapter)."""
        history = self.ledger_history.get(revision, [])
        if len(history) < 2:
            return None
        newest_at = history[-1][1]
        old = [entry for entry in history[:-1]
               if entry[1] <= newest_at - dt.timedelta(seconds=30)]
        pos, at = old[-1] if old else history[0]
        return LedgerPosition(dict(pos), at)

    def parsed_status(self) -> DerivedViewStatus:
        return DerivedViewStatus.model_validate(self.status)

    # acting ---------------------------------------------------------------------------------------

    def apply(self, action: A.Action) -> None:
        match action:
            case A.RecordIntent(patch=patch) | A.UpdateStatus(patch=patch):
                self.status = apply_merge_patch(self.status, patch)
            case A.AddFinalizer(finalizer=f):
                if f not in self.finalizers:
                    self.finalizers.append(f)
            case A.RemoveFinalizer(finalizer=f):
                if f in self.finalizers:
                    self.finalizers.remove(f)
                if self.deletion_timestamp is not None and not self.finalizers:
                    self.gone = True
            case A.CreateSparkApplication(manifest=manifest, name=name):
                if name not in self.apps:
                    args = manifest["spec"]["arguments"]
                    assert args[0] == "--config-json"
                    obj = copy.deepcopy(manifest)
                    obj["metadata"]["creationTimestamp"] = self.now.isoformat()
                    self.apps[name] = App(obj, json.loads(args[1]))
            case A.DeleteSparkApplication(name=name):
                if name in self.apps:
                    pod = self.pods.get(f"{name}-driver")
                    if pod is not None:  # foreground: the app waits for its driver pod
                        pod["metadata"]["deletionTimestamp"] = "2026-03-01T12:00:00Z"
                        self.apps[name].deleting = True
                    elif self.delete_lingers:
                        self.apps[name].deleting = True
                    else:
                        del self.apps[name]
            case A.SwitchAlias(to_index=to, from_index=frm, not_behind=guard):
                self.refuse_a_foreign_alias("switched")
                if self.alias == to:  # idempotent; a name-only record gets the UID
                    self.alias_owner = IndexOwner(self.namespace, self.name, self.uid)
                    return
                if self.alias != frm:
                    raise ActionFailed(f"alias points at {self.alias}, expected {frm}")
                if guard is not None and guard.active in self.ledger:
                    # as the sink does, with the serving job's commits held (here the
                    # candidate commits nothing more meanwhile): refuse a candidate short of
                    # the serving ledger on a partition it reads, and say so to the next pass
                    serving = self.ledger[guard.active][0]
                    mine = self.ledger.get(guard.candidate, ({}, self.now))[0]
                    short = sorted(f"{t}/{p}" for (t, p), offset in serving.items()
                                   if (t, p) in guard.partitions and offset > mine.get((t, p), 0))
                    if short:
                        self.deferred = (guard.candidate, f"short on {', '.join(short)}")
                        raise ActionFailed(f"{to} is behind the serving index")
                if to not in self.tables:
                    raise ActionFailed(f"{to} does not exist")
                self.alias = to
                self.alias_owner = IndexOwner(self.namespace, self.name, self.uid)
                self.ever_served = True
            case A.DropAlias():
                self.refuse_a_foreign_alias("dropped")
                self.alias = None
            case A.DropIndex(index=index, revision=revision):
                if self.alias == index:
                    raise ActionFailed(f"{index} is served by the alias")
                if any(a.config["sink"]["table"] == index for a in self.apps.values()):
                    self.violations.append(f"dropped {index} while a job object for it exists")
                recorded = self.owners.get(index)
                if recorded is not None and recorded.uid != self.uid:
                    self.violations.append(f"dropped {index} of {recorded.namespace}/"
                                           f"{recorded.name}")
                    raise ActionFailed(f"{index} belongs to another view")  # as the adapter
                if index in self.tables:
                    self.tables.discard(index)
                    self.owners.pop(index, None)
                    self.ledger.pop(revision, None)
                    self.ledger_starts.pop(revision, None)
                    self.ledger_history.pop(revision, None)
                    for app_location, _ in list(self.checkpoints.items()):
                        if app_location.split("/")[-1].split(".")[0] == revision:
                            self.spent_checkpoints.add(app_location)
            case A.HoldSecret(name=name):
                self.held_secrets.add(name)
            case A.ReleaseSecret(name=name):
                self.held_secrets.discard(name)
            case A.EmitEvent():
                self.events.append(action)

    def reconcile(self, *, stop_after: int | None = None) -> list[A.Action]:
        """Observe, plan, act (optionally stopping after `stop_after` actions, like a crash)."""
        if self.gone:
            return []
        actions = plan(self.spec, self.observe(), self.now)
        self.plans.append(actions)
        for i, action in enumerate(actions):
            if stop_after is not None and i >= stop_after:
                break
            try:
                self.apply(action)
            except ActionFailed:
                break
        return actions

    def settle(self, ticks: int = 40, seconds: int = 5, growth: int = 0) -> None:
        for _ in range(ticks):
            self.reconcile()
            self.tick(seconds, growth)
        self.reconcile()

    # conveniences for assertions ---------------------------------------------------------------

    def condition(self, type_: str) -> tuple[str, str] | None:
        c = self.parsed_status().condition(type_)
        return None if c is None else (c.status, c.reason)

    def phases(self) -> dict[str, str]:
        return {r.revision: r.phase.value for r in self.parsed_status().revisions}

    def event_reasons(self) -> list[str]:
        return [e.reason for e in self.events]


def served_world(**world_options: object) -> World:
    """A view whose first revision (SQL_V1) serves, 40 seconds after creation."""
    world = World(spec_body(SQL_V1), **world_options)  # type: ignore[arg-type]
    world.settle(ticks=8)
    assert world.alias == I1
    return world


def run_until(world: World, predicate: object, ticks: int = 60, growth: int = 0) -> None:
    for _ in range(ticks):
        world.reconcile()
        if predicate(world):  # type: ignore[operator]
            return
        world.tick(growth=growth)
    raise AssertionError("condition not reached")
