"""The five conditions the status shows, each decided by an ordered chain of rules.

In order: the problem (core.planner.rules.problems, shown by Stalled and Degraded), a job that
cannot run (shown when there is no problem), Reconciling, Ready, CaughtUp. Each chain is a
tuple of small rules where the first that speaks wins; a chain's last rule always speaks.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from derived_views.api.constants import PAUSED_ANNOTATION
from derived_views.api.status import JobStage, Phase
from derived_views.core import conditions as cond
from derived_views.core import reasons
from derived_views.core.conditions import Verdict
from derived_views.core.cutover import switch_guard
from derived_views.core.job import stages
from derived_views.core.log import history
from derived_views.core.log.lag import within_gate
from derived_views.core.planner import readings
from derived_views.core.planner.context import Context
from derived_views.core.planner.draft import Draft
from derived_views.core.planner.rules.problems import PROBLEMS
from derived_views.core.planner.rules.standing import JobProblem, Rule, Standing, first, stand


def job_problem(s: Standing) -> JobProblem | None:
    """A job that cannot run until someone acts: the served revision's first, then the
    building candidate's. Nothing is torn down: the job runs once the cause is fixed.
    Not shown while the view is deleted or has a problem."""
    if s.problem is not None or s.deleting:
        return None
    for revision in (s.active, s.desired if s.building else None):
        judgement = None if revision is None else s.draft.job_problems.get(revision)
        if revision is not None and judgement is not None:
            return JobProblem(revision, judgement)
    return None


# Reconciling -------------------------------------------------------------------------------

def reconciling_deleting(s: Standing) -> Verdict | None:
    return Verdict("True", reasons.DELETING, "the view is being deleted") if s.deleting else None


def reconciling_paused(s: Standing) -> Verdict | None:
    if not s.ctx.paused:
        return None
    return Verdict("False", reasons.PAUSED, f"{PAUSED_ANNOTATION} is true: no actions are taken")


def building(s: Standing) -> Verdict | None:
    candidate = s.candidate
    if not s.building or candidate is None:
        return None
    hold = s.draft.promotion_hold  # core.planner.rules.promotion: the first rule that spoke
    reason = (hold.reason if hold is not None else
              reasons.CAUGHT_UP_REASON if candidate.phase == Phase.CaughtUp else reasons.BACKFILLING)
    said = "caught up" if candidate.phase == Phase.CaughtUp else candidate.phase.value.lower()
    message = f"revision {s.desired} is {said}: {s.lag_said}"
    hydrating = hydration_said(s)
    if hydrating:
        message += f"; {hydrating}"
    replay = stages.size_of(s.ctx.spec, candidate)
    if replay.stage is JobStage.Replay:
        executors = stages.executors_said(replay.executors_of(s.ctx.spec))
        message += (f"; replay stage: {executors}, restarted from its checkpoint in its steady "
                    "stage once its backlog is in its index")
    if hold is not None and hold.said:
        message += f"; {hold.said}"
    if s.ctx.spec.source.history == "fromLogStart":
        accepted = history.accepted_text(candidate.history_start, candidate.history_gaps)
        if accepted:
            message += f"; history accepted from the log's start (source.history): {accepted}"
    registry = s.ctx.obs.registry
    if registry is not None and registry.unregistered:
        message += (f"; no schema is registered under {', '.join(sorted(registry.unregistered))}"
                    " (records are read by their writers' schema ids)")
    return Verdict("True", reason, message)


def not_started(s: Standing) -> Verdict | None:
    """The desired revision has no record: refused (tenancy policy, then the spec's SQL),
    waiting for the schema registry, else about to start."""
    if s.desired == s.active or s.candidate is not None:
        return None
    for refusal in (s.ctx.policy_refusal, s.ctx.spec_refusal):
        if refusal is not None:
            return Verdict("False", refusal.reason, f"revision {s.desired} is refused")
    waiting = s.ctx.reader_hold or s.ctx.registry_problem
    if waiting is not None:
        return Verdict("False", waiting.reason, f"revision {s.desired} waits for the schema "
                                                "registry")
    return Verdict("True", reasons.STARTING, f"revision {s.desired} is about to start")


def hydration_said(s: Standing) -> str:
    """'hydrating: N of the M records that existed when it started are not in its index
    yet' while the candidate is not hydrated; '' once it is."""
    candidate = s.candidate
    if candidate is None or candidate.hydrated_at is not None:
        return ""
    topics = readings.topics_of(s.ctx, s.draft, s.desired)
    left = history.hydration_left(candidate.hydration_target, s.ctx.position_of(s.desired),
                                  s.ctx.obs.end_offsets, s.ctx.obs.log_starts, topics)
    if left is None:
        return "hydrating: the log's ends are not read yet"
    return (f"hydrating: {left} records that existed when it started are not in its index "
            "yet, and no gate opens before")


def reconciled(s: Standing) -> Verdict | None:
    # Also right after a cutover: this status is written only once the
    # switch has succeeded, so nothing is left in progress.
    return Verdict("False", reasons.RECONCILED, "")


RECONCILING_RULES: tuple[Rule, ...] = (
    reconciling_deleting, reconciling_paused, building, not_started, reconciled)


# Ready -------------------------------------------------------------------------------------

def ready_deleting(s: Standing) -> Verdict | None:
    return Verdict("False", reasons.DELETING, "the view is being deleted") if s.deleting else None


def has_problem(s: Standing) -> Verdict | None:
    return None if s.problem is None else Verdict("False", s.problem.reason, s.problem.message)


def job_cannot_run_and_nothing_serves(s: Standing) -> Verdict | None:
    if s.job_problem is None or s.active is not None:
        return None
    shown = s.job_problem.verdict()
    return Verdict("False", shown.reason, f"nothing serves yet: {shown.message}")


def sink_unknown(s: Standing) -> Verdict | None:
    if s.ctx.sink is not None:
        return None
    return Verdict("Unknown", reasons.SINK_UNREACHABLE, "could not ask the sink where the alias points")


def nothing_serves(s: Standing) -> Verdict | None:
    if s.active is not None:
        return None
    reconciling = s.reconciled()
    return Verdict("False", reconciling.reason if s.building else reasons.PENDING,
                   f"nothing serves yet: {reconciling.message or 'waiting'}")


def alias_misdirected(s: Standing) -> Verdict | None:
    ctx, draft = s.ctx, s.draft
    if s.active is None:
        return None
    switched = draft.switches[-1].to_index if draft.switches else (
        ctx.sink.alias_target if ctx.sink is not None else None)
    if switched == ctx.index(s.active):
        return None
    return Verdict("False", reasons.ALIAS_MISDIRECTED,
                   f"{ctx.qualified_alias} does not select from {ctx.index(s.active)}")


def active_stale(s: Standing) -> Verdict | None:
    """The served index is older than the gate (its job stopped, restarts or falls behind):
    Ready waits until it is fresh again, so a tool waiting on Ready does not move on while
    readers see old data. Judged by staleness only (a view that gates on messages alone,
    maxLagSeconds 0, and one whose staleness cannot be told are not judged)."""
    if s.active is None:
        return None
    record = s.active_record
    lag = s.draft.lags.get(s.active)
    cutover = s.ctx.spec.cutover
    if (record is None or lag is None or lag.seconds is None or cutover.max_lag_seconds <= 0
            or within_gate(lag, cutover)):
        return None
    return Verdict("False", reasons.STALE,
                   f"{s.ctx.qualified_alias} serves revision {s.active}, but its oldest missing record "
                   f"is {lag.seconds}s old (gate {cutover.max_lag_seconds}s, {lag.messages} "
                   "messages behind): Ready once it is back within the gate")


def older_revision_serves(s: Standing) -> Verdict | None:
    if s.active == s.desired:
        return None
    reconciling = s.reconciled()
    return Verdict("False", reconciling.reason,
                   f"revision {s.active} serves while {reconciling.message}")


def serving(s: Standing) -> Verdict | None:
    active = s.active
    assert active is not None  # nothing_serves spoke otherwise
    return Verdict("True", reasons.SERVING,
                   f"{s.ctx.qualified_alias} serves revision {active} from {s.ctx.index(active)}")


READY_RULES: tuple[Rule, ...] = (
    ready_deleting, has_problem, job_cannot_run_and_nothing_serves, sink_unknown,
    nothing_serves, alias_misdirected, active_stale, older_revision_serves, serving)


# CaughtUp ----------------------------------------------------------------------------------

def lag_unknown(s: Standing) -> Verdict | None:
    if s.lag is not None:
        return None
    return Verdict("Unknown", reasons.LAG_UNKNOWN, f"revision {s.desired}: lag unknown")


def not_hydrated(s: Standing) -> Verdict | None:
    said = hydration_said(s)
    if not said or not s.building:
        return None
    return Verdict("False", reasons.HYDRATING, f"revision {s.desired} is {said}")


def lag_within_gate(s: Standing) -> Verdict | None:
    if not readings.lag_gate(s.ctx, s.draft, s.desired, s.lag):
        return None
    return Verdict("True", reasons.LAG_WITHIN_GATE, f"revision {s.desired}: {s.lag_said}")


def lag_above_gate(s: Standing) -> Verdict | None:
    return Verdict("False", reasons.LAG_ABOVE_GATE, f"revision {s.desired}: {s.lag_said}")


CAUGHT_UP_RULES: tuple[Rule, ...] = (lag_unknown, not_hydrated, lag_within_gate, lag_above_gate)


# all five ----------------------------------------------------------------------------------

CALM = Verdict("False", reasons.AS_EXPECTED, "")


@dataclass(frozen=True)
class Verdicts:
    conditions: dict[str, Verdict]
    """By condition type, as the rules decided."""
    shown: dict[str, Verdict]
    """What the status shows: a switch blocker names itself in Reconciling and Degraded
    (core.cutover.switch_guard.overlay)."""
    job_problem: JobProblem | None


def judge_conditions(ctx: Context, draft: Draft, deleting: bool) -> Verdicts:
    s = stand(ctx, draft, deleting)
    s = replace(s, problem=first(PROBLEMS, s))
    s = replace(s, job_problem=job_problem(s))
    s = replace(s, reconciling=first(RECONCILING_RULES, s))
    ready, caught_up = first(READY_RULES, s), first(CAUGHT_UP_RULES, s)
    assert ready is not None and caught_up is not None  # their last rules always speak
    trouble = s.problem or (s.job_problem.verdict() if s.job_problem is not None else None)
    conditions = {cond.READY: ready, cond.RECONCILING: s.reconciled(),
                  cond.STALLED: trouble or CALM, cond.CAUGHT_UP: caught_up,
                  cond.DEGRADED: trouble or CALM}
    hold = draft.promotion_hold
    blocker = hold.blocker if hold is not None else None
    return Verdicts(conditions=conditions,
                    shown=switch_guard.overlay(conditions, blocker, ctx.desired),
                    job_problem=s.job_problem)
