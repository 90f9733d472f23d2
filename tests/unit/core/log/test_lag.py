"""Lag per partition and in total, worked out by hand."""

from __future__ import annotations

import datetime as dt

from derived_views.api.spec import Cutover
from derived_views.api.status import Lag
from derived_views.core.log.lag import commit_rate, compute_lag, reset_partitions, within_gate
from derived_views.core.observed import LedgerPosition, RunningBatch

NOW = dt.datetime(2026, 3, 1, 12, 0, 0, tzinfo=dt.UTC)
ENDS = {("orders", 0): 1000, ("orders", 1): 500, ("payments", 0): 70}


def test_lag_is_end_minus_committed_per_partition() -> None:
    position = LedgerPosition({("orders", 0): 990, ("orders", 1): 500}, NOW - dt.timedelta(
        seconds=41))
    lag = compute_lag(ENDS, ["orders"], position, NOW)
    assert lag is not None
    assert lag.partitions == {"orders/0": 10, "orders/1": 0}
    assert lag.messages == 10
    assert lag.since_commit_seconds == 41
    assert lag.seconds is None  # one batch: no rate to drain at yet


def test_a_partition_missing_from_the_ledger_counts_from_zero() -> None:
    position = LedgerPosition({("orders", 0): 1000}, NOW)
    lag = compute_lag(ENDS, ["orders", "payments"], position, NOW)
    assert lag is not None
    assert lag.partitions == {"orders/0": 0, "orders/1": 500, "payments/0": 70}
    assert lag.messages == 570


def test_no_ledger_yet_means_everything_is_lag_and_seconds_unknown() -> None:
    lag = compute_lag(ENDS, ["payments"], None, NOW)
    assert lag is not None
    assert (lag.messages, lag.seconds, lag.partitions) == (70, None, {"payments/0": 70})


def test_caught_up_is_zero_seconds_and_never_negative() -> None:
    position = LedgerPosition({("orders", 0): 1005, ("orders", 1): 500}, NOW - dt.timedelta(
        hours=3))
    lag = compute_lag(ENDS, ["orders"], position, NOW)
    assert lag is not None
    assert (lag.messages, lag.seconds) == (0, 0)
    assert lag.partitions["orders/0"] == 0


def test_partitions_sort_numerically() -> None:
    ends = {("t", 10): 1, ("t", 2): 1, ("t", 1): 1}
    lag = compute_lag(ends, ["t"], None, NOW)
    assert lag is not None
    assert list(lag.partitions) == ["t/1", "t/2", "t/10"]


def test_an_undescribed_topic_makes_lag_unknown() -> None:
    assert compute_lag(ENDS, ["orders", "refunds"], None, NOW) is None


# The ETA and the time since the last commit: worked out by hand ----------------------------

def test_the_eta_drains_the_lag_at_the_measured_rate() -> None:
    # 600 messages committed over the 30 s between the two batches: 20 messages/s.
    earlier = LedgerPosition({("orders", 0): 400, ("orders", 1): 500}, NOW - dt.timedelta(seconds=33))
    position = LedgerPosition({("orders", 0): 1000, ("orders", 1): 500},
                              NOW - dt.timedelta(seconds=3), earlier=earlier)
    ends = {("orders", 0): 1100, ("orders", 1): 510}
    lag = compute_lag(ends, ["orders"], position, NOW)
    assert lag is not None
    assert lag.messages == 110
    # ceil(110 / 20) = 6 s to drain, 3 s since the last commit; no record times: no staleness
    assert (lag.eta_seconds, lag.since_commit_seconds, lag.seconds) == (6, 3, None)


def test_a_job_that_stops_committing_grows_stale_whatever_its_rate() -> None:
    earlier = LedgerPosition({("orders", 0): 0}, NOW - dt.timedelta(seconds=130))
    position = LedgerPosition({("orders", 0): 100_000}, NOW - dt.timedelta(seconds=100),
                              earlier=earlier)
    # the one record it lacks arrived right after its last commit
    times = {(("orders", 0), 100_000): NOW - dt.timedelta(seconds=99)}
    lag = compute_lag({("orders", 0): 100_001}, ["orders"], position, NOW, times)
    assert lag is not None and (lag.seconds, lag.eta_seconds) == (99, 1)


def test_no_progress_between_batches_leaves_the_eta_unknown() -> None:
    earlier = LedgerPosition({("orders", 0): 10}, NOW - dt.timedelta(seconds=40))
    position = LedgerPosition({("orders", 0): 10}, NOW, earlier=earlier)
    lag = compute_lag({("orders", 0): 20}, ["orders"], position, NOW)
    assert lag is not None and lag.eta_seconds is None


def test_commit_rate_counts_only_forward_movement() -> None:
    earlier = LedgerPosition({("orders", 0): 10, ("orders", 1): 50}, NOW - dt.timedelta(seconds=10))
    position = LedgerPosition({("orders", 0): 60, ("orders", 1): 50, ("orders", 2): 50}, NOW,
                              earlier=earlier)
    assert commit_rate(position) == 10.0  # (50 + 0 + 50) / 10 s
    assert commit_rate(LedgerPosition({("orders", 0): 60}, NOW)) is None


def test_a_log_below_the_index_is_a_reset_not_a_zero_lag() -> None:
    position = LedgerPosition({("orders", 0): 900, ("orders", 1): 20}, NOW)
    ends = {("orders", 0): 1000, ("orders", 1): 5, ("payments", 0): 0}
    assert reset_partitions(ends, ["orders", "payments"], position) == ["orders/1"]
    assert reset_partitions(ends, ["payments"], position) == []
    assert reset_partitions(ends, ["orders"], None) == []


def test_the_gate_holds_on_messages_or_on_time() -> None:
    def lag(messages: int, seconds: int | None) -> Lag:
        return Lag(messages=messages, seconds=seconds)

    default = Cutover()  # maxLagMessages 0, maxLagSeconds 10
    assert within_gate(lag(0, 0), default)
    assert within_gate(lag(350, 4), default)
    assert within_gate(lag(350, 10), default)
    assert not within_gate(lag(350, 11), default)
    assert not within_gate(lag(350, None), default)
    assert not within_gate(None, default)
    messages_only = Cutover(max_lag_messages=100, max_lag_seconds=0)
    assert within_gate(lag(100, 500), messages_only)
    assert not within_gate(lag(101, 0), messages_only)


def running(batch_id: int, read: int, *, ends: dict[tuple[str, int], int] | None = None,
            started: int = 20, reported: int = 2) -> RunningBatch:
    """A report of batch `batch_id` that has read `read` records in the `started - reported`
    seconds before its report, which is `reported` seconds old."""
    return RunningBatch(
        batch_id=batch_id, records_read=read, end_offsets=ends or {("payments", 0): 70},
        started_at=NOW - dt.timedelta(seconds=started),
        reported_at=NOW - dt.timedelta(seconds=reported))


def test_a_first_batch_s_reads_show_and_give_an_eta_at_the_read_rate() -> None:
    # 70 behind, nothing committed; the first batch has read 36 in 18 s: 2/s, 34 left
    lag = compute_lag(ENDS, ["payments"], None, NOW, running=running(0, 36))
    assert lag is not None
    assert (lag.messages, lag.batch_read, lag.eta_seconds) == (70, 36, 17)
    assert lag.seconds is None  # read is not committed: staleness is untouched


def test_reads_count_only_within_the_batch_s_range_above_the_committed_offsets() -> None:
    position = LedgerPosition({("orders", 0): 900, ("orders", 1): 500}, NOW, batch_id=4)
    # batch 5 reaches 950 on orders/0 (50 records) and nothing new on orders/1
    report = running(5, 400, ends={("orders", 0): 950, ("orders", 1): 500})
    lag = compute_lag(ENDS, ["orders"], position, NOW, running=report)
    assert lag is not None and (lag.messages, lag.batch_read) == (100, 50)


def test_a_report_of_a_committed_batch_or_a_stale_report_is_not_shown() -> None:
    position = LedgerPosition({("payments", 0): 30}, NOW, batch_id=2)
    committed = compute_lag(ENDS, ["payments"], position, NOW, running=running(2, 30))
    stale = compute_lag(ENDS, ["payments"], None, NOW, running=running(0, 30, reported=31))
    assert committed is not None and committed.batch_read is None
    assert stale is not None and stale.batch_read is None and stale.eta_seconds is None


def test_with_a_commit_rate_the_eta_counts_down_as_the_running_batch_reads() -> None:
    earlier = LedgerPosition({("payments", 0): 10}, NOW - dt.timedelta(seconds=30), batch_id=1)
    position = LedgerPosition({("payments", 0): 40}, NOW, batch_id=2, earlier=earlier)
    before = compute_lag(ENDS, ["payments"], position, NOW)
    reading = compute_lag(ENDS, ["payments"], position, NOW, running=running(3, 20))
    assert before is not None and reading is not None
    assert (before.messages, before.eta_seconds) == (30, 30)  # 30 at the commit rate, 1/s
    assert (reading.messages, reading.batch_read, reading.eta_seconds) == (30, 20, 10)


def test_a_negative_count_in_a_report_reads_as_nothing_read() -> None:
    lag = compute_lag(ENDS, ["payments"], None, NOW, running=running(0, -5))
    assert lag is not None and lag.batch_read == 0
