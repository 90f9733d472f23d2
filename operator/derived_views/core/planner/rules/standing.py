"""What the verdict rules read: the context, the finished draft, and facts computed once.

A rule is a small function of the standing that returns a verdict or None; a chain is an
ordered tuple of rules where the first that speaks wins (`first`). The chains run in order
(problem, job problem, Reconciling, Ready, CaughtUp) and each one's result is put on the
standing the next one reads (`dataclasses.replace`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from derived_views.api.status import Lag, RevisionStatus
from derived_views.core import conditions as cond
from derived_views.core.job.job_state import Judgement
from derived_views.core.planner import readings
from derived_views.core.planner.context import Context
from derived_views.core.planner.draft import Draft
from derived_views.core.planner.records import BUILDING, lag_text


@dataclass(frozen=True)
class JobProblem:
    """A job that cannot run until someone acts, as the view shows it."""

    revision: str
    judgement: Judgement

    def verdict(self) -> cond.Verdict:
        return cond.Verdict("True", self.judgement.reason,
                            f"revision {self.revision}: {self.judgement.message}")


@dataclass(frozen=True)
class Standing:
    ctx: Context
    draft: Draft
    deleting: bool
    desired: str
    active: str | None
    candidate: RevisionStatus | None
    """The desired revision's record while it is not the active one."""
    active_record: RevisionStatus | None
    building: bool
    """The candidate is building (Pending, Backfilling, CaughtUp)."""
    lag: Lag | None
    """The desired revision's lag."""
    lag_said: str
    serving: tuple[str, ...]
    """The active and the desired revision (either may be absent)."""
    missing: tuple[str, ...]
    """Topics of `serving` the cluster says do not exist, sorted."""
    resets: Mapping[str, list[str]]
    """Reset partitions of each of `serving`."""
    # the results of the earlier chains
    problem: cond.Verdict | None = None
    job_problem: JobProblem | None = None
    reconciling: cond.Verdict | None = None

    @property
    def keeps_serving(self) -> str:
        """', revision X keeps serving' while one serves, else ''."""
        return f", revision {self.active} keeps serving" if self.active else ""

    @property
    def who_serves(self) -> str:
        return f"revision {self.active} keeps serving" if self.active else "nothing serves"

    def reconciled(self) -> cond.Verdict:
        """The Reconciling verdict (Ready's rules run after it)."""
        assert self.reconciling is not None
        return self.reconciling


Rule = Callable[[Standing], cond.Verdict | None]


def first(rules: Sequence[Rule], standing: Standing) -> cond.Verdict | None:
    """The verdict of the first rule that speaks; None when none does."""
    for rule in rules:
        verdict = rule(standing)
        if verdict is not None:
            return verdict
    return None


def stand(ctx: Context, draft: Draft, deleting: bool) -> Standing:
    desired, active = ctx.desired, draft.active
    record = draft.records.get(desired)
    candidate = record if desired != active else None
    lag = draft.lags.get(desired)
    serving = tuple(r for r in (active, desired) if r is not None)
    return Standing(
        ctx=ctx, draft=draft, deleting=deleting, desired=desired, active=active,
        candidate=candidate,
        active_record=draft.records.get(active) if active else None,
        building=candidate is not None and candidate.phase in BUILDING,
        lag=lag, lag_said=lag_text(lag, ctx.spec), serving=serving,
        missing=tuple(sorted({t for r in serving
                              for t in readings.missing_topics_of(ctx, draft, r)})),
        resets={r: readings.resets_of(ctx, draft, r) for r in dict.fromkeys(serving)})
