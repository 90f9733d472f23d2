"""What the observation says about one revision: topics, lag, resets, integrity, the gate.

`refresh` writes a revision's reading (job state, lag, gate) into its draft record; the rest
are questions the phases and the verdicts ask.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from derived_views.api.spec import Cutover
from derived_views.api.status import Lag, Phase
from derived_views.core.cutover import integrity
from derived_views.core.job.job_state import JobState, judge_job
from derived_views.core.log import build_rates, history, partition_growth
from derived_views.core.log.lag import compute_lag, reset_partitions, within_gate
from derived_views.core.planner.context import Context
from derived_views.core.planner.draft import Draft
from derived_views.core.planner.records import BUILDING


def follow_seconds(cutover: Cutover) -> int:
    """How long a replaced revision's job keeps following the log after the cutover:
    keepPreviousRunningSeconds, within the retain window (its index goes at its end)."""
    return min(cutover.keep_previous_running_seconds, cutover.retain_previous_seconds)


def follow_until(ctx: Context, revision: str) -> dt.datetime | None:
    """Until when a replaced revision's job keeps following the log (None: stop it now):
    `follow_seconds`, for a job that still runs."""
    keep = follow_seconds(ctx.spec.cutover)
    app = ctx.apps.get(revision)
    if keep <= 0 or ctx.paused or app is None or app.deleting or app.stopped:
        return None
    return ctx.now + dt.timedelta(seconds=keep)


def following(ctx: Context, draft: Draft, revision: str) -> bool:
    """A retiring revision whose job still follows the log inside its follow window."""
    record = draft.records[revision]
    app = ctx.apps.get(revision)
    return (record.phase == Phase.Retiring and record.follow_until is not None
            and ctx.now < record.follow_until and app is not None and not app.deleting
            and not app.stopped and not any(d.revision == revision for d in draft.deletes))


def topics_of(ctx: Context, draft: Draft, revision: str) -> list[str]:
    record = draft.records.get(revision)
    if record is not None and record.content is not None:
        return list(record.content.topics)
    return list(ctx.spec.source.topics) if revision == ctx.desired else []


def lag_of(ctx: Context, draft: Draft, revision: str) -> Lag | None:
    topics = topics_of(ctx, draft, revision)
    if ctx.obs.end_offsets is None or ctx.sink is None or not topics:
        return None
    return compute_lag(ctx.obs.end_offsets, topics, ctx.position_of(revision), ctx.now,
                       ctx.obs.record_times, ctx.sink.running.get(revision),
                       ctx.obs.log_starts)


def resets_of(ctx: Context, draft: Draft, revision: str) -> list[str]:
    """Partitions whose log fell below what the revision's index holds (see core.log.lag)."""
    if ctx.obs.end_offsets is None:
        return []
    return reset_partitions(ctx.obs.end_offsets, topics_of(ctx, draft, revision),
                            ctx.position_of(revision))


def missing_topics_of(ctx: Context, draft: Draft, revision: str) -> list[str]:
    return sorted(set(topics_of(ctx, draft, revision)) & ctx.obs.missing_topics)


def lost_cause(ctx: Context, revision: str) -> str | None:
    """Why the revision's index no longer holds what its ledger claims (core.cutover.integrity)."""
    if ctx.sink is None:
        return None
    return integrity.lost_index_cause(ctx.index(revision), ctx.position_of(revision),
                                      ctx.sink.index_oids)


def revision_growth_cause(ctx: Context, draft: Draft, revision: str) -> str | None:
    """Why partition growth may have made the revision's index wrong (core.log.partition_growth)."""
    record = draft.records.get(revision)
    if record is None:
        return None
    sql = (record.content.sql if record.content is not None
           else ctx.spec.transform.sql if revision == ctx.desired else None)
    return partition_growth.growth_cause(revision, sql, record.source_partitions,
                                         ctx.obs.end_offsets)


def partitions_now(ctx: Context, draft: Draft, revision: str) -> dict[str, int] | None:
    if ctx.obs.end_offsets is None:
        return None
    counts = partition_growth.partition_counts(ctx.obs.end_offsets, topics_of(ctx, draft, revision))
    return counts or None  # no topic described yet: record it on a later pass


def lag_gate(ctx: Context, draft: Draft, revision: str, lag: Lag | None) -> bool:
    """The lag gate, the one definition (the CaughtUp condition shows it): close enough to
    the log in messages or in time (core.log.lag.within_gate), on no reset partition."""
    return within_gate(lag, ctx.spec.cutover) and not resets_of(ctx, draft, revision)


def gate_holds(ctx: Context, draft: Draft, revision: str, lag: Lag | None,
               running: bool) -> bool:
    """What a candidate (or a following retiring job) needs for its gate to count: the lag
    gate, hydrated, its job running, its index there and whole."""
    return (lag_gate(ctx, draft, revision, lag)
            and draft.records[revision].hydrated_at is not None and running
            and bool(ctx.index_exists(revision))
            and lost_cause(ctx, revision) is None and revision_growth_cause(ctx, draft, revision) is None)


def current_hydration_target(ctx: Context, topics: list[str]) -> dict[str, int] | None:
    """The end offsets now, as a new build's hydration target (None: not read this pass)."""
    if ctx.obs.end_offsets is None or not topics:
        return None
    return history.hydration_target(ctx.obs.end_offsets, topics)


def shortfall_of(ctx: Context, draft: Draft, revision: str) -> history.Shortfall:
    """What the revision's index lacks (core.log.history): against where the active's history
    starts, or offset 0 for a view's first revision (and for the active itself)."""
    record = draft.records.get(revision)
    topics = topics_of(ctx, draft, revision)
    if record is None or not topics:
        return history.Shortfall({}, {})
    active = draft.records.get(draft.active) if draft.active not in (None, revision) else None
    baseline: dict[str, int] = {}
    if active is not None:
        known = history.start_of(active.history_start, ctx.position_of(active.revision),
                                 None, topics)
        baseline = known[0] if known is not None else {}
    start = history.start_of(record.history_start, ctx.position_of(revision),
                             ctx.obs.log_starts, topics)
    gaps = record.history_gaps
    if revision != draft.active:  # a failed job's gap is seen now, never recorded while building
        gaps = history.merged_gaps(gaps, gaps_seen(ctx, revision, record.history_start, topics))
    return history.shortfall(start, baseline, gaps)


def gaps_seen(ctx: Context, revision: str, recorded: dict[str, int] | None,
              topics: list[str]) -> dict[str, int]:
    """Records the log has deleted before the revision's replay read them, as this pass
    sees it (core.log.history.gaps_now)."""
    if ctx.sink is None:
        return {}
    position = ctx.position_of(revision)
    known = history.start_of(recorded, position, None, topics)
    return history.gaps_now(position, known[0] if known is not None else None,
                            ctx.obs.log_starts, topics, ctx.sink.running.get(revision))


def observe_history(ctx: Context, draft: Draft, revision: str, building: bool
                    ) -> dict[str, Any]:
    """Record where the revision's history starts (once its job says), the gaps the log
    made before its replay read them (while it builds), and when it is hydrated."""
    record = draft.records[revision]
    topics = topics_of(ctx, draft, revision)
    position = ctx.position_of(revision)
    changes: dict[str, Any] = {}
    if record.history_start is None and position is not None \
            and position.history_start is not None:
        changes["history_start"] = history.nonzero(history.keyed(position.history_start,
                                                                 topics))
    seen = gaps_seen(ctx, revision, changes.get("history_start", record.history_start),
                     topics) if building else {}
    if seen:
        changes["history_gaps"] = history.merged_gaps(record.history_gaps, seen)
    if record.hydrated_at is None and record.phase in (Phase.Active, Phase.Retiring):
        changes["hydrated_at"] = ctx.now  # served before hydration was recorded
    elif record.hydrated_at is None:
        target = record.hydration_target
        if target is None and building:
            target = current_hydration_target(ctx, topics)
            if target is not None:
                changes["hydration_target"] = target
        if ctx.sink is not None and history.hydrated(target, position, ctx.obs.end_offsets,
                                                     ctx.obs.log_starts, topics):
            changes.update(hydrated_at=ctx.now, hydration_target=None)  # done: kept small
    return changes


def observe_build(ctx: Context, draft: Draft, revision: str, lag: Lag | None) -> Lag | None:
    """While a build is not hydrated: its estimate (once, on its first pass with a lag: what
    is behind then, at the rate core.log.build_rates assumes) and its measured rate, from
    the ledger's newest commit. Returns the lag with the estimate's ETA until one is measured."""
    record = draft.records[revision]
    if record.hydrated_at not in (None, ctx.now):  # hydrated on this pass: its last commit counts
        return lag
    topics = topics_of(ctx, draft, revision)
    changes: dict[str, Any] = {}
    estimate = record.estimate
    if estimate is None and lag is not None and record.hydrated_at is None:
        rate = build_rates.assumed_rate(draft.records.values(), draft.active,
                                        build_rates.default_rate(ctx.settings.spark))
        estimate = changes["estimate"] = build_rates.estimate_of(lag.messages, rate)
    before = ctx.obs.status.record(revision)
    kept = (record.build_rate if before is not None and before.started_at == record.started_at
            else None)  # a new attempt measures afresh
    position = ctx.position_of(revision)
    start = history.start_of(record.history_start, position, None, topics)
    if position is not None and position.committed_at is not None and start is not None \
            and position.committed_at >= record.started_at:
        committed = sum(max(offset - start[0].get(history.key(tp), 0), 0)
                        for tp, offset in position.end_offsets.items() if tp[0] in topics)
        seconds = (position.committed_at - record.started_at).total_seconds()
        kept = build_rates.measured_rate(kept, committed, seconds)
    if kept != record.build_rate:
        changes["build_rate"] = kept
    draft.set(revision, **changes)
    if record.hydrated_at is not None:
        return lag
    return build_rates.with_estimate(lag, estimate,
                                     (ctx.now - record.started_at).total_seconds())


def refresh(ctx: Context, draft: Draft, revision: str) -> None:
    """Refresh job state and lag; for a building candidate, track the gate."""
    record = draft.records[revision]
    app = ctx.apps.get(revision)
    changes: dict[str, Any] = {}
    replacing = any(d.revision == revision for d in draft.deletes)
    if app is not None and not app.deleting and not replacing:
        changes.update(job_state=app.state or None, execution_attempts=app.execution_attempts)
        app_live = True
        judgement = judge_job(app)
        if judgement.kind in (JobState.BLOCKED, JobState.SUSPENDED):
            draft.job_problems[revision] = judgement
    else:
        changes.update(job_state=None, execution_attempts=None)
        app_live = False
    lag = lag_of(ctx, draft, revision)
    draft.lags[revision] = lag
    if lag is not None:
        changes["lag"] = lag
    if ctx.sink is not None and revision in ctx.sink.ledger:
        changes["bad_records"] = ctx.sink.bad_records.get(revision, 0)
    if record.source_partitions is None:
        changes["source_partitions"] = partitions_now(ctx, draft, revision)
    building = record.phase in BUILDING and revision != draft.active
    draft.set(revision, **observe_history(ctx, draft, revision, building))
    if building:
        lag = observe_build(ctx, draft, revision, lag)
        draft.lags[revision] = lag
        if lag is not None:
            changes["lag"] = lag
    if building:
        running = app_live and app is not None and app.running
        committed = (ctx.sink is not None and revision in ctx.sink.ledger
                     and lost_cause(ctx, revision) is None)
        if lag is None:
            if record.phase == Phase.Pending and running:
                changes["phase"] = Phase.Backfilling
        else:
            gate = gate_holds(ctx, draft, revision, lag, running)
            changes["caught_up_since"] = (record.caught_up_since or ctx.now) if gate else None
            changes["phase"] = (Phase.CaughtUp if gate else
                                Phase.Backfilling if running or committed else Phase.Pending)
    draft.set(revision, **changes)
