"""The diff check in the spec: thresholds as a count or a percentage, per column, and the
errors a wrong one gets."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from derived_views.api.spec import CutoverChecks, DiffCheck


def test_a_count_a_percentage_and_columns() -> None:
    diff = DiffCheck.model_validate({"maxChangedRows": "1%", "columns": ["balance", "note"],
                                     "maxChangedRowsByColumn": {"balance": 0, "note": "0.5%"}})
    assert (diff.max_changed_rows, diff.max_changed_rows_by_column) == (
        "1%", {"balance": 0, "note": "0.5%"})
    assert diff.full_comparison_max_rows == 100_000
    assert DiffCheck.model_validate({"maxChangedRows": 100}).max_changed_rows == 100
    assert CutoverChecks.model_validate({"diff": {"maxChangedRows": 0}}).configured()


@pytest.mark.parametrize(("body", "message"), [
    ({"maxChangedRows": "150%"}, "cutover.checks.diff.maxChangedRows must be a row count (0 or "
                                 "more) or a percentage of the active's rows from 0% to 100%, "
                                 "e.g. 100 or \"1%\"; got '150%'"),
    ({"maxChangedRows": -1}, "got -1"),
    ({"maxChangedRows": "12"}, "got '12'"),
    ({"maxChangedRows": "1 %"}, "got '1 %'"),
    ({"maxChangedRows": "-1%"}, "got '-1%'"),
    ({"maxChangedRows": 0, "maxChangedRowsByColumn": {"balance": "101%"}},
     "cutover.checks.diff.maxChangedRowsByColumn.balance must be a row count"),
    ({"maxChangedRows": 0, "maxChangedRowsByColumn": {"x; drop": 1}},
     "cutover.checks.diff.maxChangedRowsByColumn: keys are column names; got 'x; drop'"),
    ({"maxChangedRows": 0, "columns": ["note"], "maxChangedRowsByColumn": {"balance": 1}},
     "maxChangedRowsByColumn names a column missing from cutover.checks.diff.columns"),
    ({"maxChangedRows": 0, "columns": ["note", "note"]}, "columns: names must be unique"),
    ({"maxChangedRows": 0, "columns": ["a.b"]}, "String should match pattern"),
    ({"maxChangedRows": 1.5}, "Input should be a valid integer"),
    ({}, "Field required"),
])
def test_bad_thresholds_are_refused(body: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError) as refused:
        DiffCheck.model_validate(body)
    assert message in str(refused.value)


def test_an_assertion_may_not_take_the_diffs_name() -> None:
    with pytest.raises(ValidationError, match="the name diff is the diff check's"):
        CutoverChecks.model_validate({"assertions": [
            {"name": "diff", "sql": "SELECT 1 FROM {index} WHERE false"}]})
