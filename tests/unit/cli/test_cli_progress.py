"""`dv watch` arithmetic: partition progress, rate, ETA and when a watch ends."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from derived_views.api.status import DerivedViewStatus, Lag
from derived_views.cli.progress import (
    Estimate,
    Outcome,
    PartitionProgress,
    Poll,
    WatchVerdict,
    batch_line,
    estimate,
    eta_text,
    partitions,
    percent,
    watch_verdict,
    watched_lag,
)

T0 = dt.datetime(2026, 3, 1, 12, 0, 0, tzinfo=dt.UTC)


def test_partitions_done_is_end_offset_minus_lag_sorted_numerically() -> None:
    lag = Lag(messages=4700, partitions={"orders/10": 100, "orders/2": 600, "audit/0": 4000},
              end_offsets={"orders/10": 1000, "orders/2": 600, "audit/0": 5000})
    assert partitions(lag) == [
        PartitionProgress("audit/0", done=1000, total=5000),
        PartitionProgress("orders/2", done=0, total=600),
        PartitionProgress("orders/10", done=900, total=1000),
    ]


def test_a_lag_above_the_recorded_end_offset_is_nothing_done_not_negative() -> None:
    lag = Lag(messages=70, partitions={"t/0": 70}, end_offsets={"t/0": 50})
    assert partitions(lag) == [PartitionProgress("t/0", done=0, total=70)]


def obs(seconds: float, *parts: tuple[str, int, int]) -> Poll:
    return Poll(T0 + dt.timedelta(seconds=seconds),
                       tuple(PartitionProgress(k, done=d, total=t) for k, d, t in parts))


EARLIER = obs(0, ("t/0", 1000, 5000), ("t/1", 0, 2000))
LATER = obs(10, ("t/0", 3000, 6000), ("t/1", 2000, 2000))


@pytest.mark.parametrize(("earlier", "later", "key", "expected"), [
    # t/0: done 1000 -> 3000 in 10 s = 200/s; lag 4000 -> 3000 shrinks 100/s: 30 s left.
    (EARLIER, LATER, "t/0", Estimate(rate=200.0, eta_seconds=30.0)),
    # t/1: 2000 done in 10 s = 200/s, nothing left.
    (EARLIER, LATER, "t/1", Estimate(rate=200.0, eta_seconds=0.0)),
    # all: done 1000 -> 5000 = 400/s; lag 6000 -> 3000 = 300/s shrink: 10 s left.
    (EARLIER, LATER, None, Estimate(rate=400.0, eta_seconds=10.0)),
    # no earlier observation: nothing known yet, unless nothing is left.
    (None, LATER, "t/0", Estimate(rate=None, eta_seconds=None)),
    (None, LATER, "t/1", Estimate(rate=None, eta_seconds=0.0)),
    # lag growing (topic outruns the replay): a rate but no ETA.
    (obs(0, ("t/0", 0, 100)), obs(4, ("t/0", 40, 200)), None, Estimate(rate=10.0,
                                                                       eta_seconds=None)),
    # same instant: no rate.
    (obs(5, ("t/0", 0, 100)), obs(5, ("t/0", 50, 100)), None, Estimate(rate=None,
                                                                       eta_seconds=None)),
])
def test_estimate(earlier: Poll | None, later: Poll, key: str | None,
                  expected: Estimate) -> None:
    assert estimate(earlier, later, key) == expected


@pytest.mark.parametrize(("done", "total", "expected"), [(0, 0, 100.0), (1, 4, 25.0),
                                                         (3, 3, 100.0)])
def test_percent(done: int, total: int, expected: float) -> None:
    assert percent(done, total) == expected


def status(**fields: Any) -> DerivedViewStatus:
    return DerivedViewStatus.model_validate(fields)


LAG = {"messages": 5, "partitions": {"t/0": 5}, "endOffsets": {"t/0": 10}}
RECORD = {"index": "v__r", "since": "2026-03-01T12:00:00Z", "sparkApplication": "a",
          "checkpointLocation": "/c", "startedAt": "2026-03-01T12:00:00Z"}


def test_watched_lag_prefers_the_candidate() -> None:
    s = status(revision="bb", active={"revision": "aa", "index": "v__aa",
                                      "since": "2026-03-01T12:00:00Z", "lag": {"messages": 0}},
               candidate={"revision": "bb", "index": "v__bb", "phase": "Backfilling",
                          "since": "2026-03-01T12:00:00Z", "lag": LAG})
    assert watched_lag(s) == ("bb", Lag(messages=5, partitions={"t/0": 5},
                                        end_offsets={"t/0": 10}))


def test_watched_lag_of_a_first_backfill_is_the_spec_revisions_record() -> None:
    s = status(revision="aa", revisions=[{**RECORD, "revision": "aa", "phase": "Backfilling",
                                          "lag": LAG}])
    assert watched_lag(s) == ("aa", Lag(messages=5, partitions={"t/0": 5},
                                        end_offsets={"t/0": 10}))


def test_watched_lag_is_none_when_only_an_active_serves() -> None:
    s = status(revision="aa", active={"revision": "aa", "index": "v__aa",
                                      "since": "2026-03-01T12:00:00Z", "lag": LAG})
    assert watched_lag(s) is None


def cond(type_: str, value: str, reason: str, message: str = "") -> dict[str, Any]:
    return {"type": type_, "status": value, "reason": reason, "message": message,
            "lastTransitionTime": "2026-03-01T12:00:00Z"}


CANDIDATE = {"revision": "bb", "index": "v__bb", "phase": "Backfilling",
             "since": "2026-03-01T12:00:00Z"}


@pytest.mark.parametrize(("fields", "generation", "expected"), [
    ({"observedGeneration": 2, "conditions": [cond("Ready", "True", "Serving")]}, 2,
     WatchVerdict(Outcome.DONE, "Ready, no candidate left")),
    ({"observedGeneration": 2, "candidate": CANDIDATE,
      "conditions": [cond("Ready", "True", "Serving")]}, 2, WatchVerdict(Outcome.WAITING)),
    # Ready for an older generation: the operator has not seen the new spec yet.
    ({"observedGeneration": 1, "conditions": [cond("Ready", "True", "Serving")]}, 2,
     WatchVerdict(Outcome.WAITING)),
    ({"conditions": [cond("Ready", "False", "Backfilling")]}, None, WatchVerdict(Outcome.WAITING)),
    ({"conditions": [cond("Ready", "True", "Serving"),
                     cond("Degraded", "True", "DeadlineExceeded", "not caught up in 3600s")]},
     None, WatchVerdict(Outcome.FAILED, "Degraded (DeadlineExceeded): not caught up in 3600s")),
    ({"conditions": [cond("Stalled", "True", "SinkTableClaimed")]}, None,
     WatchVerdict(Outcome.FAILED, "Stalled (SinkTableClaimed)")),
    ({"revision": "bb", "revisions": [{**RECORD, "revision": "bb", "phase": "Failed",
                                       "reason": "JobFailed", "message": "driver exited 1"}]},
     None, WatchVerdict(Outcome.FAILED, "revision bb Failed (JobFailed): driver exited 1")),
])
def test_watch_verdict(fields: dict[str, Any], generation: int | None,
                       expected: WatchVerdict) -> None:
    assert watch_verdict(status(**fields), generation) == expected


def test_exit_codes_are_the_documented_ones() -> None:
    assert (Outcome.DONE.value, Outcome.TIMED_OUT.value, Outcome.FAILED.value) == (0, 4, 3)


def test_the_running_batch_s_reads_are_a_line_of_their_own() -> None:
    lag = Lag(messages=55_546, batch_read=31_000, eta_seconds=40)
    assert batch_line(lag) == ("running batch has read 31,000 of the 55,546 records not yet "
                               "committed (55.8%), eta 40s")
    assert batch_line(Lag(messages=55_546)) is None
    assert batch_line(Lag(messages=0, batch_read=0)) is None


def test_the_eta_shown_is_the_polls_else_the_operators_said_when_an_estimate() -> None:
    estimated = Lag(messages=9000, eta_seconds=100, eta_estimated=True)
    assert eta_text(42.0, estimated) == "42s"  # the polls saw the lag shrink
    assert eta_text(None, estimated) == "~1m40s (estimate)"
    assert eta_text(None, Lag(messages=9000, eta_seconds=100)) == "1m40s"
    assert eta_text(None, Lag(messages=9000)) == "-"
    assert eta_text(None, None) == "-"
    assert batch_line(Lag(messages=9000, batch_read=0, eta_seconds=100, eta_estimated=True)) == (
        "running batch has read 0 of the 9,000 records not yet committed (0.0%), "
        "eta ~1m40s (estimate)")
