"""Cutover checks: when they are due, how measurements are judged, and what the planner does
with a run (values written by hand, not computed the way the module computes them)."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from typing import Any

import pytest
from pydantic import ValidationError

from derived_views.api.spec import DerivedViewSpec
from derived_views.api.status import CheckOutcome, CheckRun, DerivedViewStatus
from derived_views.core import actions as A
from derived_views.core import check_runs
from derived_views.core.cutover import checks
from derived_views.core.observed import (
    LedgerPosition,
    Observed,
    SinkObserved,
    SparkApplicationObserved,
    ViewObserved,
)
from derived_views.core.plan import plan
from derived_views.core.revision import revision_of
from support.world.hand_observed import record
from support.world.samples import (
    NAMESPACE,
    SECRET_LABELS,
    SQL_V1,
    SQL_V2,
    T0,
    UID,
    VIEW,
    make_settings,
    make_spec,
)

ENDS = {("orders", 0): 120, ("orders", 1): 80}
CONTENT = {"topics": ["orders"], "format": "json",
           "schema": "order_id STRING, customer_id STRING, amount DOUBLE",
           "primaryKey": ["customer_id"]}
NEGATIVE = {"name": "no-negative-balances",
            "sql": "SELECT customer_id FROM {index} WHERE orders < 0"}
CHECKS = {"rowCount": {"maxDifference": 2}, "keySample": {"size": 50},
          "assertions": [NEGATIVE], "intervalSeconds": 30}


def spec_with(checks_body: dict[str, Any] | None, sql: str = SQL_V2) -> DerivedViewSpec:
    cutover = {"maxLagMessages": 0, "maxLagSeconds": 0, "stableForSeconds": 10,
               "retainPreviousSeconds": 60}
    if checks_body is not None:
        cutover["checks"] = checks_body
    return make_spec(sql, cutover=cutover)


V1 = revision_of(make_spec(SQL_V1))
V2 = revision_of(spec_with(CHECKS))
I1, I2 = f"orders_by_customer__{V1}", f"orders_by_customer__{V2}"


def migrating(run: dict[str, Any] | None = None, *, caught_up: str = "2026-03-01T11:59:00Z",
              key: list[str] | None = None) -> DerivedViewStatus:
    v1 = record(V1, "Active", content={**CONTENT, "sql": SQL_V1,
                                       "primaryKey": key or ["customer_id"]})
    v2 = record(V2, "CaughtUp", content={**CONTENT, "sql": SQL_V2}, caughtUpSince=caught_up,
                **({"checks": run} if run else {}))
    return DerivedViewStatus.model_validate({
        "active": {"revision": V1, "index": I1, "since": "2026-03-01T10:00:00Z"},
        "revisions": [v1, v2]})


def view(annotations: dict[str, str] | None = None) -> ViewObserved:
    return ViewObserved(NAMESPACE, VIEW, UID, 1, annotations or {}, ("derivedviews.io/cleanup",))


def finished(run: CheckRun, *, active_index: str = I1, active_revision: str = V1
             ) -> check_runs.Held:
    """The check runner holding a finished run of the candidate's CHECKS on I2 beside
    `active_index` (of `active_revision`), the request written out by hand."""
    spec = spec_with(CHECKS)
    assert spec.cutover.checks is not None
    request = check_runs.CheckRequest(
        revision=V2, schema=spec.sink.db_schema, index=I2, active_index=active_index,
        primary_key=("customer_id",), same_key=True, checks=spec.cutover.checks,
        checks_hash=checks.checks_hash(spec.cutover.checks), budget_seconds=300.0,
        active_revision=active_revision)
    return check_runs.Held(finished=check_runs.Finished(request, run))


def observed(status: DerivedViewStatus, run: CheckRun | None = None) -> Observed:
    return Observed(
        view=view(), status=status, settings=make_settings(),
        spark_applications={r: SparkApplicationObserved(f"{VIEW}-{r}", r, "RUNNING")
                            for r in (V1, V2)},
        sink=SinkObserved(frozenset({I1, I2}), I1, {r: LedgerPosition(ENDS, T0) for r in (V1, V2)}),
        end_offsets=ENDS, checks=check_runs.Held() if run is None else finished(run),
        secret_labels=SECRET_LABELS)


def passing_run(at: dt.datetime = T0) -> dict[str, Any]:
    spec = spec_with(CHECKS)
    assert spec.cutover.checks is not None
    return {"checksHash": checks.checks_hash(spec.cutover.checks),
            "checkedAt": at.isoformat(),
            "results": [{"name": "rowCount", "outcome": "Passed"},
                        {"name": "keySample", "outcome": "Passed"},
                        {"name": "no-negative-balances", "outcome": "Passed"}]}


# the spec ------------------------------------------------------------------------------------

def test_an_assertion_must_read_the_index_placeholder() -> None:
    with pytest.raises(ValidationError, match=r"must query the candidate's index as \{index\}"):
        spec_with({"assertions": [{"name": "x", "sql": "SELECT 1 FROM {idx} WHERE 0 > 1"}]})


def test_row_count_needs_a_tolerance() -> None:
    with pytest.raises(ValidationError, match=r"maxDifference \(rows\) and/or"):
        spec_with({"rowCount": {}})


def test_changing_checks_is_not_a_new_revision() -> None:
    assert revision_of(spec_with(None)) == revision_of(spec_with(CHECKS))


# when checks are due ---------------------------------------------------------------------------

def test_due_once_the_gate_holds_with_what_to_compare() -> None:
    request = checks.due(spec_with(CHECKS), migrating(), T0, stopped=False)
    assert request is not None
    assert (request.revision, request.index, request.active_index) == (V2, I2, I1)
    assert request.same_key and request.parity and request.primary_key == ("customer_id",)


def test_not_due_while_backfilling_paused_or_without_checks() -> None:
    status = migrating().model_copy(update={"revisions": [
        r.model_copy(update={"phase": "Backfilling"}) if r.revision == V2 else r
        for r in migrating().revisions]})
    assert checks.due(spec_with(CHECKS), status, T0, stopped=False) is None
    assert checks.due(spec_with(CHECKS), migrating(), T0, stopped=True) is None
    assert checks.due(spec_with(None), migrating(), T0, stopped=False) is None


def test_a_recent_run_is_not_repeated_an_old_or_other_one_is() -> None:
    spec = spec_with(CHECKS)
    recent = migrating(passing_run(T0 - dt.timedelta(seconds=29)))
    assert checks.due(spec, recent, T0, stopped=False) is None
    old = migrating(passing_run(T0 - dt.timedelta(seconds=30)))
    assert checks.due(spec, old, T0, stopped=False) is not None
    # made before the gate last started holding: it does not speak for the candidate now
    before_gate = migrating(passing_run(T0 - dt.timedelta(seconds=5)),
                            caught_up="2026-03-01T11:59:58Z")
    assert checks.due(spec, before_gate, T0, stopped=False) is not None
    other_checks = spec_with({**CHECKS, "rowCount": {"maxDifference": 3}})
    assert checks.due(other_checks, recent, T0, stopped=False) is not None


def test_parity_is_not_for_a_changed_key() -> None:
    request = checks.due(spec_with(CHECKS), migrating(key=["order_id"]), T0, stopped=False)
    assert request is not None and not request.parity
    run = checks.judge_checks(request, {"no-negative-balances": (checks.AssertionAnswer(0), 0.01)}, T0)
    assert [(r.name, r.outcome) for r in run.results] == [
        ("rowCount", CheckOutcome.Skipped), ("keySample", CheckOutcome.Skipped),
        ("no-negative-balances", CheckOutcome.Passed)]
    assert run.results[0].observed == "the primary key changed"
    assert checks.checks_summary(run) == "1/1 passed"


# judging measurements ------------------------------------------------------------------------

def request_for(checks_body: dict[str, Any]) -> check_runs.CheckRequest:
    request = checks.due(spec_with(checks_body), migrating(), T0, stopped=False)
    assert request is not None
    return request


@pytest.mark.parametrize(("tolerance", "candidate", "active", "outcome"), [
    ({"maxDifference": 2}, 498, 500, "Passed"),
    ({"maxDifference": 2}, 497, 500, "Failed"),
    ({"maxRelativeDifference": 0.01}, 995, 1000, "Passed"),  # 1% of 1000 = 10
    ({"maxRelativeDifference": 0.01}, 989, 1000, "Failed"),
    ({"maxDifference": 20, "maxRelativeDifference": 0.01}, 985, 1000, "Passed"),  # larger: 20
    ({"maxDifference": 0}, 501, 500, "Failed"),  # more rows than the active is off too
])
def test_row_count_tolerance(tolerance: dict[str, Any], candidate: int, active: int,
                             outcome: str) -> None:
    request = request_for({"rowCount": tolerance})
    run = checks.judge_checks(request, {"rowCount": (checks.RowCounts(candidate, active), 0.5)}, T0)
    assert run.results[0].outcome.value == outcome


def test_a_failing_row_count_says_what_it_found_and_needed() -> None:
    request = request_for({"rowCount": {"maxDifference": 0}})
    run = checks.judge_checks(request, {"rowCount": (checks.RowCounts(250, 500), 0.25)}, T0)
    result = run.results[0]
    assert (result.observed, result.expected, result.seconds) == (
        "250 rows (the active index: 500)", "500 ± 0 rows", 0.25)
    assert checks.checks_summary(run) == "rowCount failed"
    assert checks.failure_text(run) == (
        "CheckFailed", "check rowCount failed: 250 rows (the active index: 500), expected "
                       "500 ± 0 rows")


def test_key_sample_counts_both_directions() -> None:
    request = request_for({"keySample": {"size": 100, "maxMissing": 1}})
    found = checks.KeySampleFound(100, 1, 100, 1, ("c-0007", "c-0420"))
    run = checks.judge_checks(request, {"keySample": (found, 0.1)}, T0)
    assert run.results[0].outcome == CheckOutcome.Failed  # 2 missing > 1
    assert run.results[0].observed == (
        "1 of 100 sampled active keys missing from the candidate, 1 of 100 sampled candidate "
        "keys missing from the active (e.g. c-0007, c-0420)")


@pytest.mark.parametrize(("expect", "answer", "outcome", "shown"), [
    ("noRows", checks.AssertionAnswer(0), "Passed", "0 row(s)"),
    ("noRows", checks.AssertionAnswer(3, ("c-0001", "-12.5")), "Failed",
     "3 row(s); first: (c-0001, -12.5)"),
    ("noRows", checks.AssertionAnswer(1000, ("c-0001",), more=True), "Failed",
     "more than 1000 row(s); first: (c-0001)"),
    ("true", checks.AssertionAnswer(1, ("true",)), "Passed", "true"),
    ("true", checks.AssertionAnswer(1, ("false",)), "Failed", "false"),
    ("true", checks.AssertionAnswer(1, ("NULL",)), "Failed", "NULL"),
    ("true", checks.AssertionAnswer(0), "Failed", "0 rows"),
])
def test_assertion_expectations(expect: str, answer: checks.AssertionAnswer, outcome: str,
                                shown: str) -> None:
    request = request_for({"assertions": [{**NEGATIVE, "expect": expect}]})
    run = checks.judge_checks(request, {"no-negative-balances": (answer, 0.01)}, T0)
    assert (run.results[0].outcome.value, run.results[0].observed) == (outcome, shown)


def test_a_check_that_could_not_run_blocks_with_its_own_reason() -> None:
    request = request_for({"assertions": [NEGATIVE]})
    cause = checks.CouldNotRun("timed out after 30s (statement timeout)")
    run = checks.judge_checks(request, {"no-negative-balances": (cause, 30.0)}, T0)
    assert run.results[0].outcome == CheckOutcome.Error
    assert checks.checks_summary(run) == "no-negative-balances error"
    assert checks.failure_text(run)[0] == "CheckError"


def test_placeholders_become_the_quoted_tables() -> None:
    spec = spec_with({"assertions": [{"name": "same", "expect": "true",
                                      "sql": "SELECT (SELECT count(*) FROM {index}) = "
                                             "(SELECT count(*) FROM {active})"}]})
    assert spec.cutover.checks is not None
    sql = checks.rendered_sql(spec.cutover.checks.assertions[0], "public", I2, I1)
    assert sql == (f'SELECT (SELECT count(*) FROM "public"."{I2}") = '
                   f'(SELECT count(*) FROM "public"."{I1}")')


@pytest.mark.parametrize(("sql", "why"), [
    ("SELECT * FROM {index} WHERE pg_read_file('/etc/passwd') IS NOT NULL",
     "function pg_read_file() is not on the allowlist of check functions"),
    ("SELECT * FROM {index} JOIN pg_authid ON true",
     "table pg_authid is not allowed: a check may only read {index} and {active}"),
    ("SELECT * FROM {index} JOIN public.orders_by_customer__0000000000 o ON true",
     "table public.orders_by_customer__0000000000 is not allowed"),
    ("DELETE FROM {index}", "DELETE is not a SELECT; a check only reads"),
])
def test_the_sql_policy_refuses_more_than_a_query_of_the_indexes(sql: str, why: str) -> None:
    spec = spec_with({"assertions": [{"name": "sneaky", "sql": sql}]})
    refused = checks.refused_assertion(spec, I2, I1)
    assert refused is not None and refused[0] == "sneaky"
    assert why in refused[1]
    assert checks.due(spec, migrating(), T0, stopped=False) is None  # never run


# the planner ----------------------------------------------------------------------------------

def _switches(actions: list[A.Action]) -> list[A.SwitchAlias]:
    return [a for a in actions if isinstance(a, A.SwitchAlias)]


def _status(actions: list[A.Action]) -> DerivedViewStatus:
    return next(a for a in actions if isinstance(a, A.UpdateStatus)).status


def test_no_switch_before_a_run_then_switch_on_a_passing_one() -> None:
    spec = spec_with(CHECKS)
    waiting = plan(spec, observed(migrating()), T0)
    assert _switches(waiting) == []
    status = _status(waiting)
    assert status.checks == "pending"
    assert status.condition("Reconciling").reason == "Checking"  # type: ignore[union-attr]
    run = CheckRun.model_validate(passing_run(T0))
    passed = plan(spec, observed(migrating(), run), T0)
    assert [s.to_index for s in _switches(passed)] == [I2]
    assert any(isinstance(a, A.EmitEvent) and a.reason == "ChecksPassed" for a in passed)


def failing_run() -> CheckRun:
    body = passing_run(T0)
    body["results"][0] = {"name": "rowCount", "outcome": "Failed",
                          "observed": "250 rows (the active index: 500)",
                          "expected": "500 ± 2 rows"}
    return CheckRun.model_validate(body)


def test_a_failing_check_blocks_degrades_and_keeps_the_active_serving() -> None:
    spec = spec_with(CHECKS)
    actions = plan(spec, observed(migrating(), failing_run()), T0)
    assert _switches(actions) == []
    status = _status(actions)
    degraded = status.condition("Degraded")
    assert degraded is not None and degraded.status == "True"
    assert degraded.reason == "CheckFailed"
    assert degraded.message == (
        f"revision {V2} is not promoted: check rowCount failed: 250 rows (the active index: "
        f"500), expected 500 ± 2 rows; revision {V1} keeps serving; fix the transform (a new "
        "revision) or the check (re-run, no replay)")
    assert status.checks == "rowCount failed"
    assert status.active is not None and status.active.revision == V1
    warned = [a for a in actions if isinstance(a, A.EmitEvent) and a.reason == "CheckFailed"]
    assert len(warned) == 1 and warned[0].type == "Warning"
    # the same failure again: no second event
    again = plan(spec, observed(status, failing_run()), T0 + dt.timedelta(seconds=30))
    assert not any(isinstance(a, A.EmitEvent) and a.reason == "CheckFailed" for a in again)


def test_the_promote_annotation_does_not_override_a_failing_check() -> None:
    manual = make_spec(SQL_V2, cutover={"maxLagMessages": 0, "maxLagSeconds": 0,
                                        "stableForSeconds": 10, "mode": "manual",
                                        "checks": CHECKS})
    assert revision_of(manual) == V2
    annotated = replace(observed(migrating(), failing_run()),
                        view=view({"derivedviews.io/promote": V2}))
    assert _switches(plan(manual, annotated, T0)) == []
    passing = replace(annotated, checks=finished(CheckRun.model_validate(passing_run(T0))))
    assert [s.to_index for s in _switches(plan(manual, passing, T0))] == [I2]


def test_a_refused_check_is_reported_before_the_gate_and_never_promotes() -> None:
    spec = spec_with({"assertions": [{"name": "sneaky",
                                      "sql": "SELECT * FROM {index}, pg_sleep(100)"}]})
    actions = plan(spec, observed(migrating()), T0)
    degraded = _status(actions).condition("Degraded")
    assert degraded is not None and degraded.reason == "PolicyViolation"
    assert degraded.message.startswith("cutover.checks.assertions sneaky: function pg_sleep() "
                                       "is not on the allowlist of check functions")
    assert _switches(actions) == []


def test_one_event_per_change_of_failing_checks_not_per_sample() -> None:
    spec = spec_with(CHECKS)
    first = plan(spec, observed(migrating(), failing_run()), T0)
    status = _status(first)
    resampled = failing_run().model_copy(update={"results": [
        r.model_copy(update={"observed": "249 rows (the active index: 500)"})
        if r.name == "rowCount" else r for r in failing_run().results]})
    again = plan(spec, observed(status, resampled), T0 + dt.timedelta(seconds=30))
    assert not any(isinstance(a, A.EmitEvent) and a.reason == "CheckFailed" for a in again)
    both = resampled.model_copy(update={"results": [
        r.model_copy(update={"outcome": CheckOutcome.Error, "observed": "timed out"})
        if r.name == "keySample" else r for r in resampled.results]})
    changed = plan(spec, observed(_status(again), both), T0 + dt.timedelta(seconds=60))
    told = [a for a in changed if isinstance(a, A.EmitEvent) and a.reason == "CheckFailed"]
    assert len(told) == 1 and "check keySample could not run: timed out" in told[0].message


def test_a_failure_keeps_speaking_while_the_gate_breaks_and_holds_again() -> None:
    """A busy topic can put a caught-up candidate behind for a moment: its failed checks still
    block, Degraded and the CHECKS column do not flap, and no second event is posted."""
    spec = spec_with(CHECKS)
    failed = _status(plan(spec, observed(migrating(), failing_run()), T0))
    behind = replace(observed(failed), sink=SinkObserved(
        frozenset({I1, I2}), I1, {V1: LedgerPosition(ENDS, T0),
                                  V2: LedgerPosition({("orders", 0): 20, ("orders", 1): 80}, T0)}))
    later = T0 + dt.timedelta(seconds=5)
    actions = plan(spec, behind, later)
    status = _status(actions)
    record = status.record(V2)
    assert record is not None and record.phase.value == "Backfilling"
    assert record.caught_up_since is None
    degraded = status.condition("Degraded")
    assert degraded is not None and degraded.reason == "CheckFailed", degraded
    assert status.checks == "rowCount failed"
    assert _switches(actions) == [] and not [
        a for a in actions if isinstance(a, A.EmitEvent) and a.reason == "CheckFailed"]
    # caught up again: the old failure still shows until a run made since then speaks
    again = plan(spec, observed(status), later + dt.timedelta(seconds=5))
    regained = _status(again)
    assert regained.checks == "rowCount failed" and _switches(again) == []
    assert checks.due(spec, regained, later + dt.timedelta(seconds=6), stopped=False) is not None


def test_a_failure_of_an_earlier_attempt_is_not_shown() -> None:
    spec = spec_with(CHECKS)
    stale = failing_run().model_copy(update={"checked_at": T0 - dt.timedelta(days=1)})
    status = migrating(stale.model_dump(mode="json", by_alias=True, exclude_none=True))
    shown = _status(plan(spec, observed(status), T0))
    assert shown.checks == "pending"
    degraded = shown.condition("Degraded")
    assert degraded is None or degraded.reason != "CheckFailed"


# the check runner's runs, as the planner plans them ------------------------------------------

def _upkeep(actions: list[A.Action]) -> list[A.Action]:
    return [a for a in actions if isinstance(a, A.UPKEEP) and not isinstance(a, A.PruneLedger)]


def test_a_due_run_is_submitted_after_the_status_once_and_dated_by_the_pass() -> None:
    spec = spec_with(CHECKS)
    actions = plan(spec, observed(migrating()), T0)
    submitted = _upkeep(actions)
    assert len(submitted) == 1 and isinstance(submitted[0], A.SubmitChecks)
    assert (submitted[0].request.revision, submitted[0].request.index,
            submitted[0].request.active_index, submitted[0].at) == (V2, I2, I1, T0)
    kinds = [type(a).__name__ for a in actions]
    assert kinds.index("UpdateStatus") < kinds.index("SubmitChecks")
    in_flight = replace(observed(migrating()), checks=check_runs.Held(in_flight=True))
    assert _upkeep(plan(spec, in_flight, T0)) == []  # a view never has two runs
    unseen = replace(observed(migrating()), sink=None, sink_problem=("SinkUnreachable", "down"))
    assert _upkeep(plan(spec, unseen, T0)) == []


def test_the_run_of_the_due_checks_is_taken_once_and_another_one_is_not() -> None:
    spec = spec_with(CHECKS)
    taken = plan(spec, observed(migrating(), failing_run()), T0)
    assert _upkeep(taken) == [A.TakeChecks(V2, failing_run())]
    kinds = [type(a).__name__ for a in taken]
    assert kinds.index("UpdateStatus") < kinds.index("TakeChecks")
    # measured beside another active index (the tables changed since): it speaks for nothing
    other = replace(observed(migrating()),
                    checks=finished(failing_run(), active_index="orders_by_customer__x"))
    actions = plan(spec, other, T0)
    assert [type(a).__name__ for a in _upkeep(actions)] == ["SubmitChecks"]
    assert _status(actions).checks == "pending"


def test_a_paused_view_forgets_its_run_and_runs_none() -> None:
    spec = spec_with(CHECKS)
    paused = replace(observed(migrating(), failing_run()),
                     view=view({"derivedviews.io/paused": "true"}))
    assert _upkeep(plan(spec, paused, T0)) == [A.ForgetChecks()]
    idle = replace(paused, checks=check_runs.Held())
    assert _upkeep(plan(spec, idle, T0)) == []


def test_every_pass_that_observed_the_sink_prunes_its_ledger_after_the_status() -> None:
    spec = spec_with(CHECKS)
    actions = plan(spec, observed(migrating()), T0)
    kinds = [type(a).__name__ for a in actions]
    assert kinds.count("PruneLedger") == 1
    assert kinds.index("UpdateStatus") < kinds.index("PruneLedger")
    unseen = replace(observed(migrating()), sink=None, sink_problem=("SinkUnreachable", "down"))
    assert not any(isinstance(a, A.PruneLedger) for a in plan(spec, unseen, T0))
