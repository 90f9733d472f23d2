"""The view's problem (Stalled and Degraded): an ordered chain of rules, the first that speaks
wins. Each rule is one cause; the order says which cause is shown when several hold."""

from __future__ import annotations

from collections.abc import Iterable

from derived_views.api.constants import RETRY_ANNOTATION
from derived_views.api.status import Phase
from derived_views.core import ownership, reasons
from derived_views.core.conditions import Verdict
from derived_views.core.log import history
from derived_views.core.planner import readings
from derived_views.core.planner.records import BUILDING, failing_checks
from derived_views.core.planner.rules.standing import Rule, Standing


def checkpoint_text(problem: str) -> str:
    """What Stalled says of a checkpoint base no pod can share (dv plan says the same)."""
    return (f"spec.spark.checkpointBase: {problem}; remove it to use the operator's base, or "
            "name a store every pod reaches")


def policy_text(message: str) -> str:
    """What Stalled says of a spec the tenancy policy refuses (dv plan says the same)."""
    return f"{message}; no job of this view starts until then"


def spec_refused_text(message: str, revision: str) -> str:
    """What Stalled says of a spec the transform's judges refuse (dv plan says the same)."""
    return f"{message.rstrip('.')}; no job is started for revision {revision}"


def reader_hold_text(message: str, revision: str) -> str:
    """What Stalled says of a pinned reader schema not known (dv plan says the same)."""
    return (f"{message.rstrip('.')}; no job is started for revision {revision} until its "
            "reader schema is read")


def registry_text(message: str) -> str:
    """What Stalled says of a schema registry that cannot be asked (dv plan says the same)."""
    return (f"{message.rstrip('.')}; no job of this view is started until the registry can be "
            "asked (running jobs are left alone)")


def topic_missing_text(topics: Iterable[str], bootstrap_servers: str) -> str:
    """What Stalled says of topics the cluster lacks (dv plan says the same)."""
    return (f"topic(s) {', '.join(topics)} not found on {bootstrap_servers}: create them or "
            "fix spec.source.topics; no job reads a topic that does not exist")


def deletion_blocked(s: Standing) -> Verdict | None:
    return s.draft.deletion_problem


def checkpoint_not_durable(s: Standing) -> Verdict | None:
    if s.ctx.checkpoint_problem is None:
        return None
    return Verdict("True", reasons.CHECKPOINT_NOT_DURABLE,
                   checkpoint_text(s.ctx.checkpoint_problem))


def job_namespace_unusable(s: Standing) -> Verdict | None:
    problem = s.ctx.obs.job_namespace_problem
    if problem is None:
        return None
    return Verdict("True", problem[0], problem[1] + s.keeps_serving)


def refused_by_policy(s: Standing) -> Verdict | None:
    refusal = s.ctx.policy_refusal
    if refusal is None:
        return None
    return Verdict("True", refusal.reason, policy_text(refusal.message) + s.keeps_serving)


def spec_refused(s: Standing) -> Verdict | None:
    refusal = s.ctx.spec_refusal
    if refusal is None or s.desired == s.active:
        return None
    return Verdict("True", refusal.reason,
                   spec_refused_text(refusal.message, s.desired) + s.keeps_serving)


def reader_schema_unknown(s: Standing) -> Verdict | None:
    hold = s.ctx.reader_hold
    if hold is None or s.desired == s.active:
        return None
    return Verdict("True", hold.reason, reader_hold_text(hold.message, s.desired) + s.keeps_serving)


def check_refused(s: Standing) -> Verdict | None:
    if s.ctx.check_refusal is None or s.desired == s.active:
        return None
    name, why = s.ctx.check_refusal
    return Verdict("True", reasons.POLICY_VIOLATION,
                   f"cutover.checks.assertions {name}: {why.rstrip('.')}; revision "
                   f"{s.desired} is not promoted until the check is fixed (no replay needed)"
                   + s.keeps_serving)


def sink_table_claimed(s: Standing) -> Verdict | None:
    ctx = s.ctx
    if ctx.claimed_by is None:
        return None
    return Verdict("True", reasons.SINK_TABLE_CLAIMED, ownership.claim_message(
        ctx.claimed_by, ctx.view, ctx.qualified_alias, ctx.alias_field))


def index_owned_by_another_view(s: Standing) -> Verdict | None:
    ctx, active = s.ctx, s.active
    if ctx.owned_refusal is None:
        return None
    index, owner = ctx.owned_refusal
    ours = active if active and ctx.index(active) not in ctx.foreign else None
    return Verdict("True", reasons.INDEX_OWNED_BY_ANOTHER_VIEW, ownership.refusal_message(
        index, owner, ctx.view, ctx.qualified_alias, ctx.alias_field, ours))


def sink_unreadable(s: Standing) -> Verdict | None:
    if s.ctx.sink is not None or s.ctx.obs.sink_problem is None:
        return None
    reason, detail = s.ctx.obs.sink_problem
    return Verdict("True", reason,
                   f"{detail}; nothing is switched or dropped until the sink can be read")


def source_unreadable(s: Standing) -> Verdict | None:
    if s.ctx.obs.end_offsets is not None or s.ctx.obs.source_problem is None:
        return None
    reason, detail = s.ctx.obs.source_problem
    return Verdict("True", reason, f"{detail}; lag is unknown, so no revision is promoted")


def registry_unreadable(s: Standing) -> Verdict | None:
    problem = s.ctx.registry_problem
    if problem is None:
        return None
    return Verdict("True", problem.reason, registry_text(problem.message) + s.keeps_serving)


def topic_missing(s: Standing) -> Verdict | None:
    if not s.missing:
        return None
    return Verdict("True", reasons.TOPIC_MISSING,
                   topic_missing_text(s.missing, s.ctx.spec.source.kafka.bootstrap_servers))


def topic_reset(s: Standing) -> Verdict | None:
    revision = next((r for r, parts in s.resets.items() if parts), None)
    if revision is None:
        return None
    return Verdict("True", reasons.TOPIC_RESET,
                   f"the log is behind the index of revision {revision} on "
                   f"{', '.join(s.resets[revision])} (end offset below the committed "
                   "one): the topic was deleted and recreated or truncated, so that index "
                   "holds records the log no longer has and is never treated as caught "
                   "up; change the view's content to rebuild from the new log")


def active_index_lost(s: Standing) -> Verdict | None:
    active, ctx = s.active, s.ctx
    lost = None if active is None else readings.lost_cause(ctx, active)
    if active is None or lost is None:
        return None
    serves = ("serves the incomplete table" if ctx.sink is not None
              and ctx.sink.alias_target == ctx.index(active) else "serves nothing")
    return Verdict("True", reasons.INDEX_LOST,
                   f"active revision {active}: {lost}; {ctx.qualified_alias} {serves}"
                   " and is not repaired onto it; apply a new revision (any change to "
                   "the view's content) to rebuild beside it, or roll back to a retained "
                   "revision")


def partitions_grew(s: Standing) -> Verdict | None:
    grown = next((cause for r in dict.fromkeys(s.serving)
                  if (cause := readings.revision_growth_cause(s.ctx, s.draft, r)) is not None), None)
    return None if grown is None else Verdict("True", reasons.PARTITIONS_GREW, grown)


def serves_less_history(s: Standing) -> Verdict | None:
    """The building revision would serve less history than readers have (core.log.history), and
    the spec asks for the complete history: it builds on, but is never promoted."""
    candidate, ctx = s.candidate, s.ctx
    if candidate is None or ctx.spec.source.history != "complete" or candidate.phase not in (
            *BUILDING, Phase.Failed):
        return None
    short = readings.shortfall_of(ctx, s.draft, s.desired)
    if not short:
        return None
    topics = readings.topics_of(ctx, s.draft, s.desired)
    return Verdict("True", reasons.HISTORY_INCOMPLETE, history.incomplete_message(
        s.desired, s.active, short, history.retention_text(topics, ctx.obs.topic_configs)))


def candidate_failed(s: Standing) -> Verdict | None:
    candidate = s.candidate
    if candidate is None or candidate.phase != Phase.Failed:
        return None
    return Verdict("True", candidate.reason or reasons.JOB_FAILED,
                   f"revision {s.desired}: {candidate.message or 'failed'}; {s.who_serves}"
                   f"; set a new value of {RETRY_ANNOTATION} or change the spec to retry")


def checks_failing(s: Standing) -> Verdict | None:
    failing = failing_checks(s.ctx.spec, s.candidate)
    if failing is None:
        return None
    reason, text = failing
    return Verdict("True", reason,
                   f"revision {s.desired} is not promoted: {text}; {s.who_serves}"
                   "; fix the transform (a new revision) or the check (re-run, no replay)")


def active_job_stopped(s: Standing) -> Verdict | None:
    record = s.active_record
    if record is None or record.reason not in (reasons.JOB_FAILED, reasons.JOB_COMPLETED):
        return None
    return Verdict("True", record.reason,
                   f"the job of active revision {s.active} stopped: {record.message}; "
                   "the index no longer follows the log")


def active_index_missing(s: Standing) -> Verdict | None:
    record, sink = s.active_record, s.ctx.sink
    if record is None or sink is None or record.index in sink.indexes:
        return None
    return Verdict("True", reasons.INDEX_MISSING,
                   f"index {record.index} of active revision {s.active} is missing")


PROBLEMS: tuple[Rule, ...] = (
    deletion_blocked,
    checkpoint_not_durable,
    job_namespace_unusable,
    refused_by_policy,
    reader_schema_unknown,
    spec_refused,
    check_refused,
    sink_table_claimed,
    index_owned_by_another_view,
    sink_unreadable,
    source_unreadable,
    registry_unreadable,
    topic_missing,
    topic_reset,
    active_index_lost,
    partitions_grew,
    serves_less_history,
    candidate_failed,
    checks_failing,
    active_job_stopped,
    active_index_missing,
)
"""The causes a view can be Stalled and Degraded for, the one shown first."""
