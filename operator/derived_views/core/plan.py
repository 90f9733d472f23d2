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
    DerivedViewStatus,
    Intent,
    LagSample,
    Phase,
    ViewPhase,
    shown_lag,
)
from derived_views.core import (
    checks,
    integrity,
    ownership,
    partition_growth,
    status_size,
    switch_guard,
)
from derived_views.core import conditions as cond
from derived_views.core.actions import (
    Action,
    RecordIntent,
    UpdateStatus,
    describe,
)
from derived_views.core.job_state import (
    DRIVER_PENDING,
    JOB_COMPLETED,
    JOB_FAILED,
    Judgement,
    Kind,
)
from derived_views.core.lag import within_gate
from derived_views.core.observed import Observed, SwitchBlocker
from derived_views.core.patch import merge_patch
from derived_views.core.planner import (
    context,
    phases_candidate,
    phases_cutover,
    phases_deleting,
    phases_served,
    phases_start,
    readings,
)
from derived_views.core.planner.draft import Draft
from derived_views.core.planner.records import (
    BUILDING,
    TOPIC_MISSING,
    TOPIC_RESET,
    checks_column,
    failing_checks,
    lag_text,
)
from derived_views.core.sql_check import POLICY_VIOLATION
from derived_views.core.times import seconds_between, utc


def plan(spec: DerivedViewSpec, observed: Observed, now: dt.datetime) -> list[Action]:
    """Decide what to do for one view, given one observation and the time."""
    return _Planner(spec, observed, utc(now)).run()


class _Planner:
    def __init__(self, spec: DerivedViewSpec, observed: Observed, now: dt.datetime) -> None:
        self.ctx = context.build(spec, observed, now)
        self.draft = Draft.start(self.ctx)
        self.shown_job_problem: tuple[str, Judgement] | None = None

    def run(self) -> list[Action]:
        if self.ctx.view.deletion_timestamp is not None:
            if FINALIZER not in self.ctx.view.finalizers:
                return []  # nothing of ours holds the object
            phases_deleting.delete(self.ctx, self.draft)
            return self.assemble(deleting=True)
        if self.ctx.claimed_by is not None:
            phases_served.stop_all_jobs(self.ctx, self.draft)
            return self.assemble(deleting=False)
        if self.ctx.owned_refusal is not None:
            phases_served.stop_jobs_on_foreign_indexes(self.ctx, self.draft)
            return self.assemble(deleting=False)
        phases_cutover.resume_cutover(self.ctx, self.draft)
        if not self.ctx.paused:
            phases_start.ensure_finalizer(self.ctx, self.draft)
            phases_start.hold_sink_secret(self.ctx, self.draft)
            phases_start.supersede_others(self.ctx, self.draft)
            phases_start.start_desired(self.ctx, self.draft)
            phases_candidate.rebuild_lost_candidate(self.ctx, self.draft)
            phases_candidate.apply_job_settings(self.ctx, self.draft)
        phases_candidate.progress_desired(self.ctx, self.draft)
        phases_served.maintain_active(self.ctx, self.draft)
        phases_served.retire_and_tear_down(self.ctx, self.draft)
        phases_served.prune(self.ctx, self.draft)
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
        missing = sorted({t for r in serving for t in readings.missing_topics_of(self.ctx, self.draft, r)})
        resets = {r: readings.resets_of(self.ctx, self.draft, r) for r in dict.fromkeys(serving)}

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
        elif active is not None and (lost := readings.lost_cause(self.ctx, active)) is not None:
            problem = V("True", integrity.INDEX_LOST,
                        f"active revision {active}: {lost}; {self.ctx.where} "
                        + ("serves the incomplete table" if self.ctx.sink is not None
                           and self.ctx.sink.alias_target == self.ctx.index(active) else
                           "serves nothing")
                        + " and is not repaired onto it; apply a new revision (any change to "
                          "the view's content) to rebuild beside it, or roll back to a retained "
                          "revision")
        elif (grown := next((c for r in dict.fromkeys(serving)
                             if (c := readings.growth_cause(self.ctx, self.draft, r)) is not None), None)) is not None:
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
