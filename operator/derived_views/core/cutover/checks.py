"""Cutover checks: what a candidate's index must show before readers are switched to it.

A lag gate says the candidate has read the log; it says nothing of what its transform
made of it. A wrong JOIN or a WHERE that filters too much is caught-up and wrong. So
once the gate holds, the shell runs the checks the spec names against the candidate's
index (this module says when, and what), an adapter measures, and this module judges
the measurements; the planner switches only on a passing run made while the gate held.

Pure: the planner asks `due` each pass and plans a run of the `CheckRequest` (the shell
queues it on its check runner, an adapter measures); the shell gives `judge_checks` what the
adapter measured, and a later pass's planner takes the judged run (`Held`).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass

from derived_views.api.spec import (
    ACTIVE_PLACEHOLDER,
    INDEX_PLACEHOLDER,
    CutoverChecks,
    DerivedViewSpec,
    SqlAssertion,
)
from derived_views.api.status import (
    CheckOutcome,
    CheckResult,
    CheckRun,
    DerivedViewStatus,
    Phase,
)
from derived_views.core import reasons
from derived_views.core.check_runs import PARITY, CheckKind, CheckRequest, configured
from derived_views.core.cutover.diff import DiffFound, judge_diff
from derived_views.core.judges.assertion_sql import check_sql_problem
from derived_views.core.revision import revision_of
from derived_views.core.times import seconds_between

ROW_COUNT = CheckKind.ROW_COUNT.value
KEY_SAMPLE = CheckKind.KEY_SAMPLE.value
SHOWN_LIMIT = 300
"""Characters of a returned row or an error kept in the status."""


def checks_of(spec: DerivedViewSpec) -> CutoverChecks | None:
    checks = spec.cutover.checks
    return checks if checks is not None and checks.configured() else None


def checks_hash(checks: CutoverChecks) -> str:
    """Results of other checks are not results of these: a change needs a new run."""
    text = json.dumps(checks.model_dump(mode="json"), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def quoted(schema: str, table: str) -> str:
    return f'"{schema}"."{table}"'


def rendered_sql(assertion: SqlAssertion, schema: str, index: str, active: str | None) -> str:
    """The assertion with `{index}` (and `{active}`) replaced by the quoted tables; without an
    active index `{active}` is the candidate's, so a comparison with it holds trivially."""
    sql = assertion.sql.replace(INDEX_PLACEHOLDER, quoted(schema, index))
    return sql.replace(ACTIVE_PLACEHOLDER, quoted(schema, active or index))


def refused_assertion(spec: DerivedViewSpec, index: str, active: str | None
                      ) -> tuple[str, str] | None:
    """(name, why) of the first assertion core.judges.assertion_sql refuses: none of them is run then.

    Decided on the rendered SQL, as the server will read it, with the two tables it may
    read; PostgreSQL's own parser decides what the text is (core.judges.assertion_sql)."""
    checks = checks_of(spec)
    if checks is None:
        return None
    schema = spec.sink.db_schema
    tables = frozenset({(schema, index), (schema, active or index)})
    for assertion in checks.assertions:
        problem = check_sql_problem(rendered_sql(assertion, schema, index, active), tables)
        if problem is not None:
            return assertion.name, problem
    return None


def due(spec: DerivedViewSpec, status: DerivedViewStatus, now: dt.datetime, *,
        stopped: bool) -> CheckRequest | None:
    """The checks to run this pass: the spec's candidate has held its lag gate (as the last
    pass recorded) and has no run of these checks since, or its run is intervalSeconds old.
    None while the view is `stopped` (paused or deleted): no query reaches the sink then."""
    checks = checks_of(spec)
    revision = revision_of(spec)
    active = status.active
    record = status.record(revision)
    if (checks is None or stopped or record is None or record.phase != Phase.CaughtUp
            or record.caught_up_since is None or (active and active.revision == revision)):
        return None
    active_index = active.index if active is not None else None
    if refused_assertion(spec, record.index, active_index) is not None:
        return None
    digest = checks_hash(checks)
    run = record.checks
    fresh = (run is not None and run.checks_hash == digest
             and run.checked_at >= record.caught_up_since
             and seconds_between(run.checked_at, now) < checks.interval_seconds)
    if fresh:
        return None
    active_record = status.record(active.revision) if active is not None else None
    active_key = (tuple(active_record.content.primary_key)
                  if active_record is not None and active_record.content is not None else None)
    key = tuple(spec.sink.primary_key)
    return CheckRequest(
        revision=revision, schema=spec.sink.db_schema, index=record.index,
        active_index=active_index, primary_key=key, same_key=active_key == key,
        checks=checks, checks_hash=digest,
        active_revision=active.revision if active is not None else None)


def current_run(spec: DerivedViewSpec, run: CheckRun | None,
                caught_up_since: dt.datetime | None) -> CheckRun | None:
    """The run that speaks for the candidate now: of the spec's checks, made since the gate
    last started holding."""
    checks = checks_of(spec)
    if (checks is None or run is None or caught_up_since is None
            or run.checks_hash != checks_hash(checks) or run.checked_at < caught_up_since):
        return None
    return run


def shown_run(spec: DerivedViewSpec, run: CheckRun | None, caught_up_since: dt.datetime | None,
              started_at: dt.datetime) -> CheckRun | None:
    """The run status shows (Degraded, the CHECKS column, the candidate's checks): the current
    one, else a failing run of the spec's checks on this attempt's index. A failure keeps
    speaking while a busy topic breaks the lag gate and it holds again, so Degraded does not
    flap; only a passing run made while the gate holds lets the cutover proceed."""
    current = current_run(spec, run, caught_up_since)
    if current is not None:
        return current
    checks = checks_of(spec)
    if (checks is None or run is None or run.passed or run.checks_hash != checks_hash(checks)
            or run.checked_at < started_at):
        return None
    return run


# Measurements (what the adapter found) and their judgement ---------------------------------

@dataclass(frozen=True)
class RowCounts:
    candidate: int
    active: int


@dataclass(frozen=True)
class KeySampleFound:
    """Sampled keys of each index missing from the other, with a few examples."""

    sampled_active: int
    missing_from_candidate: int
    sampled_candidate: int
    missing_from_active: int
    examples: tuple[str, ...] = ()


@dataclass(frozen=True)
class AssertionAnswer:
    rows: int
    """Rows returned (counted up to the adapter's limit)."""
    first_row: tuple[str, ...] | None = None
    """The first row returned, as text."""
    more: bool = False
    """It returned more rows than were counted."""


@dataclass(frozen=True)
class CouldNotRun:
    """A check's query failed: timeout, SQL error, permission."""

    cause: str


Measurement = RowCounts | KeySampleFound | DiffFound | AssertionAnswer | CouldNotRun


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= SHOWN_LIMIT else text[:SHOWN_LIMIT - 3] + "..."


def _row_count(spec: CutoverChecks, found: RowCounts) -> tuple[CheckOutcome, str, str]:
    assert spec.row_count is not None
    absolute = spec.row_count.max_difference or 0
    relative = math.floor((spec.row_count.max_relative_difference or 0.0) * found.active)
    allowed = max(absolute, relative)
    difference = abs(found.candidate - found.active)
    outcome = CheckOutcome.Passed if difference <= allowed else CheckOutcome.Failed
    return (outcome, f"{found.candidate} rows (the active index: {found.active})",
            f"{found.active} ± {allowed} rows")


def _key_sample(spec: CutoverChecks, found: KeySampleFound) -> tuple[CheckOutcome, str, str]:
    assert spec.key_sample is not None
    missing = found.missing_from_candidate + found.missing_from_active
    outcome = CheckOutcome.Passed if missing <= spec.key_sample.max_missing else (
        CheckOutcome.Failed)
    observed = (f"{found.missing_from_candidate} of {found.sampled_active} sampled active keys "
                f"missing from the candidate, {found.missing_from_active} of "
                f"{found.sampled_candidate} sampled candidate keys missing from the active")
    if found.examples and missing:
        observed += f" (e.g. {', '.join(found.examples)})"
    return outcome, observed, f"at most {spec.key_sample.max_missing} missing"


def _assertion(assertion: SqlAssertion, found: AssertionAnswer
               ) -> tuple[CheckOutcome, str, str]:
    shown = "" if found.first_row is None else f"; first: ({', '.join(found.first_row)})"
    if assertion.expect == "noRows":
        passed = found.rows == 0
        counted = f"more than {found.rows}" if found.more else str(found.rows)
        return (CheckOutcome.Passed if passed else CheckOutcome.Failed,
                f"{counted} row(s){shown}", "no rows")
    value = found.first_row[0] if found.first_row else None
    passed = found.rows == 1 and value is not None and value.lower() in ("true", "t")
    observed = (f"{found.rows} rows" if found.rows != 1 else f"{value}")
    return CheckOutcome.Passed if passed else CheckOutcome.Failed, observed, "one row: true"


def judge_checks(request: CheckRequest, found: Mapping[str, tuple[Measurement, float]],
          now: dt.datetime) -> CheckRun:
    """The run's results, in the spec's order: rowCount, keySample, diff, then the
    assertions."""
    results: list[CheckResult] = []
    checks = request.checks
    for check in configured(checks):  # the registry of check kinds, in its order
        name = check.name
        if check.kind in PARITY and not request.parity:
            why = ("no active index to compare with" if request.active_index is None
                   else "the primary key changed")
            results.append(CheckResult(name=name, outcome=CheckOutcome.Skipped, observed=why))
            continue
        if name not in found:
            results.append(CheckResult(name=name, outcome=CheckOutcome.Error,
                                       observed="not run"))
            continue
        measured, seconds = found[name]
        seconds = round(seconds, 3)
        if isinstance(measured, CouldNotRun):
            results.append(CheckResult(name=name, outcome=CheckOutcome.Error,
                                       observed=_clip(measured.cause), seconds=seconds))
            continue
        if isinstance(measured, RowCounts):
            outcome, observed, expected = _row_count(checks, measured)
        elif isinstance(measured, KeySampleFound):
            outcome, observed, expected = _key_sample(checks, measured)
        elif isinstance(measured, DiffFound):
            assert checks.diff is not None
            outcome, observed, expected = judge_diff(checks.diff, measured)
        else:
            assert check.assertion is not None
            outcome, observed, expected = _assertion(check.assertion, measured)
        results.append(CheckResult(name=name, outcome=outcome, observed=_clip(observed),
                                   expected=expected, seconds=seconds))
    return CheckRun(checks_hash=request.checks_hash, checked_at=now, results=results)


def checks_summary(run: CheckRun | None) -> str:
    """The CHECKS column: `3/3 passed`, `rowCount failed`, `pending`."""
    if run is None:
        return "pending"
    failing = run.failing()
    if failing:
        first = failing[0]
        word = "failed" if first.outcome == CheckOutcome.Failed else "error"
        more = f" +{len(failing) - 1}" if len(failing) > 1 else ""
        return f"{first.name} {word}{more}"
    counted = [r for r in run.results if r.outcome != CheckOutcome.Skipped]
    return f"{len(counted)}/{len(counted)} passed"


def failure_text(run: CheckRun) -> tuple[str, str]:
    """(reason, message) for a run with failing checks: each with what it found and needed."""
    failing = run.failing()
    reason = reasons.CHECK_FAILED if any(r.outcome == CheckOutcome.Failed for r in failing) else (
        reasons.CHECK_ERROR)
    parts = []
    for r in failing:
        if r.outcome == CheckOutcome.Failed:
            parts.append(f"check {r.name} failed: {r.observed}, expected {r.expected}")
        else:
            parts.append(f"check {r.name} could not run: {r.observed}")
    return reason, "; ".join(parts)
