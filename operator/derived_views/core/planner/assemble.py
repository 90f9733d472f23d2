"""The one place a pass ends: the status (summary, verdicts, lag history) and the actions
(intent, effects, status, upkeep, events, finalizer) built from the context and the
finished draft.

The effects come in a fixed order, after the intent that lists them; the status goes last
but for the events and a removed finalizer, so a restarted operator replans from the same
facts and resumes where the last pass stopped (see core.actions).
"""

from __future__ import annotations

from typing import Any

from derived_views.api.status import (
    ActiveStatus,
    CandidateStatus,
    DerivedViewStatus,
    Intent,
    LagSample,
    Phase,
    TopicLog,
    ViewPhase,
    shown_lag,
)
from derived_views.core import conditions as cond
from derived_views.core.actions import Action, RecordIntent, UpdateStatus, describe
from derived_views.core.cutover import checks
from derived_views.core.patch import merge_patch
from derived_views.core.planner import announce, readings, status_size
from derived_views.core.planner.context import Context
from derived_views.core.planner.draft import Draft
from derived_views.core.planner.records import BUILDING, checks_column
from derived_views.core.planner.rules import verdicts
from derived_views.core.times import seconds_between


def summary(ctx: Context, draft: Draft, deleting: bool
            ) -> tuple[ViewPhase, ActiveStatus | None, CandidateStatus | None]:
    active_record = draft.records.get(draft.active) if draft.active else None
    active = None if active_record is None else ActiveStatus(
        revision=active_record.revision, index=active_record.index,
        since=active_record.since, lag=status_size.bounded_detail(active_record.lag),
        bad_records=active_record.bad_records)
    record = draft.records.get(ctx.desired)
    candidate = None
    if record is not None and ctx.desired != draft.active and (
            record.phase in BUILDING or record.phase == Phase.Failed):
        candidate = CandidateStatus(
            revision=record.revision, index=record.index, phase=record.phase,
            since=record.since, lag=status_size.bounded_detail(record.lag),
            caught_up_since=record.caught_up_since,
            message=record.message, bad_records=record.bad_records,
            checks=checks.shown_run(ctx.spec, record.checks, record.caught_up_since,
                                    record.started_at),
            estimate=record.estimate, stage=record.stage)
    if deleting:
        phase = ViewPhase.Deleting
    elif candidate is not None:
        phase = ViewPhase(candidate.phase.value)
    elif active is not None and draft.active == ctx.desired:
        phase = ViewPhase.Active
    else:
        phase = ViewPhase.Pending
    return phase, active, candidate


def lag_history(ctx: Context, history: list[LagSample], active: ActiveStatus | None,
                candidate: CandidateStatus | None) -> list[LagSample]:
    """Append the served and the building revision's lag when it changed, spaced and
    bounded by the settings. An unchanged lag adds nothing (a sample holds until the next one,
    as `dv plot` draws it), so an idle view's status is not patched at all."""
    samples = list(history)
    for shown in (active, candidate):
        if shown is None or shown.lag is None:
            continue
        last = next((s for s in reversed(samples) if s.revision == shown.revision), None)
        if last is not None and (
                seconds_between(last.time, ctx.now) < ctx.settings.polling.history_seconds
                or (last.messages, last.seconds, last.eta_seconds, last.batch_read)
                == (shown.lag.messages, shown.lag.seconds, shown.lag.eta_seconds,
                    shown.lag.batch_read)):
            continue
        samples.append(LagSample(time=ctx.now, revision=shown.revision,
                                 messages=shown.lag.messages, seconds=shown.lag.seconds,
                                 eta_seconds=shown.lag.eta_seconds,
                                 batch_read=shown.lag.batch_read))
    return samples[-ctx.settings.polling.history_limit:] if ctx.settings.polling.history_limit else []


def shown_bad_records(active: ActiveStatus | None, candidate: CandidateStatus | None
                      ) -> int | None:
    """The BAD column: the same revision as the LAG column (the candidate's while built)."""
    shown = candidate if candidate is not None else active
    return shown.bad_records if shown is not None else None


def source_logs(ctx: Context, draft: Draft, previous: list[TopicLog]) -> list[TopicLog]:
    """The retention of the topics the served and the desired revisions read, as last read
    (the configs are read every few minutes: a pass without them keeps what was known)."""
    topics = sorted({t for r in (draft.active, ctx.desired) if r is not None
                     for t in readings.topics_of(ctx, draft, r)})
    known = {log.topic: log for log in previous}
    for topic in topics:
        config = ctx.obs.topic_configs.get(topic)
        if config is not None:
            known[topic] = TopicLog(topic=topic, cleanup_policy=config.cleanup_policy,
                                    retention_ms=config.retention_ms,
                                    retention_bytes=config.retention_bytes,
                                    remote_storage=config.remote_storage)
    return [known[t] for t in topics if t in known][:100]


def assemble(ctx: Context, draft: Draft, deleting: bool) -> list[Action]:
    previous = ctx.obs.status
    phase, active, candidate = summary(ctx, draft, deleting)
    shown = shown_lag(active, candidate)
    judged = verdicts.judge_conditions(ctx, draft, deleting)
    degraded = judged.conditions[cond.DEGRADED]
    if judged.job_problem is not None:
        announce.announce_job_problem(ctx, draft, judged.job_problem.revision,
                             judged.job_problem.judgement, degraded)
    announce.integrity_problem(ctx, draft, degraded)
    spent_builds, spent_floor = status_size.bounded_spent_builds(draft.spent_builds,
                                                                 draft.spent_builds_floor)
    status = DerivedViewStatus(
        observed_generation=ctx.view.generation, phase=phase, revision=ctx.desired,
        active=active, candidate=candidate, lag_messages=shown.messages if shown else None,
        bad_records=shown_bad_records(active, candidate),
        checks=checks_column(ctx.spec, draft.records.get(ctx.desired)
                             if ctx.desired != draft.active else None),
        revisions=[status_size.record_without_detail(r) for r in draft.records.values()],
        spent_builds=spent_builds, spent_builds_floor=spent_floor or None,
        held_secrets=draft.held_secrets,
        conditions=cond.build_conditions(judged.shown, previous.conditions, ctx.now,
                                         ctx.view.generation),
        intent=None, last_cutover=draft.last_cutover or previous.last_cutover,
        source_logs=source_logs(ctx, draft, previous.source_logs),
        lag_history=lag_history(ctx, previous.lag_history, active, candidate))
    effects: list[Action] = [*draft.finalizers_added, *draft.switches, *draft.deletes,
                             *draft.creates, *draft.drop_aliases, *draft.drops,
                             *draft.secret_holds]
    actions: list[Action] = []
    if effects:
        intent = Intent(steps=[describe(a) for a in [*effects, *draft.finalizers_removed]],
                        cutover_to=draft.cutover[0] if draft.cutover else None,
                        cutover_from=draft.cutover[1] if draft.cutover else None,
                        recorded_at=ctx.now)
        actions.append(RecordIntent(intent, {"intent": _dump(intent)}))
        actions.extend(effects)
    patch = merge_patch(_dump(previous), _dump(status))
    if effects:
        patch["intent"] = None  # RecordIntent wrote one; this pass has carried it out
    if patch and not draft.finalizers_removed:
        actions.append(UpdateStatus(status, patch))
    actions.extend(draft.upkeep)
    actions.extend(draft.events)
    actions.extend(draft.finalizers_removed)
    return actions


def _dump(model: DerivedViewStatus | Intent) -> dict[str, Any]:
    dumped: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped
