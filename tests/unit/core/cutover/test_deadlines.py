"""When a candidate is given up: stalled progress by default, age only when asked."""

from __future__ import annotations

import datetime as dt

from derived_views.api.spec import Cutover
from derived_views.api.status import Lag
from derived_views.core.cutover.deadlines import deadline_verdict
from derived_views.core.observed import LedgerPosition

T = dt.datetime(2026, 3, 1, 12, 0, 0, tzinfo=dt.UTC)
BEHIND = Lag(messages=5000)


def at(seconds: int) -> dt.datetime:
    return T + dt.timedelta(seconds=seconds)


def committed(seconds: int) -> LedgerPosition:
    return LedgerPosition({("orders", 0): 1}, at(seconds))


def test_a_slow_replay_that_keeps_committing_is_never_torn_down_by_default() -> None:
    cutover = Cutover()
    for hours in (1, 5, 48):
        now = at(hours * 3600)
        assert deadline_verdict(cutover, T, committed(hours * 3600 - 30), BEHIND, now) is None


def test_no_commit_for_the_progress_deadline_while_behind_tears_down() -> None:
    cutover = Cutover(progress_deadline_seconds=600)
    assert deadline_verdict(cutover, T, committed(1000), BEHIND, at(1599)) is None
    verdict = deadline_verdict(cutover, T, committed(1000), BEHIND, at(1600))
    assert verdict is not None
    assert verdict[0] == "ProgressDeadlineExceeded"
    assert "no progress for 600s (since its last commit) while 5000 messages behind" in verdict[1]


def test_a_job_that_never_commits_counts_from_its_start() -> None:
    cutover = Cutover(progress_deadline_seconds=300)
    assert deadline_verdict(cutover, T, None, BEHIND, at(299)) is None
    verdict = deadline_verdict(cutover, T, None, BEHIND, at(300))
    assert verdict is not None and "since it started, without a commit" in verdict[1]
    # a commit from before this attempt (a resumed revision) does not count as progress
    assert deadline_verdict(cutover, T, committed(-5000), BEHIND, at(300)) is not None


def test_an_idle_log_or_an_unknown_lag_is_not_a_stall() -> None:
    cutover = Cutover(progress_deadline_seconds=60)
    assert deadline_verdict(cutover, T, committed(0), Lag(messages=0), at(10_000)) is None
    assert deadline_verdict(cutover, T, committed(0), None, at(10_000)) is None


def test_the_optional_age_cap_still_applies_when_set() -> None:
    cutover = Cutover(deadline_seconds=3600)
    verdict = deadline_verdict(cutover, T, committed(3590), Lag(messages=0), at(3600))
    assert verdict == ("DeadlineExceeded", "not promoted within 3600s of starting; torn down")
