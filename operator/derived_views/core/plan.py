"""plan(spec, observed, now) -> actions: every decision the operator makes, as a pure function.

Reads only its arguments: no clock, no environment, no I/O. The shell carries
the actions out in order and stops at the first failure (see core.actions);
the intent is recorded first and the status last, so a restarted operator
replans from the same facts and resumes where the last pass stopped.

Invariants (property-tested): at most one revision is Active; once a view has
served, the alias only moves to an existing index that passed the lag gate
(or back to the active index if someone moved it), and an index the alias
selects from is never dropped; replanning after a plan succeeded repeats no
effect.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from derived_views.api.constants import (
    FINALIZER,
    PAUSED_ANNOTATION,
    PROMOTE_ANNOTATION,
    RETRY_ANNOTATION,
)
from derived_views.api.spec import DerivedViewSpec
from derived_views.api.status import (
    ActiveStatus,
    CandidateStatus,
    CutoverRecord,
    DerivedViewStatus,
    Intent,
    Lag,
    LagSample,
    Phase,
    RevisionStatus,
    ViewPhase,
    shown_lag,
)
from derived_views.core import (
    checks,
    deletion,
    integrity,
    naming,
    ownership,
    partition_growth,
    status_size,
    switch_guard,
    tenancy,
)
from derived_views.core import conditions as cond
from derived_views.core.actions import (
    Action,
    AddFinalizer,
    CreateSparkApplication,
    DeleteSparkApplication,
    DropAlias,
    DropIndex,
    EmitEvent,
    HoldSecret,
    RecordIntent,
    ReleaseSecret,
    RemoveFinalizer,
    SwitchAlias,
    UpdateStatus,
    describe,
)
from derived_views.core.checkpoints import durable_base_problem, is_s3a
from derived_views.core.deadlines import TORN_DOWN_REASONS, deadline_verdict
from derived_views.core.job_state import (
    DRIVER_PENDING,
    JOB_COMPLETED,
    JOB_FAILED,
    Judgement,
    Kind,
    judge,
)
from derived_views.core.lag import compute_lag, reset_partitions, within_gate
from derived_views.core.observed import LedgerPosition, Observed, SwitchBlocker
from derived_views.core.patch import merge_patch
from derived_views.core.revision import content_of, job_settings_of, revision_of, with_content
from derived_views.core.sql_check import POLICY_VIOLATION, check_spec
from derived_views.core.tenancy import PolicyRefusal
from derived_views.core.times import seconds_between, utc
from derived_views.render.sparkapplication import render_spark_application

BUILDING = frozenset({Phase.Pending, Phase.Backfilling, Phase.CaughtUp})
FINISHED = frozenset({Phase.Retired, Phase.Superseded, Phase.Failed})

TOPIC_MISSING = "TopicMissing"
TOPIC_RESET = "TopicReset"
MAX_MESSAGE = 1024


def plan(spec: DerivedViewSpec, observed: Observed, now: dt.datetime) -> list[Action]:
    """Decide what to do for one view, given one observation and the time."""
    return _Planner(spec, observed, utc(now)).run()


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE - 3] + "..."


def _lag_text(lag: Lag | None, spec: DerivedViewSpec) -> str:
    if lag is None:
        return "lag unknown"
    gate = spec.cutover
    text = f"lag {lag.messages} messages (gate {gate.max_lag_messages})"
    if lag.messages and gate.max_lag_seconds:
        shown = "unknown" if lag.seconds is None else f"{lag.seconds}s"
        text += f", {shown} in time (gate {gate.max_lag_seconds}s)"
    if lag.since_commit_seconds:
        text += f", {lag.since_commit_seconds}s since its last commit"
    return text


def is_torn_down(record: RevisionStatus) -> bool:
    """Records whose job and index are removed: Superseded, Retired, aborted past the deadline.

    A candidate that Failed because its job failed keeps both, for inspection and a
    resume on retry.
    """
    return record.phase in (Phase.Superseded, Phase.Retired) or (
        record.phase == Phase.Failed and record.reason in TORN_DOWN_REASONS)


class _Planner:
    def __init__(self, spec: DerivedViewSpec, observed: Observed, now: dt.datetime) -> None:
        self.spec, self.obs, self.now = spec, observed, now
        self.cfg = observed.config
        self.view = observed.view
        self.sink = observed.sink
        self.apps = observed.spark_applications
        self.desired = revision_of(spec)
        self.base = spec.sink.base_name
        self.schema = spec.sink.scope
        self.alias = naming.alias_name(self.base)
        self.where = spec.sink.alias_display
        self.base_field = ("spec.sink.opensearch.index" if spec.sink.kind == "opensearch"
                           else "spec.sink.postgres.table")
        annotations = self.view.annotations
        # Deleting overrides a pause: the user asked for the jobs to stop.
        self.paused = (annotations.get(PAUSED_ANNOTATION, "").strip().lower() == "true"
                       and self.view.deletion_timestamp is None)
        self.retry_token = annotations.get(RETRY_ANNOTATION)
        self.promote_to = annotations.get(PROMOTE_ANNOTATION, "").strip()

        status = observed.status
        self.records: dict[str, RevisionStatus] = {r.revision: r for r in status.revisions}
        self.spent_builds = dict(status.spent_builds)
        self.spent_builds_floor = status.spent_builds_floor or 0
        actives = [r for r in status.revisions if r.phase == Phase.Active]
        self.active: str | None = None
        if actives:
            serving = [r for r in actives if self.sink is not None
                       and self.sink.alias_target == r.index]
            self.active = (serving or actives)[0].revision
            for extra in actives:  # never two Active: a torn status is repaired, not trusted
                if extra.revision != self.active:
                    self.set(extra.revision, phase=Phase.Retiring,
                             retire_after=self.retire_after(), reason="Replaced")

        self.switches: list[SwitchAlias] = []
        self.deletes: list[DeleteSparkApplication] = []
        self.creates: list[CreateSparkApplication] = []
        self.drop_aliases: list[DropAlias] = []
        self.drops: list[DropIndex] = []
        self.finalizers_added: list[AddFinalizer] = []
        self.finalizers_removed: list[RemoveFinalizer] = []
        self.secret_holds: list[HoldSecret | ReleaseSecret] = []
        self.held_secrets = list(observed.status.held_secrets)
        self.deletion_problem: cond.Verdict | None = None
        self.events: list[EmitEvent] = []
        self.cutover: tuple[str, str | None] | None = None
        self.last_cutover: CutoverRecord | None = None
        self.lags: dict[str, Lag | None] = {}
        # Another view owns the alias of this sink table: touch nothing of the sink's.
        me = f"{self.view.namespace}/{self.view.name}"
        owner = self.sink.alias_owner if self.sink is not None else None
        self.claimed_by = owner if owner not in (None, me) else None
        # Indexes another view records as its own (same name: same content and table):
        # never resumed into, switched to or dropped; the desired or active one stalls the view.
        self.foreign = ownership.foreign_indexes(self.sink, self.view)
        self.owned_refusal = ownership.first_refused(
            (self.index(self.desired), self.index(self.active) if self.active else None),
            self.foreign)
        self.awaiting_promotion = False
        base = spec.spark.checkpoint_base
        self.checkpoint_problem = (None if base is None
                                   else durable_base_problem(base, self.cfg.in_cluster))
        # A schema or SQL Spark would refuse: no job starts for it, the active one serves on.
        self.spec_refusal = check_spec(spec)
        # What the platform's tenancy policy does not let this view's author choose: no job of
        # the view is created (a running one is left alone: the policy gates what starts).
        self.policy_refusal = self.tenancy_refusal()
        # A check's SQL the policy refuses: the candidate builds, but is never promoted on it.
        self.check_refusal = checks.refused_assertion(
            spec, self.index(self.desired), self.index(self.active) if self.active else None)
        self.checks_waiting = False
        self.blocked: SwitchBlocker | None = None
        # Jobs that cannot run until someone acts (driver blocked, suspended), by revision.
        self.job_problems: dict[str, Judgement] = {}
        self.shown_job_problem: tuple[str, Judgement] | None = None
        # Revisions whose job must not be created this pass (their stale index is dropped first).
        self.held: set[str] = set()

    # small helpers ----------------------------------------------------------------------------

    def index(self, revision: str) -> str:
        return naming.index_table(self.base, revision)

    def retire_after(self) -> dt.datetime:
        return self.now + dt.timedelta(seconds=self.spec.cutover.retain_previous_seconds)

    def follow_until(self, revision: str) -> dt.datetime | None:
        """Until when a replaced revision's job keeps following the log (None: stop it now):
        keepPreviousRunningSeconds, within the retain window, for a job that still runs."""
        cutover = self.spec.cutover
        keep = min(cutover.keep_previous_running_seconds, cutover.retain_previous_seconds)
        app = self.apps.get(revision)
        if keep <= 0 or self.paused or app is None or app.deleting or app.stopped:
            return None
        return self.now + dt.timedelta(seconds=keep)

    def following(self, revision: str) -> bool:
        """A retiring revision whose job still follows the log inside its follow window."""
        record = self.records[revision]
        app = self.apps.get(revision)
        return (record.phase == Phase.Retiring and record.follow_until is not None
                and self.now < record.follow_until and app is not None and not app.deleting
                and not app.stopped and not any(d.revision == revision for d in self.deletes))

    def set(self, revision: str, **changes: Any) -> RevisionStatus:
        """Update a record; entering a new phase stamps `since`."""
        current = self.records[revision]
        if "phase" in changes and changes["phase"] != current.phase:
            changes.setdefault("since", self.now)
        updated = current.model_copy(update=changes)
        self.records[revision] = updated
        return updated

    def event(self, reason: str, message: str, warning: bool = False) -> None:
        if not self.paused:
            self.events.append(EmitEvent(reason, _clip(message), "Warning" if warning else "Normal"))

    def index_exists(self, revision: str) -> bool | None:
        """None when the sink could not be asked."""
        return None if self.sink is None else self.index(revision) in self.sink.indexes

    def retry_requested(self, record: RevisionStatus) -> bool:
        """A failed job restarts only on a new spec generation or a new retry annotation value."""
        return (record.retry_token != self.retry_token
                or record.generation != self.view.generation)

    def checkpoint(self, revision: str, build: int) -> str:
        base = self.spec.spark.checkpoint_base or self.cfg.checkpoint_base
        return naming.checkpoint_location(base, self.view.namespace, self.view.name, revision,
                                          build)

    # effects (all no-ops while paused) ---------------------------------------------------------

    def delete_app(self, revision: str) -> None:
        app = self.apps.get(revision)
        if self.paused or app is None or app.deleting:
            return
        if all(d.name != app.name for d in self.deletes):
            self.deletes.append(DeleteSparkApplication(revision, app.name))

    def tenancy_refusal(self) -> PolicyRefusal | None:
        refusal = tenancy.spec_refusal(self.spec, self.cfg.tenancy,
                                       operator_image=self.cfg.spark_image,
                                       operator_main_file=self.cfg.main_application_file,
                                       namespace=self.view.namespace)
        for name in tenancy.secrets_of(self.spec):
            refusal = refusal or tenancy.secret_refusal(
                self.view.namespace, name, self.obs.secret_labels.get(name), self.cfg.tenancy)
        return refusal

    def create_app(self, revision: str) -> None:
        if self.paused or revision in self.apps or any(c.revision == revision
                                                       for c in self.creates):
            return
        if self.policy_refusal is not None:
            return
        if revision in self.obs.driver_pods:
            return  # the previous job's driver pod is still there: a new one would be refused
        if revision in self.held:
            return  # its lost index and ledger rows are dropped by this plan, after creates
        if self.index(revision) in self.foreign:
            return  # another view's index: the job would refuse it (or write into it)
        record = self.records[revision]
        if revision == self.desired:
            effective = self.spec
        elif record.content is not None:
            effective = with_content(self.spec, record.content)
        else:
            return  # a record from before contents were kept: nothing to render it from
        refused = check_spec(effective) if revision != self.desired else None
        if refused is not None and refused.reason == POLICY_VIOLATION:
            return  # an older revision's SQL the policy now refuses: it does not run again
        manifest = render_spark_application(
            self.cfg.spark_template, config=self.cfg, namespace=self.view.namespace,
            view=self.view.name, uid=self.view.uid, spec=effective, revision=revision,
            checkpoint_location=record.checkpoint_location)
        self.creates.append(CreateSparkApplication(revision, manifest["metadata"]["name"],
                                                   manifest))

    def drop_index(self, revision: str) -> bool:
        """Queue the drop unless the alias selects from it (now or after this plan's switch)."""
        if self.paused or self.sink is None:
            return False
        index = self.index(revision)
        if index not in self.sink.indexes or index in self.foreign:
            return False
        if index == self.sink.alias_target or any(s.to_index == index for s in self.switches):
            return False
        if all(d.index != index for d in self.drops):
            self.drops.append(DropIndex(self.schema, index, revision,
                                        owner_uid=self.view.uid))
        return True

    # observation of one revision ---------------------------------------------------------------

    def topics_of(self, revision: str) -> list[str]:
        record = self.records.get(revision)
        if record is not None and record.content is not None:
            return list(record.content.topics)
        return list(self.spec.source.topics) if revision == self.desired else []

    def position_of(self, revision: str) -> LedgerPosition | None:
        return None if self.sink is None else self.sink.ledger.get(revision)

    def lag_of(self, revision: str) -> Lag | None:
        topics = self.topics_of(revision)
        if self.obs.end_offsets is None or self.sink is None or not topics:
            return None
        return compute_lag(self.obs.end_offsets, topics, self.position_of(revision), self.now)

    def resets_of(self, revision: str) -> list[str]:
        """Partitions whose log fell below what the revision's index holds (see core.lag)."""
        if self.obs.end_offsets is None:
            return []
        return reset_partitions(self.obs.end_offsets, self.topics_of(revision),
                                self.position_of(revision))

    def missing_topics_of(self, revision: str) -> list[str]:
        return sorted(set(self.topics_of(revision)) & self.obs.missing_topics)

    def lost_cause(self, revision: str) -> str | None:
        """Why the revision's index no longer holds what its ledger claims (core.integrity)."""
        if self.sink is None:
            return None
        return integrity.lost_index_cause(self.index(revision), self.position_of(revision),
                                          self.sink.index_oids)

    def growth_cause(self, revision: str) -> str | None:
        """Why partition growth may have made the revision's index wrong (core.partition_growth)."""
        record = self.records.get(revision)
        if record is None:
            return None
        sql = (record.content.sql if record.content is not None
               else self.spec.transform.sql if revision == self.desired else None)
        return partition_growth.growth_cause(revision, sql, record.source_partitions,
                                             self.obs.end_offsets)

    def partitions_now(self, revision: str) -> dict[str, int] | None:
        if self.obs.end_offsets is None:
            return None
        counts = partition_growth.partition_counts(self.obs.end_offsets, self.topics_of(revision))
        return counts or None  # no topic described yet: record it on a later pass

    def gate_holds(self, revision: str, lag: Lag | None, running: bool) -> bool:
        """The lag gate on this reading, for a candidate and for a following retiring job:
        within the gate, its job running, no reset partition, its index there and whole."""
        return (within_gate(lag, self.spec.cutover) and running
                and not self.resets_of(revision) and bool(self.index_exists(revision))
                and self.lost_cause(revision) is None and self.growth_cause(revision) is None)

    def observe(self, revision: str) -> None:
        """Refresh job state and lag; for a building candidate, track the gate."""
        record = self.records[revision]
        app = self.apps.get(revision)
        changes: dict[str, Any] = {}
        replacing = any(d.revision == revision for d in self.deletes)
        if app is not None and not app.deleting and not replacing:
            changes.update(job_state=app.state or None, execution_attempts=app.execution_attempts)
            app_live = True
            judgement = judge(app)
            if judgement.kind in (Kind.BLOCKED, Kind.SUSPENDED):
                self.job_problems[revision] = judgement
        else:
            changes.update(job_state=None, execution_attempts=None)
            app_live = False
        lag = self.lag_of(revision)
        self.lags[revision] = lag
        if lag is not None:
            changes["lag"] = lag
        if self.sink is not None and revision in self.sink.ledger:
            changes["bad_records"] = self.sink.bad_records.get(revision, 0)
        if record.source_partitions is None:
            changes["source_partitions"] = self.partitions_now(revision)
        if record.phase in BUILDING and revision != self.active:
            running = app_live and app is not None and app.running
            committed = (self.sink is not None and revision in self.sink.ledger
                         and self.lost_cause(revision) is None)
            if lag is None:
                if record.phase == Phase.Pending and running:
                    changes["phase"] = Phase.Backfilling
            else:
                gate = self.gate_holds(revision, lag, running)
                changes["caught_up_since"] = (record.caught_up_since or self.now) if gate else None
                changes["phase"] = (Phase.CaughtUp if gate else
                                    Phase.Backfilling if running or committed else Phase.Pending)
        self.set(revision, **changes)

    # steps --------------------------------------------------------------------------------------

    def resume_cutover(self) -> None:
        """Finish a cutover whose alias switch landed but whose status update did not."""
        if self.sink is None or self.sink.alias_target is None:
            return
        intent = self.obs.status.intent
        for revision, record in list(self.records.items()):
            if revision == self.active or self.sink.alias_target != record.index:
                continue
            intended = intent is not None and intent.cutover_to == revision
            if intended or record.phase == Phase.CaughtUp:
                self.last_cutover = CutoverRecord(
                    from_revision=self.active, to_revision=revision, switched_at=self.now)
                self.finish_cutover(revision)
                return

    def finish_cutover(self, revision: str) -> None:
        old = self.active
        self.set(revision, phase=Phase.Active, reason="Promoted", message=None,
                 caught_up_since=None, retire_after=None)
        self.active = revision
        if old is not None and old != revision:
            follow_until = self.follow_until(old)
            self.set(old, phase=Phase.Retiring, retire_after=self.retire_after(),
                     follow_until=follow_until, reason="Replaced",
                     message=f"replaced by revision {revision}" + (
                         "; its job keeps following the log for a rollback until "
                         f"{follow_until.isoformat()}" if follow_until else ""),
                     caught_up_since=None, lag=None, job_state=None, execution_attempts=None)
            if follow_until is None:
                self.delete_app(old)
            self.event("CutoverCompleted",
                       f"Switched readers of {self.where} from revision {old} "
                       f"to {revision}.")
        else:
            self.event("CutoverCompleted",
                       f"Started serving revision {revision} as {self.where}.")

    def ensure_finalizer(self) -> None:
        if FINALIZER not in self.view.finalizers:
            self.finalizers_added.append(AddFinalizer(FINALIZER))

    def hold_sink_secret(self) -> None:
        """With deletionPolicy Delete, hold the sink Secret (a finalizer) so the cleanup can
        still connect while a namespace deletion removes everything; release one no longer
        needed (policy Retain, another secretRef)."""
        if self.sink is None:
            return  # the Secret could not be read (or the database not reached): not now
        held, wanted = set(self.held_secrets), set(self.secrets_for_cleanup())
        for name in sorted(held - wanted):
            self.secret_holds.append(ReleaseSecret(name))
        for name in sorted(wanted - held):
            self.secret_holds.append(HoldSecret(name))
        self.held_secrets = sorted(wanted)

    def secrets_for_cleanup(self) -> list[str]:
        """What deleting with deletionPolicy Delete reads: the sink Secret, and the checkpoint
        Secret when checkpoints on s3a:// are deleted with the operator's credentials."""
        if self.spec.deletion_policy != "Delete":
            return []
        names = {self.spec.sink.secret_ref.name}
        base = self.spec.spark.checkpoint_base or self.cfg.checkpoint_base
        if self.cfg.checkpoint_secret and is_s3a(base):
            names.add(self.cfg.checkpoint_secret)
        return sorted(names)

    def supersede_others(self) -> None:
        for revision, record in list(self.records.items()):
            if revision in (self.desired, self.active):
                continue
            if record.phase in BUILDING or (record.phase == Phase.Failed
                                            and not is_torn_down(record)):
                self.set(revision, phase=Phase.Superseded, reason="Superseded",
                         message=f"superseded by revision {self.desired} before cutover",
                         caught_up_since=None, lag=None, content=None, job_state=None,
                         execution_attempts=None)
                self.event("Superseded", f"Superseded candidate revision {revision} by "
                                         f"{self.desired} before cutover.")

    def start_desired(self) -> None:
        """Make sure the spec's revision has a record that is building (or stays Failed)."""
        revision = self.desired
        if (revision == self.active or self.checkpoint_problem is not None
                or self.spec_refusal is not None or self.policy_refusal is not None):
            return  # (a revision keeps the checkpoint location it starts with: not a bad one,
            # nor one the policy refuses)
        record = self.records.get(revision)
        if record is None:
            self.start_new(revision)
        elif record.phase == Phase.Retiring and self.following(revision):
            self.switch_back(revision)
        elif record.phase == Phase.Retiring:
            self.restart(revision, rollback=True)
        elif record.phase in (Phase.Superseded, Phase.Retired) or (
                record.phase == Phase.Failed and self.retry_requested(record)):
            self.restart(revision, rollback=False)

    def start_new(self, revision: str) -> None:
        build = (self.spent_builds[revision] + 1 if revision in self.spent_builds
                 else self.spent_builds_floor)
        exists = self.index_exists(revision)
        if build > 0 and exists is not False:
            # A rebuild needs a fresh index; an unknown or stale one must go first.
            self.drop_index(revision)
            return
        if exists is False and self.position_of(revision) is not None:
            self.purge(revision)  # ledger rows of a lost table: the new job would refuse them
            return
        self.spent_builds.pop(revision, None)  # the record carries the build from now on
        self.records[revision] = RevisionStatus(
            revision=revision, index=self.index(revision), phase=Phase.Pending, since=self.now,
            spark_application=naming.spark_application_name(self.view.name, revision),
            checkpoint_location=self.checkpoint(revision, build), content=content_of(self.spec),
            build=build, started_at=self.now, generation=self.view.generation,
            retry_token=self.retry_token, reason="BackfillStarted",
            source_partitions=self.partitions_now(revision))
        if exists:
            self.event("BackfillStarted", f"Resumed revision {revision} into its existing index "
                                          f"{self.index(revision)} from its checkpoint.")
        else:
            self.event("BackfillStarted", f"Started replaying revision {revision} from offset 0 "
                                          f"into index {self.index(revision)}.")

    def switch_back(self, revision: str) -> None:
        """Roll back to a revision whose job never stopped following the log: it is a
        candidate again at once, its gate record intact, so it is promoted as soon as the
        gate (and any checks) hold, without a job start or a replay."""
        self.set(revision, phase=Phase.Backfilling, reason="RollbackStarted",
                 message="its job kept following the log; no restart, no replay",
                 started_at=self.now, generation=self.view.generation,
                 retry_token=self.retry_token, content=content_of(self.spec),
                 retire_after=None, follow_until=None)
        self.event("RollbackStarted", f"Rolling back to revision {revision}, whose job kept "
                                      "following the log.")

    def restart(self, revision: str, *, rollback: bool) -> None:
        """Resume a known revision from its checkpoint if its index is still there, else
        rebuild it from offset 0 with a fresh checkpoint."""
        record = self.records[revision]
        exists = self.index_exists(revision)
        if exists is None:
            return  # cannot tell resume from rebuild without the sink
        app = self.apps.get(revision)
        common: dict[str, Any] = dict(
            phase=Phase.Pending, started_at=self.now, generation=self.view.generation,
            retry_token=self.retry_token, content=content_of(self.spec), caught_up_since=None,
            retire_after=None, lag=None, job_state=None, execution_attempts=None)
        if exists:
            if app is not None and app.stopped:
                self.delete_app(revision)  # a stopped job is resubmitted as a new object
            if rollback:
                self.set(revision, reason="RollbackStarted",
                         message="resuming from its checkpoint; no replay from offset 0",
                         **common)
                self.event("RollbackStarted", f"Resumed retained revision {revision} from its "
                                              "checkpoint to roll back.")
            else:
                self.set(revision, reason="Resumed", message="resuming from its checkpoint",
                         **common)
                self.event("Resumed", f"Resumed revision {revision} from its checkpoint.")
            return
        if app is not None:
            self.delete_app(revision)  # it runs on the spent checkpoint
        if self.position_of(revision) is not None:
            # Its table is gone but its ledger rows are not: the new job would refuse to
            # start on them. Drop them first; rebuild on a later pass.
            if app is None and revision not in self.obs.driver_pods:
                self.purge(revision)
            return
        build = record.build + 1
        self.set(revision, reason="BackfillStarted", message="rebuilding from offset 0",
                 build=build, checkpoint_location=self.checkpoint(revision, build),
                 source_partitions=self.partitions_now(revision), **common)
        self.event("BackfillStarted", f"Started rebuilding revision {revision} from offset 0 "
                                      f"into index {self.index(revision)}.")

    def purge(self, revision: str) -> None:
        """Drop the revision's index table (if any) with its ledger rows, and hold its job back
        this pass. Never the alias's target."""
        if self.paused or self.sink is None:
            return
        index = self.index(revision)
        if index == self.sink.alias_target or any(s.to_index == index for s in self.switches):
            return
        if index in self.foreign:
            return  # another view's index and ledger rows
        self.held.add(revision)
        if all(d.index != index for d in self.drops):
            self.drops.append(DropIndex(self.schema, index, revision,
                                        owner_uid=self.view.uid))

    def rebuild_lost_candidate(self) -> None:
        """A building candidate whose index lost batches its ledger claims is rebuilt from
        offset 0 (a new build, a fresh checkpoint), never promoted: stop its job, drop the
        table and ledger rows once the job is gone, then start again."""
        revision = self.desired
        record = self.records.get(revision)
        if revision == self.active or record is None or record.phase not in BUILDING:
            return
        cause = self.lost_cause(revision)
        if cause is None:
            if record.reason == integrity.INDEX_LOST and revision in self.apps:
                self.set(revision, reason="BackfillStarted")  # rebuilding; a new loss counts anew
            return
        if record.reason != integrity.INDEX_LOST:
            build = record.build + 1
            self.set(revision, phase=Phase.Pending, reason=integrity.INDEX_LOST,
                     message=_clip(f"{cause}; rebuilding from offset 0 (build {build}); it is "
                                   "not promoted before the rebuild catches up"),
                     build=build, checkpoint_location=self.checkpoint(revision, build),
                     started_at=self.now, caught_up_since=None, lag=None, job_state=None,
                     execution_attempts=None, source_partitions=self.partitions_now(revision))
            self.event(integrity.INDEX_LOST, f"Rebuilding candidate revision {revision} from "
                                             f"offset 0: {cause}.", warning=True)
        self.delete_app(revision)
        self.held.add(revision)
        if revision not in self.apps and revision not in self.obs.driver_pods:
            self.purge(revision)

    def progress_desired(self) -> None:
        """Job, failure, deadline, lag gate and promotion of the spec's revision."""
        revision = self.desired
        record = self.records.get(revision)
        if revision == self.active or record is None or record.phase not in BUILDING:
            return
        app = self.apps.get(revision)
        replacing = any(d.revision == revision for d in self.deletes)
        if not replacing and app is not None and not app.deleting and app.stopped:
            ended = judge(app)  # the driver's termination message when there is one
            reason, detail = ended.reason, ended.message
            self.set(revision, phase=Phase.Failed, reason=reason, message=_clip(detail),
                     caught_up_since=None, job_state=app.state,
                     execution_attempts=app.execution_attempts,
                     retry_token=self.retry_token, generation=self.view.generation)
            self.event(reason, f"Stopped waiting for revision {revision}: its job ended "
                               f"({app.state}): {detail}", warning=True)
            return
        verdict = deadline_verdict(self.spec.cutover, record.started_at,
                                   self.position_of(revision), self.lag_of(revision), self.now)
        if not self.paused and verdict is not None:
            reason, message = verdict
            self.set(revision, phase=Phase.Failed, reason=reason, message=message,
                     caught_up_since=None, lag=None, content=None, job_state=None,
                     execution_attempts=None, retry_token=self.retry_token,
                     generation=self.view.generation)
            self.delete_app(revision)
            self.event(reason, f"Aborted candidate revision {revision}: {message}.", warning=True)
            return
        if app is None and not replacing and not self.missing_topics_of(revision):
            self.create_app(revision)
        self.observe(revision)
        self.take_checks_run(revision)
        record = self.records[revision]
        lag = self.lags.get(revision)
        if record.phase != Phase.CaughtUp or lag is None or record.caught_up_since is None:
            return
        stable = (seconds_between(record.caught_up_since, self.now)
                  >= self.spec.cutover.stable_for_seconds)
        if stable and not self.checks_pass(record):
            self.checks_waiting = True
            return  # failing or not yet run: not promoted, not even on the annotation
        approved = (self.active is None or self.spec.cutover.mode == "auto"
                    or self.promote_to == revision)
        if stable and not approved:
            self.awaiting_promotion = True
        if stable and approved and not self.paused and self.sink is not None:
            self.blocked = switch_guard.blocker(self.sink, self.index(revision))
            if self.blocked is not None:
                told = switch_guard.announcement(self.blocked, revision, self.obs.status)
                if told:
                    self.event(self.blocked.reason, told, warning=True)
                return
            if self.index(revision) in self.foreign:
                return
            self.switches.append(SwitchAlias(self.schema, self.alias, self.index(revision),
                                             self.sink.alias_target))
            self.cutover = (revision, self.active)
            self.last_cutover = CutoverRecord(
                from_revision=self.active, to_revision=revision, switched_at=self.now,
                gate_held_at=record.caught_up_since + dt.timedelta(
                    seconds=self.spec.cutover.stable_for_seconds))
            self.finish_cutover(revision)

    def take_checks_run(self, revision: str) -> None:
        """Record this pass's run of the candidate's checks; one event when the outcome (or
        which checks fail) changes, not one per run."""
        taken = self.obs.checks_run
        if taken is None or taken[0] != revision:
            return
        record = self.records[revision]
        run = taken[1]
        before = checks.shown_run(self.spec, record.checks, record.caught_up_since,
                                  record.started_at)
        self.set(revision, checks=run)
        if run.passed:
            if before is None or not before.passed:
                shown = checks.summary(run)
                self.event("ChecksPassed", f"Cutover checks of revision {revision}: {shown}.")
            return
        reason, text = checks.failure_text(run)
        # by the failing checks, not their words: a sample's examples differ on every run
        told = None if before is None else [(r.name, r.outcome) for r in before.failing()]
        if told != [(r.name, r.outcome) for r in run.failing()]:
            self.event(reason, f"Revision {revision} is not promoted: {text}.", warning=True)

    def checks_pass(self, record: RevisionStatus) -> bool:
        """No checks, or a passing run of the spec's checks made while the gate held."""
        if checks.checks_of(self.spec) is None:
            return True
        run = checks.current_run(self.spec, record.checks, record.caught_up_since)
        return self.check_refusal is None and run is not None and run.passed

    def apply_job_settings(self) -> None:
        """Restart running jobs whose job settings changed, from their checkpoints: no replay."""
        wanted = job_settings_of(self.spec)
        # the active first, then the candidate: a plan's actions come in a fixed order
        for revision in dict.fromkeys(r for r in (self.active, self.desired) if r is not None):
            record, app = self.records.get(revision), self.apps.get(revision)
            if (record is None or app is None or app.deleting or app.stopped
                    or not app.job_settings or app.job_settings == wanted
                    or not (record.phase in BUILDING or revision == self.active)):
                continue
            self.delete_app(revision)
            self.event("JobRestarted", f"Restarted the job of revision {revision} from its "
                                       "checkpoint to apply changed job settings (spec.spark or "
                                       "the Kafka connection).")

    def maintain_active(self) -> None:
        """Keep the served index following the log, and the alias on it."""
        revision = self.active
        if revision is None:
            return
        self.observe(revision)
        record = self.records[revision]
        if self.sink is not None and not self.switches and not self.paused:
            target = self.sink.alias_target
            if (target != record.index and record.index in self.sink.indexes
                    and record.index not in self.foreign and self.lost_cause(revision) is None):
                self.switches.append(SwitchAlias(self.schema, self.alias, record.index, target))
                self.event("AliasRepaired", f"Pointed {self.where} back at index "
                                            f"{record.index} (it selected from "
                                            f"{target or 'nothing'}).", warning=True)
        app = self.apps.get(revision)
        if app is not None and app.deleting:
            return
        failed = record.reason in (JOB_FAILED, JOB_COMPLETED)
        if failed and self.paused:
            return
        if failed and self.retry_requested(record):
            self.delete_app(revision)
            self.set(revision, reason="Promoted", message=None, retry_token=self.retry_token,
                     generation=self.view.generation, job_state=None, execution_attempts=None)
            self.event("RetryStarted", f"Restarted the job of active revision {revision} from "
                                       "its checkpoint.")
            if app is None:
                self.create_app(revision)
            return
        if app is None:
            if not failed:
                self.create_app(revision)
            return
        if app.stopped and not failed:
            ended = judge(app)
            reason, detail = ended.reason, ended.message
            self.set(revision, reason=reason, message=_clip(detail),
                     retry_token=self.retry_token, generation=self.view.generation)
            self.event(reason, f"The job of active revision {revision} stopped ({app.state}): "
                               f"{detail}; the index no longer follows the log.", warning=True)

    def retire_and_tear_down(self) -> None:
        for revision, record in list(self.records.items()):
            if revision == self.active or (revision == self.desired
                                           and record.phase in BUILDING):
                continue
            if record.phase == Phase.Retiring and self.following(revision):
                self.track_follower(revision)
                continue
            if record.phase == Phase.Retiring:
                if record.follow_until is not None:
                    self.set(revision, follow_until=None, caught_up_since=None, lag=None,
                             job_state=None, execution_attempts=None)
                self.delete_app(revision)
                due = record.retire_after is None or record.retire_after <= self.now
                if not due or self.sink is None or revision in self.apps:
                    continue
                if self.index_exists(revision) and not self.drop_index(revision):
                    continue  # the alias still selects from it: not yet
                self.set(revision, phase=Phase.Retired, reason="Retired",
                         message="index dropped after the retention period", content=None)
                self.event("Retired", f"Dropped index {record.index} of revision {revision} "
                                      "after its retention period.")
            elif is_torn_down(record):
                self.delete_app(revision)
                if revision not in self.apps:
                    self.drop_index(revision)
        for revision in sorted(self.apps):
            if revision not in self.records and revision != self.desired:
                self.delete_app(revision)  # an orphan of this view (e.g. a pruned record)

    def track_follower(self, revision: str) -> None:
        """A following revision's lag and the start of its run within the gate, so that a
        rollback finds it already stable."""
        record = self.records[revision]
        app = self.apps.get(revision)
        lag = self.lag_of(revision)
        gate = self.gate_holds(revision, lag, app is not None and app.running)
        self.set(revision, lag=lag, job_state=(app.state or None) if app is not None else None,
                 caught_up_since=(record.caught_up_since or self.now) if gate else None)

    def prune(self) -> None:
        """Keep the newest `history_limit` finished records; remember the builds of the rest."""
        finished = [r for r in self.records.values()
                    if r.phase in FINISHED and r.revision not in (self.desired, self.active)
                    and is_torn_down(r)]
        finished.sort(key=lambda r: (r.since, r.revision), reverse=True)
        for record in finished[self.cfg.history_limit:]:
            gone = (record.revision not in self.apps and self.sink is not None
                    and self.index(record.revision) not in self.sink.indexes)
            if gone:
                previous = self.spent_builds.get(record.revision, -1)
                self.spent_builds[record.revision] = max(previous, record.build)
                del self.records[record.revision]

    # deletion ------------------------------------------------------------------------------------

    def deletion(self) -> list[Action]:
        if FINALIZER not in self.view.finalizers:
            return []  # nothing of ours holds the object
        for revision in sorted(self.apps):
            self.delete_app(revision)
        done = False
        assert self.view.deletion_timestamp is not None
        waited = seconds_between(self.view.deletion_timestamp, self.now)
        grace_over = waited >= self.cfg.deletion_sink_grace_seconds
        if self.spec.deletion_policy == "Retain":
            done = True
            message = (f"Stopped the view's jobs; kept {self.where} and its "
                       "indexes (deletionPolicy Retain).")
        elif self.claimed_by is not None:
            done = not self.apps
            message = (f"Stopped the view's jobs; left {self.where} and its "
                       f"indexes to DerivedView {self.claimed_by}, which owns them.")
        elif self.sink is not None and self.sink.drop_blockers:
            done, message = self.deletion_blocked(self.sink.drop_blockers, grace_over)
        elif self.sink is not None:
            if not self.apps:
                if self.sink.alias_target is not None:
                    self.drop_aliases.append(DropAlias(self.schema, self.alias))
                for index in sorted(self.sink.indexes - set(self.foreign)):
                    owner = naming.index_revision(self.base, index)
                    if owner is not None:
                        self.drops.append(DropIndex(self.schema, index, owner,
                                                      owner_uid=self.view.uid))
                done = True
            message = (f"Stopped the view's jobs and dropped {self.where} and "
                       f"{len(self.sink.indexes - set(self.foreign))} index(es) "
                       "(deletionPolicy Delete)"
                       + (f"; left {', '.join(sorted(self.foreign))} to the view(s) that own "
                          "them" if self.foreign else "") + ".")
        else:
            reason, detail = self.obs.sink_problem or ("SinkUnreachable", "sink unreachable")
            # A Secret that is gone or unusable does not come back by waiting; a database that
            # does not answer may (a restart): it gets the grace period.
            done = reason != "SinkUnreachable" or grace_over
            message = "Stopped the view's jobs."
            if done:
                kept = [r.index for r in self.records.values() if not is_torn_down(r)]
                self.event(deletion.LEFT_BEHIND,
                           f"Released the view without dropping its alias and indexes "
                           f"(deletionPolicy Delete): {detail}"
                           + (f" for {waited}s" if reason == "SinkUnreachable" else "") + "; "
                           + deletion.left_behind(self.schema, self.alias, kept,
                                                  self.cfg.ledger_table) + ".", warning=True)
        if done:
            # also what the spec would hold: a status that lost its record must not leave a
            # Secret held for good (the shell keeps a hold another view still records)
            for held in sorted(set(self.held_secrets) | set(self.secrets_for_cleanup())):
                self.secret_holds.append(ReleaseSecret(held))
            self.event("Deleted", message)
            self.finalizers_removed.append(RemoveFinalizer(FINALIZER))
        return self.assemble(deleting=True)

    def deletion_blocked(self, blockers: tuple[str, ...], grace_over: bool) -> tuple[bool, str]:
        """Others' views (functions, ...) read the alias or an index: DROP ... CASCADE would
        drop them too, silently and for good, so nothing is dropped. The deletion waits the
        grace period for someone to drop or re-point them, then releases the view and leaves
        the tables, saying which."""
        names = deletion.dependents_text(blockers)
        verb = "depends" if len(set(blockers)) == 1 else "depend"
        if self.apps:
            return False, ""
        if grace_over:
            self.event(deletion.LEFT_BEHIND,
                       f"Released the view without dropping its alias and indexes "
                       f"(deletionPolicy Delete): {names} {verb} on them; "
                       + deletion.left_behind(self.schema, self.alias, self.sink.indexes
                                              if self.sink else (), self.cfg.ledger_table)
                       + ".", warning=True)
            return True, "Stopped the view's jobs."
        self.deletion_problem = cond.Verdict(
            "True", deletion.DELETION_BLOCKED,
            f"{names} {verb} on {self.where} or its indexes: drop or re-point "
            f"them (nothing is dropped with CASCADE); after "
            f"{self.cfg.deletion_sink_grace_seconds}s from the deletion the view is released "
            "and its alias and indexes are left in place")
        before = self.obs.status.condition(cond.STALLED)
        if before is None or before.reason != deletion.DELETION_BLOCKED:
            self.event(deletion.DELETION_BLOCKED,
                       f"Not dropping {self.where} and its indexes: "
                       f"{self.deletion_problem.message}.", warning=True)
        return False, ""

    # result -----------------------------------------------------------------------------------

    def run(self) -> list[Action]:
        if self.view.deletion_timestamp is not None:
            return self.deletion()
        if self.claimed_by is not None:
            for revision in sorted(self.apps):
                self.delete_app(revision)  # they would write into the other view's tables
            return self.assemble(deleting=False)
        if self.owned_refusal is not None:
            for revision in sorted(self.apps):
                if self.index(revision) in self.foreign:
                    self.delete_app(revision)  # the job refuses it: do not keep restarting it
            return self.assemble(deleting=False)
        self.resume_cutover()
        if not self.paused:
            self.ensure_finalizer()
            self.hold_sink_secret()
            self.supersede_others()
            self.start_desired()
            self.rebuild_lost_candidate()
            self.apply_job_settings()
        self.progress_desired()
        self.maintain_active()
        self.retire_and_tear_down()
        self.prune()
        return self.assemble(deleting=False)

    def verdicts(self, deleting: bool) -> dict[str, cond.Verdict]:
        desired, active = self.desired, self.active
        record = self.records.get(desired)
        candidate = record if desired != active else None
        active_record = self.records.get(active) if active else None
        lag = self.lags.get(desired)
        lag_text = _lag_text(lag, self.spec)
        V = cond.Verdict
        serving = [r for r in (active, desired) if r is not None]
        missing = sorted({t for r in serving for t in self.missing_topics_of(r)})
        resets = {r: self.resets_of(r) for r in dict.fromkeys(serving)}

        problem: cond.Verdict | None = None
        if self.deletion_problem is not None:
            problem = self.deletion_problem
        elif self.checkpoint_problem is not None:
            problem = V("True", "CheckpointNotDurable",
                        f"spec.spark.checkpointBase: {self.checkpoint_problem}; remove it to use "
                        "the operator's base, or name a store every pod reaches")
        elif self.policy_refusal is not None:
            problem = V("True", self.policy_refusal.reason,
                        f"{self.policy_refusal.message}; no job of this view starts until then"
                        + (f", revision {active} keeps serving" if active else ""))
        elif self.spec_refusal is not None and desired != active:
            refused = self.spec_refusal.message.rstrip(".")
            problem = V("True", self.spec_refusal.reason,
                        f"{refused}; no job is started for revision {desired}"
                        + (f", revision {active} keeps serving" if active else ""))
        elif self.check_refusal is not None and desired != active:
            name, why = self.check_refusal
            problem = V("True", POLICY_VIOLATION,
                        f"cutover.checks.assertions {name}: {why.rstrip('.')}; revision "
                        f"{desired} is not promoted until the check is fixed (no replay needed)"
                        + (f", revision {active} keeps serving" if active else ""))
        elif self.claimed_by is not None:
            problem = V("True", "SinkTableClaimed",
                        f"{self.where} belongs to DerivedView {self.claimed_by}; "
                        "two views cannot share an alias: choose another "
                        f"{self.base_field}")
        elif self.owned_refusal is not None:
            index, owner = self.owned_refusal
            problem = V("True", ownership.INDEX_OWNED_BY_ANOTHER_VIEW, ownership.refusal_message(
                index, owner, self.view, self.where, self.base_field,
                active if self.active and self.index(self.active) not in self.foreign else None))
        elif self.sink is None and self.obs.sink_problem is not None:
            reason, detail = self.obs.sink_problem
            problem = V("True", reason, f"{detail}; nothing is switched or dropped until the "
                                        "sink can be read")
        elif self.obs.end_offsets is None and self.obs.source_problem is not None:
            reason, detail = self.obs.source_problem
            problem = V("True", reason, f"{detail}; lag is unknown, so no revision is promoted")
        elif missing:
            problem = V("True", TOPIC_MISSING,
                        f"topic(s) {', '.join(missing)} not found on "
                        f"{self.spec.source.kafka.bootstrap_servers}: create them or fix "
                        "spec.source.topics; no job reads a topic that does not exist")
        elif any(resets.values()):
            reset_revision = next(r for r, parts in resets.items() if parts)
            problem = V("True", TOPIC_RESET,
                        f"the log is behind the index of revision {reset_revision} on "
                        f"{', '.join(resets[reset_revision])} (end offset below the committed "
                        "one): the topic was deleted and recreated or truncated, so that index "
                        "holds records the log no longer has and is never treated as caught "
                        "up; change the view's content to rebuild from the new log")
        elif active is not None and (lost := self.lost_cause(active)) is not None:
            problem = V("True", integrity.INDEX_LOST,
                        f"active revision {active}: {lost}; {self.where} "
                        + ("serves the incomplete table" if self.sink is not None
                           and self.sink.alias_target == self.index(active) else
                           "serves nothing")
                        + " and is not repaired onto it; apply a new revision (any change to "
                          "the view's content) to rebuild beside it, or roll back to a retained "
                          "revision")
        elif (grown := next((c for r in dict.fromkeys(serving)
                             if (c := self.growth_cause(r)) is not None), None)) is not None:
            problem = V("True", partition_growth.PARTITIONS_GREW, grown)
        elif candidate is not None and candidate.phase == Phase.Failed:
            problem = V("True", candidate.reason or JOB_FAILED,
                        f"revision {desired}: {candidate.message or 'failed'}; "
                        + (f"revision {active} keeps serving" if active else "nothing serves")
                        + f"; set a new value of {RETRY_ANNOTATION} or change the spec to retry")
        elif (failing := self.failing_checks(candidate)) is not None:
            reason, text = failing
            problem = V("True", reason,
                        f"revision {desired} is not promoted: {text}; "
                        + (f"revision {active} keeps serving" if active else "nothing serves")
                        + "; fix the transform (a new revision) or the check (re-run, no replay)")
        elif active_record is not None and active_record.reason in (JOB_FAILED, JOB_COMPLETED):
            problem = V("True", active_record.reason,
                        f"the job of active revision {active} stopped: {active_record.message}; "
                        "the index no longer follows the log")
        elif (active_record is not None and self.sink is not None
              and active_record.index not in self.sink.indexes):
            problem = V("True", "IndexMissing",
                        f"index {active_record.index} of active revision {active} is missing")

        building = candidate is not None and candidate.phase in BUILDING
        job_problem = None if problem is not None or deleting else self.job_problem(building)
        if deleting:
            reconciling = V("True", "Deleting", "the view is being deleted")
        elif self.paused:
            reconciling = V("False", "Paused", f"{PAUSED_ANNOTATION} is true: no actions are taken")
        elif building and candidate is not None:
            reason = ("AwaitingPromotion" if self.awaiting_promotion else
                      "Checking" if self.checks_waiting else
                      "CaughtUp" if candidate.phase == Phase.CaughtUp else "Backfilling")
            message = f"revision {desired} is {candidate.phase.value.lower()}: {lag_text}"
            if self.checks_waiting:
                message += f"; cutover checks: {self.checks_column(candidate)}"
            if self.awaiting_promotion:
                message += f"; annotate {PROMOTE_ANNOTATION}={desired} to switch readers"
            reconciling = V("True", reason, message)
        elif desired != active and candidate is None and self.policy_refusal is not None:
            reconciling = V("False", self.policy_refusal.reason,
                            f"revision {desired} is refused")
        elif desired != active and candidate is None and self.spec_refusal is not None:
            reconciling = V("False", self.spec_refusal.reason, f"revision {desired} is refused")
        elif desired != active and candidate is None:
            reconciling = V("True", "Starting", f"revision {desired} is about to start")
        else:
            # Also right after a cutover: this status is written only once the
            # switch has succeeded, so nothing is left in progress.
            reconciling = V("False", "Reconciled", "")

        switched = self.switches[-1].to_index if self.switches else (
            self.sink.alias_target if self.sink is not None else None)
        if deleting:
            ready = V("False", "Deleting", "the view is being deleted")
        elif problem is not None:
            ready = V("False", problem.reason, problem.message)
        elif job_problem is not None and active is None:
            ready = V("False", job_problem.reason, f"nothing serves yet: {job_problem.message}")
        elif self.sink is None:
            ready = V("Unknown", "SinkUnreachable", "could not ask the sink where the alias points")
        elif active is None:
            ready = V("False", reconciling.reason if building else "Pending",
                      f"nothing serves yet: {reconciling.message or 'waiting'}")
        elif switched != self.index(active):
            ready = V("False", "AliasMisdirected",
                      f"{self.where} does not select from {self.index(active)}")
        elif active != desired:
            ready = V("False", reconciling.reason,
                      f"revision {active} serves while {reconciling.message}")
        else:
            ready = V("True", "Serving", f"{self.where} serves revision {active} "
                                         f"from {self.index(active)}")

        if lag is None:
            caught_up = V("Unknown", "LagUnknown", f"revision {desired}: lag unknown")
        elif within_gate(lag, self.spec.cutover) and not resets.get(desired):
            caught_up = V("True", "LagWithinGate", f"revision {desired}: {lag_text}")
        else:
            caught_up = V("False", "LagAboveGate", f"revision {desired}: {lag_text}")

        calm = V("False", "AsExpected", "")
        trouble = problem or job_problem
        return {cond.READY: ready, cond.RECONCILING: reconciling,
                cond.STALLED: trouble or calm, cond.CAUGHT_UP: caught_up,
                cond.DEGRADED: trouble or calm}

    def failing_checks(self, candidate: RevisionStatus | None) -> tuple[str, str] | None:
        """(reason, text) while the building candidate's shown check run fails."""
        if candidate is None or candidate.phase not in BUILDING:
            return None
        run = checks.shown_run(self.spec, candidate.checks, candidate.caught_up_since,
                               candidate.started_at)
        return None if run is None or run.passed else checks.failure_text(run)

    def checks_column(self, candidate: RevisionStatus | None) -> str | None:
        """The CHECKS column: only while a candidate is built under checks."""
        if (candidate is None or candidate.phase not in BUILDING
                or checks.checks_of(self.spec) is None):
            return None
        return checks.summary(checks.shown_run(self.spec, candidate.checks,
                                               candidate.caught_up_since, candidate.started_at))

    def job_problem(self, building: bool) -> cond.Verdict | None:
        """A job that cannot run until someone acts: the served revision's first, then the
        building candidate's. Nothing is torn down: the job runs once the cause is fixed."""
        for revision in (self.active, self.desired if building else None):
            judgement = None if revision is None else self.job_problems.get(revision)
            if revision is not None and judgement is not None:
                self.shown_job_problem = (revision, judgement)
                return cond.Verdict("True", judgement.reason,
                                    f"revision {revision}: {judgement.message}")
        return None

    def announce_job_problem(self, degraded: cond.Verdict) -> None:
        """One event when a blocked or suspended job becomes the view's shown problem (or its
        cause changes), not one per pass."""
        if self.shown_job_problem is None:
            return
        revision, judgement = self.shown_job_problem
        before = self.obs.status.condition(cond.DEGRADED)
        if before is not None and (before.status, before.reason, before.message) == (
                degraded.status, degraded.reason, degraded.message):
            return
        reason = DRIVER_PENDING if judgement.kind == Kind.BLOCKED else judgement.reason
        self.event(reason, f"The job of revision {revision} cannot run: {judgement.message}.",
                   warning=True)

    def announce_integrity(self, degraded: cond.Verdict) -> None:
        """One warning event when the view becomes Degraded for a lost index or partition
        growth (or the cause changes), not one per pass."""
        if degraded.reason not in (integrity.INDEX_LOST, partition_growth.PARTITIONS_GREW):
            return
        before = self.obs.status.condition(cond.DEGRADED)
        if before is None or (before.reason, before.message) != (degraded.reason,
                                                                 degraded.message):
            self.event(degraded.reason, degraded.message, warning=True)

    def summary(self, deleting: bool) -> tuple[ViewPhase, ActiveStatus | None,
                                               CandidateStatus | None]:
        active_record = self.records.get(self.active) if self.active else None
        active = None if active_record is None else ActiveStatus(
            revision=active_record.revision, index=active_record.index,
            since=active_record.since, lag=status_size.bounded_detail(active_record.lag),
            bad_records=active_record.bad_records)
        record = self.records.get(self.desired)
        candidate = None
        if record is not None and self.desired != self.active and (
                record.phase in BUILDING or record.phase == Phase.Failed):
            candidate = CandidateStatus(
                revision=record.revision, index=record.index, phase=record.phase,
                since=record.since, lag=status_size.bounded_detail(record.lag),
                caught_up_since=record.caught_up_since,
                message=record.message, bad_records=record.bad_records,
                checks=checks.shown_run(self.spec, record.checks, record.caught_up_since,
                                        record.started_at))
        if deleting:
            phase = ViewPhase.Deleting
        elif candidate is not None:
            phase = ViewPhase(candidate.phase.value)
        elif active is not None and self.active == self.desired:
            phase = ViewPhase.Active
        else:
            phase = ViewPhase.Pending
        return phase, active, candidate

    def lag_history(self, history: list[LagSample], active: ActiveStatus | None,
                    candidate: CandidateStatus | None) -> list[LagSample]:
        """Append the served and the building revision's lag when it changed, spaced and
        bounded by config.  An unchanged lag adds nothing (a sample holds until the next one,
        as `dv plot` draws it), so an idle view's status is not patched at all."""
        samples = list(history)
        for shown in (active, candidate):
            if shown is None or shown.lag is None:
                continue
            last = next((s for s in reversed(samples) if s.revision == shown.revision), None)
            if last is not None and (
                    seconds_between(last.time, self.now) < self.cfg.lag_history_seconds
                    or (last.messages, last.seconds) == (shown.lag.messages, shown.lag.seconds)):
                continue
            samples.append(LagSample(time=self.now, revision=shown.revision,
                                     messages=shown.lag.messages, seconds=shown.lag.seconds))
        return samples[-self.cfg.lag_history_limit:] if self.cfg.lag_history_limit else []

    def assemble(self, deleting: bool) -> list[Action]:
        previous = self.obs.status
        phase, active, candidate = self.summary(deleting)
        shown = shown_lag(active, candidate)
        verdicts = self.verdicts(deleting)
        self.announce_job_problem(verdicts[cond.DEGRADED])
        spent_builds, spent_floor = status_size.bounded_spent_builds(self.spent_builds,
                                                                     self.spent_builds_floor)
        self.announce_integrity(verdicts[cond.DEGRADED])
        status = DerivedViewStatus(
            observed_generation=self.view.generation, phase=phase, revision=self.desired,
            active=active, candidate=candidate, lag_messages=shown.messages if shown else None,
            bad_records=shown_bad_records(active, candidate),
            checks=self.checks_column(self.records.get(self.desired)
                                      if self.desired != self.active else None),
            revisions=[status_size.record_without_detail(r) for r in self.records.values()],
            spent_builds=spent_builds, spent_builds_floor=spent_floor or None,
            held_secrets=self.held_secrets,
            conditions=cond.build_conditions(
                switch_guard.overlay(verdicts, self.blocked, self.desired),
                previous.conditions, self.now, self.view.generation),
            intent=None, last_cutover=self.last_cutover or previous.last_cutover,
            lag_history=self.lag_history(previous.lag_history, active, candidate))
        effects: list[Action] = [*self.finalizers_added, *self.switches, *self.deletes,
                                 *self.creates, *self.drop_aliases, *self.drops,
                                 *self.secret_holds]
        actions: list[Action] = []
        if effects:
            intent = Intent(steps=[describe(a) for a in [*effects, *self.finalizers_removed]],
                            cutover_to=self.cutover[0] if self.cutover else None,
                            cutover_from=self.cutover[1] if self.cutover else None,
                            recorded_at=self.now)
            actions.append(RecordIntent(intent, {"intent": _dump(intent)}))
            actions.extend(effects)
        patch = merge_patch(_dump(previous), _dump(status))
        if effects:
            patch["intent"] = None  # RecordIntent wrote one; this pass has carried it out
        if patch and not self.finalizers_removed:
            actions.append(UpdateStatus(status, patch))
        actions.extend(self.events)
        actions.extend(self.finalizers_removed)
        return actions


def shown_bad_records(active: ActiveStatus | None, candidate: CandidateStatus | None
                      ) -> int | None:
    """The BAD column: the same revision as the LAG column (the candidate's while built)."""
    shown = candidate if candidate is not None else active
    return shown.bad_records if shown is not None else None


def _dump(model: DerivedViewStatus | Intent) -> dict[str, Any]:
    dumped: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped
