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
)
from derived_views.core import conditions as cond
from derived_views.core.actions import (
    Action,
    AddFinalizer,
    CreateSparkApplication,
    DeleteSparkApplication,
    DropAlias,
    DropIndex,
    HoldSecret,
    RecordIntent,
    ReleaseSecret,
    RemoveFinalizer,
    SwitchAlias,
    UpdateStatus,
    describe,
)
from derived_views.core.deadlines import deadline_verdict
from derived_views.core.job_state import (
    DRIVER_PENDING,
    JOB_COMPLETED,
    JOB_FAILED,
    Judgement,
    Kind,
    judge,
)
from derived_views.core.lag import compute_lag, reset_partitions, within_gate
from derived_views.core.observed import Observed, SwitchBlocker
from derived_views.core.patch import merge_patch
from derived_views.core.planner import context
from derived_views.core.planner.draft import Draft, PromotionHold
from derived_views.core.planner.records import (
    BUILDING,
    FINISHED,
    TOPIC_MISSING,
    TOPIC_RESET,
    checks_column,
    clip,
    failing_checks,
    is_torn_down,
    lag_text,
)
from derived_views.core.revision import content_of, job_settings_of, with_content
from derived_views.core.sql_check import POLICY_VIOLATION, check_spec
from derived_views.core.times import seconds_between, utc
from derived_views.render.sparkapplication import render_spark_application


def plan(spec: DerivedViewSpec, observed: Observed, now: dt.datetime) -> list[Action]:
    """Decide what to do for one view, given one observation and the time."""
    return _Planner(spec, observed, utc(now)).run()


class _Planner:
    def __init__(self, spec: DerivedViewSpec, observed: Observed, now: dt.datetime) -> None:
        self.ctx = context.build(spec, observed, now)
        self.draft = Draft.start(self.ctx)
        self.shown_job_problem: tuple[str, Judgement] | None = None

    # small helpers ----------------------------------------------------------------------------

    def follow_until(self, revision: str) -> dt.datetime | None:
        """Until when a replaced revision's job keeps following the log (None: stop it now):
        keepPreviousRunningSeconds, within the retain window, for a job that still runs."""
        cutover = self.ctx.spec.cutover
        keep = min(cutover.keep_previous_running_seconds, cutover.retain_previous_seconds)
        app = self.ctx.apps.get(revision)
        if keep <= 0 or self.ctx.paused or app is None or app.deleting or app.stopped:
            return None
        return self.ctx.now + dt.timedelta(seconds=keep)

    def following(self, revision: str) -> bool:
        """A retiring revision whose job still follows the log inside its follow window."""
        record = self.draft.records[revision]
        app = self.ctx.apps.get(revision)
        return (record.phase == Phase.Retiring and record.follow_until is not None
                and self.ctx.now < record.follow_until and app is not None and not app.deleting
                and not app.stopped and not any(d.revision == revision for d in self.draft.deletes))

    # effects (all no-ops while paused) ---------------------------------------------------------

    def delete_app(self, revision: str) -> None:
        app = self.ctx.apps.get(revision)
        if self.ctx.paused or app is None or app.deleting:
            return
        if all(d.name != app.name for d in self.draft.deletes):
            self.draft.deletes.append(DeleteSparkApplication(revision, app.name))

    def create_app(self, revision: str) -> None:
        if self.ctx.paused or revision in self.ctx.apps or any(c.revision == revision
                                                               for c in self.draft.creates):
            return
        if self.ctx.policy_refusal is not None:
            return
        if revision in self.ctx.obs.driver_pods:
            return  # the previous job's driver pod is still there: a new one would be refused
        if revision in self.draft.held_jobs:
            return  # its lost index and ledger rows are dropped by this plan, after creates
        if self.ctx.index(revision) in self.ctx.foreign:
            return  # another view's index: the job would refuse it (or write into it)
        record = self.draft.records[revision]
        if revision == self.ctx.desired:
            effective = self.ctx.spec
        elif record.content is not None:
            effective = with_content(self.ctx.spec, record.content)
        else:
            return  # a record from before contents were kept: nothing to render it from
        refused = check_spec(effective) if revision != self.ctx.desired else None
        if refused is not None and refused.reason == POLICY_VIOLATION:
            return  # an older revision's SQL the policy now refuses: it does not run again
        manifest = render_spark_application(
            self.ctx.cfg.spark_template, config=self.ctx.cfg, namespace=self.ctx.view.namespace,
            view=self.ctx.view.name, uid=self.ctx.view.uid, spec=effective, revision=revision,
            checkpoint_location=record.checkpoint_location)
        self.draft.creates.append(CreateSparkApplication(revision, manifest["metadata"]["name"],
                                                         manifest))

    def drop_index(self, revision: str) -> bool:
        """Queue the drop unless the alias selects from it (now or after this plan's switch)."""
        if self.ctx.paused or self.ctx.sink is None:
            return False
        index = self.ctx.index(revision)
        if index not in self.ctx.sink.indexes or index in self.ctx.foreign:
            return False
        if index == self.ctx.sink.alias_target or any(s.to_index == index for s in self.draft.switches):
            return False
        if all(d.index != index for d in self.draft.drops):
            self.draft.drops.append(DropIndex(self.ctx.schema, index, revision,
                                              owner_uid=self.ctx.view.uid))
        return True

    # observation of one revision ---------------------------------------------------------------

    def topics_of(self, revision: str) -> list[str]:
        record = self.draft.records.get(revision)
        if record is not None and record.content is not None:
            return list(record.content.topics)
        return list(self.ctx.spec.source.topics) if revision == self.ctx.desired else []

    def lag_of(self, revision: str) -> Lag | None:
        topics = self.topics_of(revision)
        if self.ctx.obs.end_offsets is None or self.ctx.sink is None or not topics:
            return None
        return compute_lag(self.ctx.obs.end_offsets, topics, self.ctx.position_of(revision), self.ctx.now)

    def resets_of(self, revision: str) -> list[str]:
        """Partitions whose log fell below what the revision's index holds (see core.lag)."""
        if self.ctx.obs.end_offsets is None:
            return []
        return reset_partitions(self.ctx.obs.end_offsets, self.topics_of(revision),
                                self.ctx.position_of(revision))

    def missing_topics_of(self, revision: str) -> list[str]:
        return sorted(set(self.topics_of(revision)) & self.ctx.obs.missing_topics)

    def lost_cause(self, revision: str) -> str | None:
        """Why the revision's index no longer holds what its ledger claims (core.integrity)."""
        if self.ctx.sink is None:
            return None
        return integrity.lost_index_cause(self.ctx.index(revision), self.ctx.position_of(revision),
                                          self.ctx.sink.index_oids)

    def growth_cause(self, revision: str) -> str | None:
        """Why partition growth may have made the revision's index wrong (core.partition_growth)."""
        record = self.draft.records.get(revision)
        if record is None:
            return None
        sql = (record.content.sql if record.content is not None
               else self.ctx.spec.transform.sql if revision == self.ctx.desired else None)
        return partition_growth.growth_cause(revision, sql, record.source_partitions,
                                             self.ctx.obs.end_offsets)

    def partitions_now(self, revision: str) -> dict[str, int] | None:
        if self.ctx.obs.end_offsets is None:
            return None
        counts = partition_growth.partition_counts(self.ctx.obs.end_offsets, self.topics_of(revision))
        return counts or None  # no topic described yet: record it on a later pass

    def gate_holds(self, revision: str, lag: Lag | None, running: bool) -> bool:
        """The lag gate on this reading, for a candidate and for a following retiring job:
        within the gate, its job running, no reset partition, its index there and whole."""
        return (within_gate(lag, self.ctx.spec.cutover) and running
                and not self.resets_of(revision) and bool(self.ctx.index_exists(revision))
                and self.lost_cause(revision) is None and self.growth_cause(revision) is None)

    def observe(self, revision: str) -> None:
        """Refresh job state and lag; for a building candidate, track the gate."""
        record = self.draft.records[revision]
        app = self.ctx.apps.get(revision)
        changes: dict[str, Any] = {}
        replacing = any(d.revision == revision for d in self.draft.deletes)
        if app is not None and not app.deleting and not replacing:
            changes.update(job_state=app.state or None, execution_attempts=app.execution_attempts)
            app_live = True
            judgement = judge(app)
            if judgement.kind in (Kind.BLOCKED, Kind.SUSPENDED):
                self.draft.job_problems[revision] = judgement
        else:
            changes.update(job_state=None, execution_attempts=None)
            app_live = False
        lag = self.lag_of(revision)
        self.draft.lags[revision] = lag
        if lag is not None:
            changes["lag"] = lag
        if self.ctx.sink is not None and revision in self.ctx.sink.ledger:
            changes["bad_records"] = self.ctx.sink.bad_records.get(revision, 0)
        if record.source_partitions is None:
            changes["source_partitions"] = self.partitions_now(revision)
        if record.phase in BUILDING and revision != self.draft.active:
            running = app_live and app is not None and app.running
            committed = (self.ctx.sink is not None and revision in self.ctx.sink.ledger
                         and self.lost_cause(revision) is None)
            if lag is None:
                if record.phase == Phase.Pending and running:
                    changes["phase"] = Phase.Backfilling
            else:
                gate = self.gate_holds(revision, lag, running)
                changes["caught_up_since"] = (record.caught_up_since or self.ctx.now) if gate else None
                changes["phase"] = (Phase.CaughtUp if gate else
                                    Phase.Backfilling if running or committed else Phase.Pending)
        self.draft.set(revision, **changes)

    # steps --------------------------------------------------------------------------------------

    def resume_cutover(self) -> None:
        """Finish a cutover whose alias switch landed but whose status update did not."""
        if self.ctx.sink is None or self.ctx.sink.alias_target is None:
            return
        intent = self.ctx.obs.status.intent
        for revision, record in list(self.draft.records.items()):
            if revision == self.draft.active or self.ctx.sink.alias_target != record.index:
                continue
            intended = intent is not None and intent.cutover_to == revision
            if intended or record.phase == Phase.CaughtUp:
                self.draft.last_cutover = CutoverRecord(
                    from_revision=self.draft.active, to_revision=revision, switched_at=self.ctx.now)
                self.finish_cutover(revision)
                return

    def finish_cutover(self, revision: str) -> None:
        old = self.draft.active
        self.draft.set(revision, phase=Phase.Active, reason="Promoted", message=None,
                       caught_up_since=None, retire_after=None)
        self.draft.active = revision
        if old is not None and old != revision:
            follow_until = self.follow_until(old)
            self.draft.set(old, phase=Phase.Retiring, retire_after=self.ctx.retire_after(),
                           follow_until=follow_until, reason="Replaced",
                           message=f"replaced by revision {revision}" + (
                               "; its job keeps following the log for a rollback until "
                               f"{follow_until.isoformat()}" if follow_until else ""),
                           caught_up_since=None, lag=None, job_state=None, execution_attempts=None)
            if follow_until is None:
                self.delete_app(old)
            self.draft.event("CutoverCompleted",
                             f"Switched readers of {self.ctx.where} from revision {old} "
                             f"to {revision}.")
        else:
            self.draft.event("CutoverCompleted",
                             f"Started serving revision {revision} as {self.ctx.where}.")

    def ensure_finalizer(self) -> None:
        if FINALIZER not in self.ctx.view.finalizers:
            self.draft.finalizers_added.append(AddFinalizer(FINALIZER))

    def hold_sink_secret(self) -> None:
        """With deletionPolicy Delete, hold the sink Secret (a finalizer) so the cleanup can
        still connect while a namespace deletion removes everything; release one no longer
        needed (policy Retain, another secretRef)."""
        if self.ctx.sink is None:
            return  # the Secret could not be read (or the database not reached): not now
        held, wanted = set(self.draft.held_secrets), set(self.ctx.secrets_for_cleanup())
        for name in sorted(held - wanted):
            self.draft.secret_holds.append(ReleaseSecret(name))
        for name in sorted(wanted - held):
            self.draft.secret_holds.append(HoldSecret(name))
        self.draft.held_secrets = sorted(wanted)

    def supersede_others(self) -> None:
        for revision, record in list(self.draft.records.items()):
            if revision in (self.ctx.desired, self.draft.active):
                continue
            if record.phase in BUILDING or (record.phase == Phase.Failed
                                            and not is_torn_down(record)):
                self.draft.set(revision, phase=Phase.Superseded, reason="Superseded",
                               message=f"superseded by revision {self.ctx.desired} before cutover",
                               caught_up_since=None, lag=None, content=None, job_state=None,
                               execution_attempts=None)
                self.draft.event("Superseded", f"Superseded candidate revision {revision} by "
                                               f"{self.ctx.desired} before cutover.")

    def start_desired(self) -> None:
        """Make sure the spec's revision has a record that is building (or stays Failed)."""
        revision = self.ctx.desired
        if (revision == self.draft.active or self.ctx.checkpoint_problem is not None
                or self.ctx.spec_refusal is not None or self.ctx.policy_refusal is not None):
            return  # (a revision keeps the checkpoint location it starts with: not a bad one,
            # nor one the policy refuses)
        record = self.draft.records.get(revision)
        if record is None:
            self.start_new(revision)
        elif record.phase == Phase.Retiring and self.following(revision):
            self.switch_back(revision)
        elif record.phase == Phase.Retiring:
            self.restart(revision, rollback=True)
        elif record.phase in (Phase.Superseded, Phase.Retired) or (
                record.phase == Phase.Failed and self.ctx.retry_requested(record)):
            self.restart(revision, rollback=False)

    def start_new(self, revision: str) -> None:
        build = (self.draft.spent_builds[revision] + 1 if revision in self.draft.spent_builds
                 else self.draft.spent_builds_floor)
        exists = self.ctx.index_exists(revision)
        if build > 0 and exists is not False:
            # A rebuild needs a fresh index; an unknown or stale one must go first.
            self.drop_index(revision)
            return
        if exists is False and self.ctx.position_of(revision) is not None:
            self.purge(revision)  # ledger rows of a lost table: the new job would refuse them
            return
        self.draft.spent_builds.pop(revision, None)  # the record carries the build from now on
        self.draft.records[revision] = RevisionStatus(
            revision=revision, index=self.ctx.index(revision), phase=Phase.Pending, since=self.ctx.now,
            spark_application=naming.spark_application_name(self.ctx.view.name, revision),
            checkpoint_location=self.ctx.checkpoint(revision, build), content=content_of(self.ctx.spec),
            build=build, started_at=self.ctx.now, generation=self.ctx.view.generation,
            retry_token=self.ctx.retry_token, reason="BackfillStarted",
            source_partitions=self.partitions_now(revision))
        if exists:
            self.draft.event("BackfillStarted", f"Resumed revision {revision} into its existing index "
                                                f"{self.ctx.index(revision)} from its checkpoint.")
        else:
            self.draft.event("BackfillStarted", f"Started replaying revision {revision} from offset 0 "
                                                f"into index {self.ctx.index(revision)}.")

    def switch_back(self, revision: str) -> None:
        """Roll back to a revision whose job never stopped following the log: it is a
        candidate again at once, its gate record intact, so it is promoted as soon as the
        gate (and any checks) hold, without a job start or a replay."""
        self.draft.set(revision, phase=Phase.Backfilling, reason="RollbackStarted",
                       message="its job kept following the log; no restart, no replay",
                       started_at=self.ctx.now, generation=self.ctx.view.generation,
                       retry_token=self.ctx.retry_token, content=content_of(self.ctx.spec),
                       retire_after=None, follow_until=None)
        self.draft.event("RollbackStarted", f"Rolling back to revision {revision}, whose job kept "
                                            "following the log.")

    def restart(self, revision: str, *, rollback: bool) -> None:
        """Resume a known revision from its checkpoint if its index is still there, else
        rebuild it from offset 0 with a fresh checkpoint."""
        record = self.draft.records[revision]
        exists = self.ctx.index_exists(revision)
        if exists is None:
            return  # cannot tell resume from rebuild without the sink
        app = self.ctx.apps.get(revision)
        common: dict[str, Any] = dict(
            phase=Phase.Pending, started_at=self.ctx.now, generation=self.ctx.view.generation,
            retry_token=self.ctx.retry_token, content=content_of(self.ctx.spec), caught_up_since=None,
            retire_after=None, lag=None, job_state=None, execution_attempts=None)
        if exists:
            if app is not None and app.stopped:
                self.delete_app(revision)  # a stopped job is resubmitted as a new object
            if rollback:
                self.draft.set(revision, reason="RollbackStarted",
                               message="resuming from its checkpoint; no replay from offset 0",
                               **common)
                self.draft.event("RollbackStarted", f"Resumed retained revision {revision} from its "
                                                    "checkpoint to roll back.")
            else:
                self.draft.set(revision, reason="Resumed", message="resuming from its checkpoint",
                               **common)
                self.draft.event("Resumed", f"Resumed revision {revision} from its checkpoint.")
            return
        if app is not None:
            self.delete_app(revision)  # it runs on the spent checkpoint
        if self.ctx.position_of(revision) is not None:
            # Its table is gone but its ledger rows are not: the new job would refuse to
            # start on them. Drop them first; rebuild on a later pass.
            if app is None and revision not in self.ctx.obs.driver_pods:
                self.purge(revision)
            return
        build = record.build + 1
        self.draft.set(revision, reason="BackfillStarted", message="rebuilding from offset 0",
                       build=build, checkpoint_location=self.ctx.checkpoint(revision, build),
                       source_partitions=self.partitions_now(revision), **common)
        self.draft.event("BackfillStarted", f"Started rebuilding revision {revision} from offset 0 "
                                            f"into index {self.ctx.index(revision)}.")

    def purge(self, revision: str) -> None:
        """Drop the revision's index table (if any) with its ledger rows, and hold its job back
        this pass. Never the alias's target."""
        if self.ctx.paused or self.ctx.sink is None:
            return
        index = self.ctx.index(revision)
        if index == self.ctx.sink.alias_target or any(s.to_index == index for s in self.draft.switches):
            return
        if index in self.ctx.foreign:
            return  # another view's index and ledger rows
        self.draft.held_jobs.add(revision)
        if all(d.index != index for d in self.draft.drops):
            self.draft.drops.append(DropIndex(self.ctx.schema, index, revision,
                                              owner_uid=self.ctx.view.uid))

    def rebuild_lost_candidate(self) -> None:
        """A building candidate whose index lost batches its ledger claims is rebuilt from
        offset 0 (a new build, a fresh checkpoint), never promoted: stop its job, drop the
        table and ledger rows once the job is gone, then start again."""
        revision = self.ctx.desired
        record = self.draft.records.get(revision)
        if revision == self.draft.active or record is None or record.phase not in BUILDING:
            return
        cause = self.lost_cause(revision)
        if cause is None:
            if record.reason == integrity.INDEX_LOST and revision in self.ctx.apps:
                self.draft.set(revision, reason="BackfillStarted")  # rebuilding; a new loss counts anew
            return
        if record.reason != integrity.INDEX_LOST:
            build = record.build + 1
            self.draft.set(revision, phase=Phase.Pending, reason=integrity.INDEX_LOST,
                           message=clip(f"{cause}; rebuilding from offset 0 (build {build}); it is "
                                        "not promoted before the rebuild catches up"),
                           build=build, checkpoint_location=self.ctx.checkpoint(revision, build),
                           started_at=self.ctx.now, caught_up_since=None, lag=None, job_state=None,
                           execution_attempts=None, source_partitions=self.partitions_now(revision))
            self.draft.event(integrity.INDEX_LOST, f"Rebuilding candidate revision {revision} from "
                                                   f"offset 0: {cause}.", warning=True)
        self.delete_app(revision)
        self.draft.held_jobs.add(revision)
        if revision not in self.ctx.apps and revision not in self.ctx.obs.driver_pods:
            self.purge(revision)

    def progress_desired(self) -> None:
        """Job, failure, deadline, lag gate and promotion of the spec's revision."""
        revision = self.ctx.desired
        record = self.draft.records.get(revision)
        if revision == self.draft.active or record is None or record.phase not in BUILDING:
            return
        app = self.ctx.apps.get(revision)
        replacing = any(d.revision == revision for d in self.draft.deletes)
        if not replacing and app is not None and not app.deleting and app.stopped:
            ended = judge(app)  # the driver's termination message when there is one
            reason, detail = ended.reason, ended.message
            self.draft.set(revision, phase=Phase.Failed, reason=reason, message=clip(detail),
                           caught_up_since=None, job_state=app.state,
                           execution_attempts=app.execution_attempts,
                           retry_token=self.ctx.retry_token, generation=self.ctx.view.generation)
            self.draft.event(reason, f"Stopped waiting for revision {revision}: its job ended "
                                     f"({app.state}): {detail}", warning=True)
            return
        verdict = deadline_verdict(self.ctx.spec.cutover, record.started_at,
                                   self.ctx.position_of(revision), self.lag_of(revision), self.ctx.now)
        if not self.ctx.paused and verdict is not None:
            reason, message = verdict
            self.draft.set(revision, phase=Phase.Failed, reason=reason, message=message,
                           caught_up_since=None, lag=None, content=None, job_state=None,
                           execution_attempts=None, retry_token=self.ctx.retry_token,
                           generation=self.ctx.view.generation)
            self.delete_app(revision)
            self.draft.event(reason, f"Aborted candidate revision {revision}: {message}.", warning=True)
            return
        if app is None and not replacing and not self.missing_topics_of(revision):
            self.create_app(revision)
        self.observe(revision)
        self.take_checks_run(revision)
        record = self.draft.records[revision]
        lag = self.draft.lags.get(revision)
        if record.phase != Phase.CaughtUp or lag is None or record.caught_up_since is None:
            return
        stable = (seconds_between(record.caught_up_since, self.ctx.now)
                  >= self.ctx.spec.cutover.stable_for_seconds)
        if stable and not self.checks_pass(record):
            self.draft.promotion_hold = PromotionHold("checks")
            return  # failing or not yet run: not promoted, not even on the annotation
        approved = (self.draft.active is None or self.ctx.spec.cutover.mode == "auto"
                    or self.ctx.promote_to == revision)
        if stable and not approved:
            self.draft.promotion_hold = PromotionHold("approval")
        if stable and approved and not self.ctx.paused and self.ctx.sink is not None:
            blocked = switch_guard.blocker(self.ctx.sink, self.ctx.index(revision))
            if blocked is not None:
                self.draft.promotion_hold = PromotionHold("blocker", blocked)
                told = switch_guard.announcement(blocked, revision, self.ctx.obs.status)
                if told:
                    self.draft.event(blocked.reason, told, warning=True)
                return
            if self.ctx.index(revision) in self.ctx.foreign:
                return
            self.draft.switches.append(SwitchAlias(self.ctx.schema, self.ctx.alias, self.ctx.index(revision),
                                                   self.ctx.sink.alias_target))
            self.draft.cutover = (revision, self.draft.active)
            self.draft.last_cutover = CutoverRecord(
                from_revision=self.draft.active, to_revision=revision, switched_at=self.ctx.now,
                gate_held_at=record.caught_up_since + dt.timedelta(
                    seconds=self.ctx.spec.cutover.stable_for_seconds))
            self.finish_cutover(revision)

    def take_checks_run(self, revision: str) -> None:
        """Record this pass's run of the candidate's checks; one event when the outcome (or
        which checks fail) changes, not one per run."""
        taken = self.ctx.obs.checks_run
        if taken is None or taken[0] != revision:
            return
        record = self.draft.records[revision]
        run = taken[1]
        before = checks.shown_run(self.ctx.spec, record.checks, record.caught_up_since,
                                  record.started_at)
        self.draft.set(revision, checks=run)
        if run.passed:
            if before is None or not before.passed:
                shown = checks.summary(run)
                self.draft.event("ChecksPassed", f"Cutover checks of revision {revision}: {shown}.")
            return
        reason, text = checks.failure_text(run)
        # by the failing checks, not their words: a sample's examples differ on every run
        told = None if before is None else [(r.name, r.outcome) for r in before.failing()]
        if told != [(r.name, r.outcome) for r in run.failing()]:
            self.draft.event(reason, f"Revision {revision} is not promoted: {text}.", warning=True)

    def checks_pass(self, record: RevisionStatus) -> bool:
        """No checks, or a passing run of the spec's checks made while the gate held."""
        if checks.checks_of(self.ctx.spec) is None:
            return True
        run = checks.current_run(self.ctx.spec, record.checks, record.caught_up_since)
        return self.ctx.check_refusal is None and run is not None and run.passed

    def apply_job_settings(self) -> None:
        """Restart running jobs whose job settings changed, from their checkpoints: no replay."""
        wanted = job_settings_of(self.ctx.spec)
        # the active first, then the candidate: a plan's actions come in a fixed order
        for revision in dict.fromkeys(r for r in (self.draft.active, self.ctx.desired) if r is not None):
            record, app = self.draft.records.get(revision), self.ctx.apps.get(revision)
            if (record is None or app is None or app.deleting or app.stopped
                    or not app.job_settings or app.job_settings == wanted
                    or not (record.phase in BUILDING or revision == self.draft.active)):
                continue
            self.delete_app(revision)
            self.draft.event("JobRestarted", f"Restarted the job of revision {revision} from its "
                                             "checkpoint to apply changed job settings (spec.spark or "
                                             "the Kafka connection).")

    def maintain_active(self) -> None:
        """Keep the served index following the log, and the alias on it."""
        revision = self.draft.active
        if revision is None:
            return
        self.observe(revision)
        record = self.draft.records[revision]
        if self.ctx.sink is not None and not self.draft.switches and not self.ctx.paused:
            target = self.ctx.sink.alias_target
            if (target != record.index and record.index in self.ctx.sink.indexes
                    and record.index not in self.ctx.foreign and self.lost_cause(revision) is None):
                self.draft.switches.append(SwitchAlias(self.ctx.schema, self.ctx.alias, record.index, target))
                self.draft.event("AliasRepaired", f"Pointed {self.ctx.where} back at index "
                                                  f"{record.index} (it selected from "
                                                  f"{target or 'nothing'}).", warning=True)
        app = self.ctx.apps.get(revision)
        if app is not None and app.deleting:
            return
        failed = record.reason in (JOB_FAILED, JOB_COMPLETED)
        if failed and self.ctx.paused:
            return
        if failed and self.ctx.retry_requested(record):
            self.delete_app(revision)
            self.draft.set(revision, reason="Promoted", message=None, retry_token=self.ctx.retry_token,
                           generation=self.ctx.view.generation, job_state=None, execution_attempts=None)
            self.draft.event("RetryStarted", f"Restarted the job of active revision {revision} from "
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
            self.draft.set(revision, reason=reason, message=clip(detail),
                           retry_token=self.ctx.retry_token, generation=self.ctx.view.generation)
            self.draft.event(reason, f"The job of active revision {revision} stopped ({app.state}): "
                                     f"{detail}; the index no longer follows the log.", warning=True)

    def retire_and_tear_down(self) -> None:
        for revision, record in list(self.draft.records.items()):
            if revision == self.draft.active or (revision == self.ctx.desired
                                                 and record.phase in BUILDING):
                continue
            if record.phase == Phase.Retiring and self.following(revision):
                self.track_follower(revision)
                continue
            if record.phase == Phase.Retiring:
                if record.follow_until is not None:
                    self.draft.set(revision, follow_until=None, caught_up_since=None, lag=None,
                                   job_state=None, execution_attempts=None)
                self.delete_app(revision)
                due = record.retire_after is None or record.retire_after <= self.ctx.now
                if not due or self.ctx.sink is None or revision in self.ctx.apps:
                    continue
                if self.ctx.index_exists(revision) and not self.drop_index(revision):
                    continue  # the alias still selects from it: not yet
                self.draft.set(revision, phase=Phase.Retired, reason="Retired",
                               message="index dropped after the retention period", content=None)
                self.draft.event("Retired", f"Dropped index {record.index} of revision {revision} "
                                            "after its retention period.")
            elif is_torn_down(record):
                self.delete_app(revision)
                if revision not in self.ctx.apps:
                    self.drop_index(revision)
        for revision in sorted(self.ctx.apps):
            if revision not in self.draft.records and revision != self.ctx.desired:
                self.delete_app(revision)  # an orphan of this view (e.g. a pruned record)

    def track_follower(self, revision: str) -> None:
        """A following revision's lag and the start of its run within the gate, so that a
        rollback finds it already stable."""
        record = self.draft.records[revision]
        app = self.ctx.apps.get(revision)
        lag = self.lag_of(revision)
        gate = self.gate_holds(revision, lag, app is not None and app.running)
        self.draft.set(revision, lag=lag, job_state=(app.state or None) if app is not None else None,
                       caught_up_since=(record.caught_up_since or self.ctx.now) if gate else None)

    def prune(self) -> None:
        """Keep the newest `history_limit` finished records; remember the builds of the rest."""
        finished = [r for r in self.draft.records.values()
                    if r.phase in FINISHED and r.revision not in (self.ctx.desired, self.draft.active)
                    and is_torn_down(r)]
        finished.sort(key=lambda r: (r.since, r.revision), reverse=True)
        for record in finished[self.ctx.cfg.history_limit:]:
            gone = (record.revision not in self.ctx.apps and self.ctx.sink is not None
                    and self.ctx.index(record.revision) not in self.ctx.sink.indexes)
            if gone:
                previous = self.draft.spent_builds.get(record.revision, -1)
                self.draft.spent_builds[record.revision] = max(previous, record.build)
                del self.draft.records[record.revision]

    # deletion ------------------------------------------------------------------------------------

    def deletion(self) -> list[Action]:
        if FINALIZER not in self.ctx.view.finalizers:
            return []  # nothing of ours holds the object
        for revision in sorted(self.ctx.apps):
            self.delete_app(revision)
        done = False
        assert self.ctx.view.deletion_timestamp is not None
        waited = seconds_between(self.ctx.view.deletion_timestamp, self.ctx.now)
        grace_over = waited >= self.ctx.cfg.deletion_sink_grace_seconds
        if self.ctx.spec.deletion_policy == "Retain":
            done = True
            message = (f"Stopped the view's jobs; kept {self.ctx.where} and its "
                       "indexes (deletionPolicy Retain).")
        elif self.ctx.claimed_by is not None:
            done = not self.ctx.apps
            message = (f"Stopped the view's jobs; left {self.ctx.where} and its "
                       f"indexes to DerivedView {self.ctx.claimed_by}, which owns them.")
        elif self.ctx.sink is not None and self.ctx.sink.drop_blockers:
            done, message = self.deletion_blocked(self.ctx.sink.drop_blockers, grace_over)
        elif self.ctx.sink is not None:
            if not self.ctx.apps:
                if self.ctx.sink.alias_target is not None:
                    self.draft.drop_aliases.append(DropAlias(self.ctx.schema, self.ctx.alias))
                for index in sorted(self.ctx.sink.indexes - set(self.ctx.foreign)):
                    owner = naming.index_revision(self.ctx.base, index)
                    if owner is not None:
                        self.draft.drops.append(DropIndex(self.ctx.schema, index, owner,
                                                            owner_uid=self.ctx.view.uid))
                done = True
            message = (f"Stopped the view's jobs and dropped {self.ctx.where} and "
                       f"{len(self.ctx.sink.indexes - set(self.ctx.foreign))} index(es) "
                       "(deletionPolicy Delete)"
                       + (f"; left {', '.join(sorted(self.ctx.foreign))} to the view(s) that own "
                          "them" if self.ctx.foreign else "") + ".")
        else:
            reason, detail = self.ctx.obs.sink_problem or ("SinkUnreachable", "sink unreachable")
            # A Secret that is gone or unusable does not come back by waiting; a database that
            # does not answer may (a restart): it gets the grace period.
            done = reason != "SinkUnreachable" or grace_over
            message = "Stopped the view's jobs."
            if done:
                kept = [r.index for r in self.draft.records.values() if not is_torn_down(r)]
                self.draft.event(deletion.LEFT_BEHIND,
                                 f"Released the view without dropping its alias and indexes "
                                 f"(deletionPolicy Delete): {detail}"
                                 + (f" for {waited}s" if reason == "SinkUnreachable" else "") + "; "
                                 + deletion.left_behind(self.ctx.schema, self.ctx.alias, kept,
                                                        self.ctx.cfg.ledger_table) + ".", warning=True)
        if done:
            # also what the spec would hold: a status that lost its record must not leave a
            # Secret held for good (the shell keeps a hold another view still records)
            for held in sorted(set(self.draft.held_secrets) | set(self.ctx.secrets_for_cleanup())):
                self.draft.secret_holds.append(ReleaseSecret(held))
            self.draft.event("Deleted", message)
            self.draft.finalizers_removed.append(RemoveFinalizer(FINALIZER))
        return self.assemble(deleting=True)

    def deletion_blocked(self, blockers: tuple[str, ...], grace_over: bool) -> tuple[bool, str]:
        """Others' views (functions, ...) read the alias or an index: DROP ... CASCADE would
        drop them too, silently and for good, so nothing is dropped. The deletion waits the
        grace period for someone to drop or re-point them, then releases the view and leaves
        the tables, saying which."""
        names = deletion.dependents_text(blockers)
        verb = "depends" if len(set(blockers)) == 1 else "depend"
        if self.ctx.apps:
            return False, ""
        if grace_over:
            self.draft.event(deletion.LEFT_BEHIND,
                             f"Released the view without dropping its alias and indexes "
                             f"(deletionPolicy Delete): {names} {verb} on them; "
                             + deletion.left_behind(self.ctx.schema, self.ctx.alias, self.ctx.sink.indexes
                                                    if self.ctx.sink else (), self.ctx.cfg.ledger_table)
                             + ".", warning=True)
            return True, "Stopped the view's jobs."
        self.draft.deletion_problem = cond.Verdict(
            "True", deletion.DELETION_BLOCKED,
            f"{names} {verb} on {self.ctx.where} or its indexes: drop or re-point "
            f"them (nothing is dropped with CASCADE); after "
            f"{self.ctx.cfg.deletion_sink_grace_seconds}s from the deletion the view is released "
            "and its alias and indexes are left in place")
        before = self.ctx.obs.status.condition(cond.STALLED)
        if before is None or before.reason != deletion.DELETION_BLOCKED:
            self.draft.event(deletion.DELETION_BLOCKED,
                             f"Not dropping {self.ctx.where} and its indexes: "
                             f"{self.draft.deletion_problem.message}.", warning=True)
        return False, ""

    # result -----------------------------------------------------------------------------------

    def run(self) -> list[Action]:
        if self.ctx.view.deletion_timestamp is not None:
            return self.deletion()
        if self.ctx.claimed_by is not None:
            for revision in sorted(self.ctx.apps):
                self.delete_app(revision)  # they would write into the other view's tables
            return self.assemble(deleting=False)
        if self.ctx.owned_refusal is not None:
            for revision in sorted(self.ctx.apps):
                if self.ctx.index(revision) in self.ctx.foreign:
                    self.delete_app(revision)  # the job refuses it: do not keep restarting it
            return self.assemble(deleting=False)
        self.resume_cutover()
        if not self.ctx.paused:
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
        desired, active = self.ctx.desired, self.draft.active
        record = self.draft.records.get(desired)
        candidate = record if desired != active else None
        active_record = self.draft.records.get(active) if active else None
        lag = self.draft.lags.get(desired)
        lag_said = lag_text(lag, self.ctx.spec)
        V = cond.Verdict
        serving = [r for r in (active, desired) if r is not None]
        missing = sorted({t for r in serving for t in self.missing_topics_of(r)})
        resets = {r: self.resets_of(r) for r in dict.fromkeys(serving)}

        problem: cond.Verdict | None = None
        if self.draft.deletion_problem is not None:
            problem = self.draft.deletion_problem
        elif self.ctx.checkpoint_problem is not None:
            problem = V("True", "CheckpointNotDurable",
                        f"spec.spark.checkpointBase: {self.ctx.checkpoint_problem}; remove it to use "
                        "the operator's base, or name a store every pod reaches")
        elif self.ctx.policy_refusal is not None:
            problem = V("True", self.ctx.policy_refusal.reason,
                        f"{self.ctx.policy_refusal.message}; no job of this view starts until then"
                        + (f", revision {active} keeps serving" if active else ""))
        elif self.ctx.spec_refusal is not None and desired != active:
            refused = self.ctx.spec_refusal.message.rstrip(".")
            problem = V("True", self.ctx.spec_refusal.reason,
                        f"{refused}; no job is started for revision {desired}"
                        + (f", revision {active} keeps serving" if active else ""))
        elif self.ctx.check_refusal is not None and desired != active:
            name, why = self.ctx.check_refusal
            problem = V("True", POLICY_VIOLATION,
                        f"cutover.checks.assertions {name}: {why.rstrip('.')}; revision "
                        f"{desired} is not promoted until the check is fixed (no replay needed)"
                        + (f", revision {active} keeps serving" if active else ""))
        elif self.ctx.claimed_by is not None:
            problem = V("True", "SinkTableClaimed",
                        f"{self.ctx.where} belongs to DerivedView {self.ctx.claimed_by}; "
                        "two views cannot share an alias: choose another "
                        f"{self.ctx.base_field}")
        elif self.ctx.owned_refusal is not None:
            index, owner = self.ctx.owned_refusal
            problem = V("True", ownership.INDEX_OWNED_BY_ANOTHER_VIEW, ownership.refusal_message(
                index, owner, self.ctx.view, self.ctx.where, self.ctx.base_field,
                active if self.draft.active and self.ctx.index(self.draft.active) not in self.ctx.foreign else None))
        elif self.ctx.sink is None and self.ctx.obs.sink_problem is not None:
            reason, detail = self.ctx.obs.sink_problem
            problem = V("True", reason, f"{detail}; nothing is switched or dropped until the "
                                        "sink can be read")
        elif self.ctx.obs.end_offsets is None and self.ctx.obs.source_problem is not None:
            reason, detail = self.ctx.obs.source_problem
            problem = V("True", reason, f"{detail}; lag is unknown, so no revision is promoted")
        elif missing:
            problem = V("True", TOPIC_MISSING,
                        f"topic(s) {', '.join(missing)} not found on "
                        f"{self.ctx.spec.source.kafka.bootstrap_servers}: create them or fix "
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
                        f"active revision {active}: {lost}; {self.ctx.where} "
                        + ("serves the incomplete table" if self.ctx.sink is not None
                           and self.ctx.sink.alias_target == self.ctx.index(active) else
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
        elif (failing := failing_checks(self.ctx.spec, candidate)) is not None:
            reason, text = failing
            problem = V("True", reason,
                        f"revision {desired} is not promoted: {text}; "
                        + (f"revision {active} keeps serving" if active else "nothing serves")
                        + "; fix the transform (a new revision) or the check (re-run, no replay)")
        elif active_record is not None and active_record.reason in (JOB_FAILED, JOB_COMPLETED):
            problem = V("True", active_record.reason,
                        f"the job of active revision {active} stopped: {active_record.message}; "
                        "the index no longer follows the log")
        elif (active_record is not None and self.ctx.sink is not None
              and active_record.index not in self.ctx.sink.indexes):
            problem = V("True", "IndexMissing",
                        f"index {active_record.index} of active revision {active} is missing")

        building = candidate is not None and candidate.phase in BUILDING
        job_problem = None if problem is not None or deleting else self.job_problem(building)
        if deleting:
            reconciling = V("True", "Deleting", "the view is being deleted")
        elif self.ctx.paused:
            reconciling = V("False", "Paused", f"{PAUSED_ANNOTATION} is true: no actions are taken")
        elif building and candidate is not None:
            hold = self.draft.promotion_hold
            awaiting_promotion = hold is not None and hold.cause == "approval"
            checks_waiting = hold is not None and hold.cause == "checks"
            reason = ("AwaitingPromotion" if awaiting_promotion else
                      "Checking" if checks_waiting else
                      "CaughtUp" if candidate.phase == Phase.CaughtUp else "Backfilling")
            message = f"revision {desired} is {candidate.phase.value.lower()}: {lag_said}"
            if checks_waiting:
                message += f"; cutover checks: {checks_column(self.ctx.spec, candidate)}"
            if awaiting_promotion:
                message += f"; annotate {PROMOTE_ANNOTATION}={desired} to switch readers"
            reconciling = V("True", reason, message)
        elif desired != active and candidate is None and self.ctx.policy_refusal is not None:
            reconciling = V("False", self.ctx.policy_refusal.reason,
                            f"revision {desired} is refused")
        elif desired != active and candidate is None and self.ctx.spec_refusal is not None:
            reconciling = V("False", self.ctx.spec_refusal.reason, f"revision {desired} is refused")
        elif desired != active and candidate is None:
            reconciling = V("True", "Starting", f"revision {desired} is about to start")
        else:
            # Also right after a cutover: this status is written only once the
            # switch has succeeded, so nothing is left in progress.
            reconciling = V("False", "Reconciled", "")

        switched = self.draft.switches[-1].to_index if self.draft.switches else (
            self.ctx.sink.alias_target if self.ctx.sink is not None else None)
        if deleting:
            ready = V("False", "Deleting", "the view is being deleted")
        elif problem is not None:
            ready = V("False", problem.reason, problem.message)
        elif job_problem is not None and active is None:
            ready = V("False", job_problem.reason, f"nothing serves yet: {job_problem.message}")
        elif self.ctx.sink is None:
            ready = V("Unknown", "SinkUnreachable", "could not ask the sink where the alias points")
        elif active is None:
            ready = V("False", reconciling.reason if building else "Pending",
                      f"nothing serves yet: {reconciling.message or 'waiting'}")
        elif switched != self.ctx.index(active):
            ready = V("False", "AliasMisdirected",
                      f"{self.ctx.where} does not select from {self.ctx.index(active)}")
        elif active != desired:
            ready = V("False", reconciling.reason,
                      f"revision {active} serves while {reconciling.message}")
        else:
            ready = V("True", "Serving", f"{self.ctx.where} serves revision {active} "
                                         f"from {self.ctx.index(active)}")

        if lag is None:
            caught_up = V("Unknown", "LagUnknown", f"revision {desired}: lag unknown")
        elif within_gate(lag, self.ctx.spec.cutover) and not resets.get(desired):
            caught_up = V("True", "LagWithinGate", f"revision {desired}: {lag_said}")
        else:
            caught_up = V("False", "LagAboveGate", f"revision {desired}: {lag_said}")

        calm = V("False", "AsExpected", "")
        trouble = problem or job_problem
        return {cond.READY: ready, cond.RECONCILING: reconciling,
                cond.STALLED: trouble or calm, cond.CAUGHT_UP: caught_up,
                cond.DEGRADED: trouble or calm}

    def job_problem(self, building: bool) -> cond.Verdict | None:
        """A job that cannot run until someone acts: the served revision's first, then the
        building candidate's. Nothing is torn down: the job runs once the cause is fixed."""
        for revision in (self.draft.active, self.ctx.desired if building else None):
            judgement = None if revision is None else self.draft.job_problems.get(revision)
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
        before = self.ctx.obs.status.condition(cond.DEGRADED)
        if before is not None and (before.status, before.reason, before.message) == (
                degraded.status, degraded.reason, degraded.message):
            return
        reason = DRIVER_PENDING if judgement.kind == Kind.BLOCKED else judgement.reason
        self.draft.event(reason, f"The job of revision {revision} cannot run: {judgement.message}.",
                         warning=True)

    def announce_integrity(self, degraded: cond.Verdict) -> None:
        """One warning event when the view becomes Degraded for a lost index or partition
        growth (or the cause changes), not one per pass."""
        if degraded.reason not in (integrity.INDEX_LOST, partition_growth.PARTITIONS_GREW):
            return
        before = self.ctx.obs.status.condition(cond.DEGRADED)
        if before is None or (before.reason, before.message) != (degraded.reason,
                                                                 degraded.message):
            self.draft.event(degraded.reason, degraded.message, warning=True)

    def summary(self, deleting: bool) -> tuple[ViewPhase, ActiveStatus | None,
                                               CandidateStatus | None]:
        active_record = self.draft.records.get(self.draft.active) if self.draft.active else None
        active = None if active_record is None else ActiveStatus(
            revision=active_record.revision, index=active_record.index,
            since=active_record.since, lag=status_size.bounded_detail(active_record.lag),
            bad_records=active_record.bad_records)
        record = self.draft.records.get(self.ctx.desired)
        candidate = None
        if record is not None and self.ctx.desired != self.draft.active and (
                record.phase in BUILDING or record.phase == Phase.Failed):
            candidate = CandidateStatus(
                revision=record.revision, index=record.index, phase=record.phase,
                since=record.since, lag=status_size.bounded_detail(record.lag),
                caught_up_since=record.caught_up_since,
                message=record.message, bad_records=record.bad_records,
                checks=checks.shown_run(self.ctx.spec, record.checks, record.caught_up_since,
                                        record.started_at))
        if deleting:
            phase = ViewPhase.Deleting
        elif candidate is not None:
            phase = ViewPhase(candidate.phase.value)
        elif active is not None and self.draft.active == self.ctx.desired:
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
                    seconds_between(last.time, self.ctx.now) < self.ctx.cfg.lag_history_seconds
                    or (last.messages, last.seconds) == (shown.lag.messages, shown.lag.seconds)):
                continue
            samples.append(LagSample(time=self.ctx.now, revision=shown.revision,
                                     messages=shown.lag.messages, seconds=shown.lag.seconds))
        return samples[-self.ctx.cfg.lag_history_limit:] if self.ctx.cfg.lag_history_limit else []

    def blocker(self) -> SwitchBlocker | None:
        hold = self.draft.promotion_hold
        return hold.blocker if hold is not None else None

    def assemble(self, deleting: bool) -> list[Action]:
        previous = self.ctx.obs.status
        phase, active, candidate = self.summary(deleting)
        shown = shown_lag(active, candidate)
        verdicts = self.verdicts(deleting)
        self.announce_job_problem(verdicts[cond.DEGRADED])
        spent_builds, spent_floor = status_size.bounded_spent_builds(self.draft.spent_builds,
                                                                     self.draft.spent_builds_floor)
        self.announce_integrity(verdicts[cond.DEGRADED])
        status = DerivedViewStatus(
            observed_generation=self.ctx.view.generation, phase=phase, revision=self.ctx.desired,
            active=active, candidate=candidate, lag_messages=shown.messages if shown else None,
            bad_records=shown_bad_records(active, candidate),
            checks=checks_column(self.ctx.spec, self.draft.records.get(self.ctx.desired)
                                                if self.ctx.desired != self.draft.active else None),
            revisions=[status_size.record_without_detail(r) for r in self.draft.records.values()],
            spent_builds=spent_builds, spent_builds_floor=spent_floor or None,
            held_secrets=self.draft.held_secrets,
            conditions=cond.build_conditions(
                switch_guard.overlay(verdicts, self.blocker(), self.ctx.desired),
                previous.conditions, self.ctx.now, self.ctx.view.generation),
            intent=None, last_cutover=self.draft.last_cutover or previous.last_cutover,
            lag_history=self.lag_history(previous.lag_history, active, candidate))
        effects: list[Action] = [*self.draft.finalizers_added, *self.draft.switches, *self.draft.deletes,
                                 *self.draft.creates, *self.draft.drop_aliases, *self.draft.drops,
                                 *self.draft.secret_holds]
        actions: list[Action] = []
        if effects:
            intent = Intent(steps=[describe(a) for a in [*effects, *self.draft.finalizers_removed]],
                            cutover_to=self.draft.cutover[0] if self.draft.cutover else None,
                            cutover_from=self.draft.cutover[1] if self.draft.cutover else None,
                            recorded_at=self.ctx.now)
            actions.append(RecordIntent(intent, {"intent": _dump(intent)}))
            actions.extend(effects)
        patch = merge_patch(_dump(previous), _dump(status))
        if effects:
            patch["intent"] = None  # RecordIntent wrote one; this pass has carried it out
        if patch and not self.draft.finalizers_removed:
            actions.append(UpdateStatus(status, patch))
        actions.extend(self.draft.events)
        actions.extend(self.draft.finalizers_removed)
        return actions


def shown_bad_records(active: ActiveStatus | None, candidate: CandidateStatus | None
                      ) -> int | None:
    """The BAD column: the same revision as the LAG column (the candidate's while built)."""
    shown = candidate if candidate is not None else active
    return shown.bad_records if shown is not None else None


def _dump(model: DerivedViewStatus | Intent) -> dict[str, Any]:
    dumped: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped
