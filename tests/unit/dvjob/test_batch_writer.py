"""The pure parts of the foreachBatch writer: its progress line, how large a batch is."""

from __future__ import annotations

import json

from dvjob.batch_writer import PROGRESS_PREFIX, batch_records, progress_line
from dvjob.sinks.contract import BatchOutcome


def test_progress_line_is_one_json_object() -> None:
    line = progress_line(BatchOutcome(4, False, 10, 2, {"orders": {"0": 17, "1": 3}}, 3))
    assert line.startswith(PROGRESS_PREFIX)
    assert "\n" not in line
    assert json.loads(line[len(PROGRESS_PREFIX):]) == {
        "batch": 4, "status": "committed", "rows_upserted": 10, "rows_deleted": 2,
        "bad_records": 3, "end_offsets": {"orders": {"0": 17, "1": 3}}}


def test_progress_line_of_a_skipped_batch() -> None:
    line = progress_line(BatchOutcome(4, True, 0, 0, {"orders": {"0": 17}}))
    assert json.loads(line[len(PROGRESS_PREFIX):])["status"] == "skipped"


def test_a_batch_s_records_are_counted_from_the_previous_batch_s_end() -> None:
    previous = {"orders": {"0": 100, "1": 40}, "refunds": {"0": 7}}
    end = {"orders": {"0": 130, "1": 45}, "refunds": {"0": 7}}
    assert batch_records(previous, end) == 35


def test_a_batch_whose_start_is_unknown_has_no_count() -> None:
    """The first batch, and a partition (or topic) the previous batch did not have, start at
    the earliest offset, which the offset log does not give: such a batch counts as large."""
    assert batch_records(None, {"orders": {"0": 5}}) is None
    assert batch_records({"orders": {"0": 5}}, {"orders": {"0": 9, "1": 2}}) is None
    assert batch_records({"orders": {"0": 5}}, {"orders": {"0": 9}, "new": {"0": 1}}) is None
