"""The planner's vocabulary about revision records: phase groups, texts, check columns."""

from __future__ import annotations

from derived_views.api.spec import DerivedViewSpec
from derived_views.api.status import Lag, Phase, RevisionStatus
from derived_views.core.cutover import checks
from derived_views.core.cutover.deadlines import TORN_DOWN_REASONS

BUILDING = frozenset({Phase.Pending, Phase.Backfilling, Phase.CaughtUp})
FINISHED = frozenset({Phase.Retired, Phase.Superseded, Phase.Failed})

NEW_BUILD: dict[str, None] = dict(history_start=None, history_gaps=None,
                                  hydration_target=None, hydrated_at=None, estimate=None,
                                  build_rate=None, stage=None, replay_executors=None)
"""What a rebuild from offset 0 forgets: where the old build's history started, its gaps, its
hydration, its estimate, its measured rate and its job's stage (the new build's are observed
afresh)."""

MAX_MESSAGE = 1024


def clip_message(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE - 3] + "..."


def lag_text(lag: Lag | None, spec: DerivedViewSpec) -> str:
    if lag is None:
        return "lag unknown"
    gate = spec.cutover
    text = f"lag {lag.messages} messages (gate {gate.max_lag_messages})"
    if lag.messages and gate.max_lag_seconds:
        shown = "unknown" if lag.seconds is None else f"{lag.seconds}s"
        text += f", oldest missing record {shown} old (gate {gate.max_lag_seconds}s)"
    if lag.messages and lag.eta_seconds is not None:
        text += f", about {lag.eta_seconds}s to drain"
        text += " (estimate)" if lag.eta_estimated else ""
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


def failing_checks(spec: DerivedViewSpec, candidate: RevisionStatus | None
                   ) -> tuple[str, str] | None:
    """(reason, text) while the building candidate's shown check run fails."""
    if candidate is None or candidate.phase not in BUILDING:
        return None
    run = checks.shown_run(spec, candidate.checks, candidate.caught_up_since,
                           candidate.started_at)
    return None if run is None or run.passed else checks.failure_text(run)


def checks_column(spec: DerivedViewSpec, candidate: RevisionStatus | None) -> str | None:
    """The CHECKS column: only while a candidate is built under checks."""
    if (candidate is None or candidate.phase not in BUILDING
            or checks.checks_of(spec) is None):
        return None
    return checks.checks_summary(checks.shown_run(spec, candidate.checks,
                                           candidate.caught_up_since, candidate.started_at))
