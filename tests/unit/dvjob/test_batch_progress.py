"""The running batch's progress as the job reports it: stage counts kept and capped, the
reporter's brackets, and a failing sink that never fails the batch."""

from __future__ import annotations

import datetime as dt

import pytest

from dvjob.batch_progress import (
    PROGRESS_CONF,
    PROGRESS_SECONDS,
    Progress,
    ProgressReporter,
    RunningBatch,
    progress_setting,
)
from dvjob.errors import ConfigError

T0 = dt.datetime(2026, 3, 1, 12, 0, 0, tzinfo=dt.UTC)
ENDS = {"orders": {"0": 900, "1": 600}}


def test_a_finished_stage_keeps_its_last_count_and_a_count_never_goes_back() -> None:
    batch = RunningBatch(0, ENDS, T0)
    batch.saw([(3, 1000), (4, 200)])
    batch.saw([(4, 150)])  # stage 3 finished; stage 4's count read from an older heartbeat
    batch.saw([(4, 700), (5, 0)])
    assert batch.records_read() == 1700


def test_a_count_above_the_batch_s_size_is_capped() -> None:
    """The bad-record count reads the batch a second time: a batch never reports more than
    it holds."""
    batch = RunningBatch(7, ENDS, T0, records=1500)
    batch.saw([(10, 1500), (11, 900)])
    assert batch.records_read() == 1500


class Reports:
    def __init__(self, fail: bool = False) -> None:
        self.got: list[Progress] = []
        self.fail = fail

    def report_progress(self, progress: Progress) -> None:
        if self.fail:
            raise OSError("connection refused")
        self.got.append(progress)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> dt.datetime:
        return self.now


def test_reports_are_sent_only_while_a_batch_runs() -> None:
    sink, clock = Reports(), Clock()
    stages = [[(1, 10)], [(1, 400), (2, 5)]]
    reporter = ProgressReporter(sink, lambda: stages.pop(0), print, clock=clock)
    reporter.tick()
    assert sink.got == []  # no batch
    reporter.begin(3, ENDS, None)
    clock.now = T0 + dt.timedelta(seconds=3)
    reporter.tick()
    clock.now = T0 + dt.timedelta(seconds=6)
    reporter.tick()
    reporter.end()
    reporter.tick()
    assert sink.got == [Progress(3, 10, ENDS, T0, T0 + dt.timedelta(seconds=3)),
                        Progress(3, 405, ENDS, T0, T0 + dt.timedelta(seconds=6))]


def test_a_failing_report_is_said_once_and_the_batch_goes_on() -> None:
    said: list[str] = []
    reporter = ProgressReporter(Reports(fail=True), lambda: [(1, 10)], said.append,
                                clock=Clock())
    reporter.begin(0, ENDS, None)
    reporter.tick()
    reporter.tick()
    assert len(said) == 1 and "batch 0: progress not reported" in said[0]
    assert "connection refused" in said[0]


def test_the_thread_reports_on_its_own_and_stops() -> None:
    sink = Reports()
    reporter = ProgressReporter(sink, lambda: [(1, 10)], print, every=0.05).start()
    reporter.begin(0, ENDS, None)
    waited = 0
    while not sink.got and waited < 200:
        reporter._stop.wait(0.05)
        waited += 1
    reporter.stop()
    assert sink.got and sink.got[0].records_read == 10
    assert not reporter._thread.is_alive()


def test_the_interval_setting_is_a_number_of_seconds_or_a_config_error() -> None:
    assert progress_setting(None) == PROGRESS_SECONDS
    assert progress_setting(" ") == PROGRESS_SECONDS
    assert progress_setting("0.5") == 0.5
    assert progress_setting("0") == 0
    for bad in ("soon", "-1", "inf", "nan"):
        with pytest.raises(ConfigError, match=PROGRESS_CONF):
            progress_setting(bad)


def test_an_interval_of_zero_starts_no_thread() -> None:
    reporter = ProgressReporter(Reports(), lambda: [], print, every=0).start()
    assert not reporter._thread.is_alive()
    reporter.stop()


def test_the_job_writes_its_reports_where_the_operator_reads_them() -> None:
    """Two sides that cannot import each other name the same table and document."""
    from derived_views.adapters.opensearch.ledger import _progress_id
    from derived_views.core.naming import progress_table as operator_table
    from dvjob.sinks.opensearch.mapping import progress_id
    from dvjob.sinks.postgres.sink import progress_table as job_table

    for ledger in ("dv_ledger", "x" * 63):
        assert job_table(ledger) == operator_table(ledger)
        assert len(job_table(ledger).encode()) <= 63
    assert progress_id("3f9c1a2b4d") == _progress_id("3f9c1a2b4d") == "3f9c1a2b4d:progress"
