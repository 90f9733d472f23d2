"""The diff check's judging: measured counts against count, percentage and per-column
thresholds, the compared columns, and the mode (values written by hand)."""

from __future__ import annotations

from typing import Any

import pytest

from derived_views.api.spec import CutoverChecks, DiffCheck
from derived_views.api.status import CheckOutcome
from derived_views.core import check_runs
from derived_views.core.cutover import checks, diff
from derived_views.core.cutover.diff import (
    ColumnChanges,
    ColumnsRefused,
    DiffFound,
    Mode,
    allowed_rows,
    diff_columns,
    judge_diff,
    mode_for,
    ranges_for,
)
from support.world.samples import T0


def found(changed: int = 3, *, only_c: int = 0, only_a: int = 0, active: int = 100,
          balance: int | None = None, note: int = 0, complete: bool = True) -> DiffFound:
    return DiffFound(
        mode=Mode.FULL, candidate_rows=active + only_c - only_a, active_rows=active,
        only_candidate=only_c, only_active=only_a, changed=changed,
        columns=(ColumnChanges("balance", changed if balance is None else balance,
                               ("c-07", "c-42")), ColumnChanges("note", note)),
        changed_examples=("c-07", "c-42"), complete=complete, compared=200)


def check(**body: Any) -> DiffCheck:
    return DiffCheck.model_validate(body)


@pytest.mark.parametrize(("threshold", "active", "allowed"), [
    (0, 100, 0), (100, 5, 100), ("1%", 100, 1), ("1%", 150, 1), ("1%", 99, 0),
    ("0.5%", 1000, 5), ("100%", 7, 7), ("3%", 100, 3), ("0%", 100, 0)])
def test_allowed_rows(threshold: int | str, active: int, allowed: int) -> None:
    assert allowed_rows(threshold, active) == allowed


@pytest.mark.parametrize(("body", "measured", "outcome"), [
    ({"maxChangedRows": "1%"}, found(3), CheckOutcome.Failed),   # 3 of 100 > 1
    ({"maxChangedRows": "5%"}, found(3), CheckOutcome.Passed),
    ({"maxChangedRows": 3}, found(3), CheckOutcome.Passed),
    ({"maxChangedRows": 2}, found(3), CheckOutcome.Failed),
    # rows on one side count as well: 1 changed, 2 added, 1 dropped = 4
    ({"maxChangedRows": 3}, found(1, only_c=2, only_a=1), CheckOutcome.Failed),
    ({"maxChangedRows": 4}, found(1, only_c=2, only_a=1), CheckOutcome.Passed),
    # per column, on its own: the total allows it, the column does not
    ({"maxChangedRows": "5%", "maxChangedRowsByColumn": {"note": 0}}, found(3, note=1),
     CheckOutcome.Failed),
    ({"maxChangedRows": "5%", "maxChangedRowsByColumn": {"balance": "2%"}}, found(3),
     CheckOutcome.Failed),
    ({"maxChangedRows": "5%", "maxChangedRowsByColumn": {"balance": "3%", "note": 0}},
     found(3), CheckOutcome.Passed),
    # stopped by the timeout: too much already fails, else it cannot decide
    ({"maxChangedRows": 2}, found(3, complete=False), CheckOutcome.Failed),
    ({"maxChangedRows": 5}, found(3, complete=False), CheckOutcome.Error),
])
def test_judging(body: dict[str, Any], measured: DiffFound, outcome: CheckOutcome) -> None:
    assert judge_diff(check(**body), measured)[0] == outcome


def test_what_a_failing_diff_says() -> None:
    outcome, observed, expected = judge_diff(
        check(maxChangedRows="1%", maxChangedRowsByColumn={"balance": 0}),
        found(1, only_c=2, only_a=1))
    assert outcome == CheckOutcome.Failed
    assert observed == ("4 of 100 rows differ (row by row): 2 only in the candidate, 1 only in "
                        "the active, 1 changed (e.g. c-07, c-42); by column: balance 1")
    assert expected == "at most 1 row (1% of 100) differ; balance at most 0 rows"


def test_the_run_names_the_diff_and_the_checks_column() -> None:
    request = check_runs.CheckRequest(
        revision="r2", schema="s", index="t__r2", active_index="t__r1",
        primary_key=("id",), same_key=True,
        checks=CutoverChecks.model_validate({"rowCount": {"maxDifference": 0},
                                             "diff": {"maxChangedRows": "1%"}}),
        checks_hash="h")
    assert [p.name for p in check_runs.measured(request)] == ["rowCount", "diff"]
    run = checks.judge_checks(request, {"rowCount": (checks.RowCounts(100, 100), 0.1),
                                        "diff": (found(3), 0.25)}, T0)
    assert [(r.name, r.outcome) for r in run.results] == [
        ("rowCount", CheckOutcome.Passed), ("diff", CheckOutcome.Failed)]
    assert checks.checks_summary(run) == "diff failed"
    assert checks.failure_text(run)[0] == "CheckFailed"
    assert checks.failure_text(run)[1].startswith(
        "check diff failed: 3 of 100 rows differ (row by row)")


def test_a_first_revision_skips_the_diff() -> None:
    request = check_runs.CheckRequest(
        revision="r1", schema="s", index="t__r1", active_index=None, primary_key=("id",),
        same_key=False, checks=CutoverChecks.model_validate({"diff": {"maxChangedRows": 0}}),
        checks_hash="h")
    assert check_runs.measured(request) == []
    run = checks.judge_checks(request, {}, T0)
    assert (run.results[0].name, run.results[0].outcome) == ("diff", CheckOutcome.Skipped)


def test_the_compared_columns() -> None:
    both = diff_columns(("id", "balance", "note", "tier", "_dv_x"), ("id", "note", "balance", "old"),
                        ("id",), check(maxChangedRows=0))
    assert (both.compared, both.not_compared) == (("balance", "note"), ("old", "tier"))
    named = diff_columns(("id", "balance", "note"), ("id", "balance", "note"), ("id",),
                         check(maxChangedRows=0, columns=["note"]))
    assert named.compared == ("note",)
    by_column = diff_columns(("id", "balance", "note"), ("id", "balance", "note"), ("id",),
                             check(maxChangedRows=0, maxChangedRowsByColumn={"note": 1}))
    assert by_column.compared == ("balance", "note")
    with pytest.raises(ColumnsRefused, match=r"^diff\.maxChangedRowsByColumn names zip, which"):
        diff_columns(("id", "balance"), ("id", "balance"), ("id",),
                     check(maxChangedRows=0, maxChangedRowsByColumn={"zip": 1}))


@pytest.mark.parametrize("named", [["tier"], ["id"], ["pg_authid"], ["_dv_x"]])
def test_columns_not_in_both_indexes_are_refused(named: list[str]) -> None:
    with pytest.raises(ColumnsRefused) as refused:
        diff_columns(("id", "balance", "tier", "_dv_x"), ("id", "balance", "_dv_x"), ("id",),
                     check(maxChangedRows=0, columns=named))
    assert str(refused.value) == (
        f"diff.columns names {named[0]}, which is not a compared column of both indexes (the "
        "primary key is matched, not compared); columns both have: balance")


def test_the_mode_and_the_ranges() -> None:
    default = check(maxChangedRows=0)
    assert mode_for(100_000, default) == Mode.FULL
    assert mode_for(100_001, default) == Mode.HASHED
    assert mode_for(1, check(maxChangedRows=0, fullComparisonMaxRows=0)) == Mode.HASHED
    assert [ranges_for(n) for n in (0, 2000, 20_000, 50_000, 10**9)] == [
        1024, 1024, 2048, 4096, 4194304]


def test_the_common_position_is_the_lower_offset_of_each_partition() -> None:
    assert diff.common_position({"t": {"0": 10, "1": 7}}, {"t": {"0": 8}, "u": {"0": 3}}) == {
        "t": {"0": 8, "1": 0}, "u": {"0": 0}}


def test_batches_past_the_common_position_are_in_flight_on_either_side() -> None:
    # the candidate is ahead on partition 0 (batch 4 read 90..100), the active on partition 1
    # (batch 8 read 50..60): the common position is {0: 90, 1: 50}
    candidate = {3: {"t": {"0": 90, "1": 40}}, 4: {"t": {"0": 100, "1": 50}}}
    active = {7: {"t": {"0": 80, "1": 50}}, 8: {"t": {"0": 90, "1": 60}}}
    assert diff.in_flight_batches(candidate, active) == ({4}, {8})
    # level: nothing is in flight; a side without a ledger row: nothing is left out
    assert diff.in_flight_batches({1: {"t": {"0": 5}}}, {2: {"t": {"0": 5}}}) == (set(), set())
    assert diff.in_flight_batches({}, active) == (set(), set())


def test_keys_left_out_are_said_in_the_observed_line() -> None:
    found = diff.DiffFound(mode=diff.Mode.FULL, candidate_rows=10, active_rows=10,
                           only_candidate=0, only_active=0, changed=1,
                           columns=(diff.ColumnChanges("balance", 1, ("c-1",)),),
                           changed_examples=("c-1",), in_flight=4)
    assert diff.observed_text(found).endswith(
        "; 4 keys left out: written past the log position both indexes have reached; "
        "1 of the 6 compared is 2 of the whole")  # 1 x 10 / 6, rounded up


def _in_flight(changed: int, in_flight: int) -> diff.DiffFound:
    return diff.DiffFound(mode=diff.Mode.FULL, candidate_rows=500, active_rows=500,
                          only_candidate=0, only_active=0, changed=changed,
                          columns=(diff.ColumnChanges("balance", changed),),
                          in_flight=in_flight)


@pytest.mark.parametrize(("changed", "in_flight", "threshold", "outcome"), [
    # 12 of the 400 compared stand for 15 of 500: over 1 % (5 rows), within 5 % (25 rows)
    (12, 100, "1%", CheckOutcome.Failed), (12, 100, "5%", CheckOutcome.Passed),
    # 4 of 400 compared are 5 of 500: exactly 1 %, within it
    (4, 100, "1%", CheckOutcome.Passed),
    # more than half left out: too few compared to stand for the index, whatever they show
    (0, 251, "5%", CheckOutcome.Error), (0, 250, "5%", CheckOutcome.Passed)])
def test_keys_in_flight_are_judged_by_the_share_of_those_compared(
        changed: int, in_flight: int, threshold: str, outcome: CheckOutcome) -> None:
    check = DiffCheck.model_validate({"maxChangedRows": threshold,
                                      "maxChangedRowsByColumn": {"balance": threshold}})
    assert diff.judge_diff(check, _in_flight(changed, in_flight))[0] == outcome


def test_keys_are_read_again_where_both_jobs_have_passed_the_further_one() -> None:
    candidate = {("orders", 0): 105, ("orders", 1): 40}
    active = {("orders", 0): 100, ("orders", 1): 44, ("orders", 2): 3}
    target = diff.settle_position(candidate, active)
    assert target == {("orders", 0): 105, ("orders", 1): 44, ("orders", 2): 3}
    assert not diff.reached(candidate, target) and not diff.reached(active, target)
    assert diff.reached({("orders", 0): 106, ("orders", 1): 44, ("orders", 2): 3}, target)
    assert not diff.reached({("orders", 0): 106, ("orders", 1): 44}, target)  # 2 not read yet
