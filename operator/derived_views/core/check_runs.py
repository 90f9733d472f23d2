"""A run of a view's cutover checks as the shell carries it: what is asked of the sink, and
what the check runner holds for a pass. Plain data below the observation (the observation
holds a `Held`, an action a `CheckRequest`); core.cutover.checks decides when to ask."""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from derived_views.api.spec import CutoverChecks, SqlAssertion
from derived_views.api.status import CheckRun


class CheckKind(StrEnum):
    """The kinds of cutover check, in the order a run measures and shows them."""

    ROW_COUNT = "rowCount"
    """Row-count parity with the active index (same primary key only)."""
    KEY_SAMPLE = "keySample"
    """Key-set parity on sampled keys (same primary key only)."""
    DIFF = "diff"
    """Row-by-row values against the active index (same primary key only)."""
    ASSERTION = "assertion"
    """A team's SQL assertion (PostgreSQL only); its result is named after it."""


EXAMPLES = 3
"""Keys (or rows) a failing check shows as examples, from either sink."""
PARITY = frozenset({CheckKind.ROW_COUNT, CheckKind.KEY_SAMPLE, CheckKind.DIFF})
"""The kinds that compare with the active index: skipped without one, or across a new key."""


@dataclass(frozen=True)
class Planned:
    """One check of a run: its kind, the name its result carries, the assertion if it is one."""

    kind: CheckKind
    name: str
    assertion: SqlAssertion | None = None


def configured(checks: CutoverChecks) -> list[Planned]:
    """Every check the spec configures, in the order runs and the status show them: the one
    registry the runner, both sinks' adapters and the judge iterate (a new kind is added
    here, and where it is measured and judged)."""
    out = []
    if checks.row_count is not None:
        out.append(Planned(CheckKind.ROW_COUNT, CheckKind.ROW_COUNT.value))
    if checks.key_sample is not None:
        out.append(Planned(CheckKind.KEY_SAMPLE, CheckKind.KEY_SAMPLE.value))
    if checks.diff is not None:
        out.append(Planned(CheckKind.DIFF, CheckKind.DIFF.value))
    out.extend(Planned(CheckKind.ASSERTION, a.name, a) for a in checks.assertions)
    return out


def measured(request: CheckRequest) -> list[Planned]:
    """The checks a run of `request` measures: parity checks only with the same key."""
    return [p for p in configured(request.checks) if request.parity or p.kind not in PARITY]


@dataclass(frozen=True)
class CheckRequest:
    """What the adapter runs: the candidate's index, the active's, and the checks."""

    revision: str
    schema: str
    index: str
    active_index: str | None
    """None for a view's first revision: parity checks are skipped."""
    primary_key: tuple[str, ...]
    same_key: bool
    """The active's primary key is the candidate's: parity checks compare like with like."""
    checks: CutoverChecks
    checks_hash: str
    active_revision: str | None = None
    """The active index's revision: the diff check reads where its ledger stands."""
    budget_seconds: float | None = None
    """Seconds all of the run's queries may take together (the operator's
    DV_CHECK_BUDGET_SECONDS): 32 assertions of up to an hour each must not hold a sink
    connection and a check worker for a day. None: each query's own timeout only."""

    @property
    def parity(self) -> bool:
        return self.active_index is not None and self.same_key


def same_request(a: CheckRequest, b: CheckRequest) -> bool:
    """The same checks of the same tables (the budget is the runner's, not the request's)."""
    return replace(a, budget_seconds=None) == replace(b, budget_seconds=None)


@dataclass(frozen=True)
class Finished:
    """A finished run as the check runner holds it until a pass takes it: what was asked,
    and its judged results (dated when it was submitted)."""

    request: CheckRequest
    run: CheckRun


@dataclass(frozen=True)
class Held:
    """What the operator's check runner holds for a view, as a pass reads it."""

    finished: Finished | None = None
    in_flight: bool = False
    """A run of the view is queued or measuring: no second one is submitted."""
