"""What the observation says about one revision: topics, lag, resets, integrity, the gate.

`observe` writes a revision's reading (job state, lag, gate) into its draft record; the rest
are questions the phases and the verdicts ask.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from derived_views.api.status import Lag, Phase
from derived_views.core import integrity, partition_growth
from derived_views.core.job_state import Kind, judge
from derived_views.core.lag import compute_lag, reset_partitions, within_gate
from derived_views.core.planner.context import Context
from derived_views.core.planner.draft import Draft
from derived_views.core.planner.records import BUILDING


def follow_until(ctx: Context, revision: str) -> dt.datetime | None:
    """Until when a replaced revision's job keeps following the log (None: stop it now):
    keepPreviousRunningSeconds, within the retain window, for a job that still runs."""
    cutover = ctx.spec.cutover
    keep = min(cutover.keep_previous_running_seconds, cutover.retain_previous_seconds)
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
                       ctx.obs.record_times, ctx.sink.running.get(revision))


def resets_of(ctx: Context, draft: Draft, revision: str) -> list[str]:
    """Partitions whose log fell below what the revision's index holds (see core.lag)."""
    if ctx.obs.end_offsets is None:
        return []
    return reset_partitions(ctx.obs.end_offsets, topics_of(ctx, draft, revision),
                            ctx.position_of(revision))


def missing_topics_of(ctx: Context, draft: Draft, revision: str) -> list[str]:
    return sorted(set(topics_of(ctx, draft, revision)) & ctx.obs.missing_topics)


def lost_cause(ctx: Context, revision: str) -> str | None:
    """Why the revision's index no longer holds what its ledger claims (core.integrity)."""
    if ctx.sink is None:
        return None
    return integrity.lost_index_cause(ctx.index(revision), ctx.position_of(revision),
                                      ctx.sink.index_oids)


def growth_cause(ctx: Context, draft: Draft, revision: str) -> str | None:
    """Why partition growth may have made the revision's index wrong (core.partition_growth)."""
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


def gate_holds(ctx: Context, draft: Draft, revision: str, lag: Lag | None,
               running: bool) -> bool:
    """The lag gate on this reading, for a candidate and for a following retiring job:
    within the gate, its job running, no reset partition, its index there and whole."""
    return (within_gate(lag, ctx.spec.cutover) and running
            and not resets_of(ctx, draft, revision) and bool(ctx.index_exists(revision))
            and lost_cause(ctx, revision) is None and growth_cause(ctx, draft, revision) is None)


def observe(ctx: Context, draft: Draft, revision: str) -> None:
    """Refresh job state and lag; for a building candidate, track the gate."""
    record = draft.records[revision]
    app = ctx.apps.get(revision)
    changes: dict[str, Any] = {}
    replacing = any(d.revision == revision for d in draft.deletes)
    if app is not None and not app.deleting and not replacing:
        changes.update(job_state=app.state or None, execution_attempts=app.execution_attempts)
        app_live = True
        judgement = judge(app)
        if judgement.kind in (Kind.BLOCKED, Kind.SUSPENDED):
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
    if record.phase in BUILDING and revision != draft.active:
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
