"""The pure parts of the foreachBatch writer: its progress line."""

from __future__ import annotations

import json

from dvjob.batch_writer import PROGRESS_PREFIX, progress_line
from dvjob.sink import BatchOutcome


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
