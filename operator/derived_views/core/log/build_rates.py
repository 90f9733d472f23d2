"""Build rates: how fast a revision's build replays the log, measured from the ledger's commits
while it builds, and what a build is expected to read and take: the one rule the operator's
ETA before a rate is measured and `dv plan`'s replay time both follow (core.preview).

A build's estimate assumes the active revision's measured build, else the newest measured
build the status keeps, else the installation's default (DV_REPLAY_RECORDS_PER_SECOND and
DV_REPLAY_STARTUP_SECONDS): a start-up, then the records at a steady rate. The rate is
measured between the first commit the operator saw and the newest one while the build is not
hydrated (after that the commit rate is the log's traffic, not a replay); the start-up is
what the first commit took beyond that rate. A new attempt (a resume moves `startedAt`)
measures afresh. Pure: the planner (core.planner.readings) and the preview call it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from derived_views.api.status import BuildEstimate, BuildRate, Lag, RevisionStatus
from derived_views.core.settings import SparkSettings

MEASURED_SPREAD = 1.5
"""A measured rate's range: from 1.5x faster to 1.5x slower. The same shape's steady rate
grew 1.5x to 2x from 0.5 to 4 million records (docs/performance.md, "Linearity"), and a busy
cluster slows it down."""
DEFAULT_SPREAD = 3.0
"""The default's range, wider: across shapes the steady rate spans 30,750 to 116,056
records/s on the same machine (docs/performance.md), about 40,000 times 3 either way."""


@dataclass(frozen=True)
class AssumedRate:
    """The start-up and steady rate an estimate assumes, and whose build measured them."""

    records_per_second: float
    startup_seconds: float
    from_revision: str | None = None
    """None: the installation's default."""


def default_rate(spark: SparkSettings) -> AssumedRate:
    return AssumedRate(spark.replay_records_per_second, spark.replay_startup_seconds)


def rate_of(record: RevisionStatus) -> AssumedRate | None:
    """What the record's measured build shows (None before its second commit)."""
    build = record.build_rate
    if build is None or not build.records_per_second:
        return None
    rate = build.records_per_second
    startup = max(build.first_seconds - build.first_records / rate, 0.0)
    return AssumedRate(rate, round(startup, 1), record.revision)


def assumed_rate(records: Iterable[RevisionStatus], active: str | None,
                 default: AssumedRate) -> AssumedRate:
    """The active revision's measured build, else the newest measured one, else `default`."""
    kept = list(records)
    for record in [r for r in kept if r.revision == active] + sorted(
            kept, key=lambda r: r.started_at, reverse=True):
        found = rate_of(record)
        if found is not None:
            return found
    return default


def replay_seconds(records: int, rate: AssumedRate) -> int:
    """Expected whole seconds from a build's start until it holds `records`."""
    return math.ceil(rate.startup_seconds + records / rate.records_per_second)


def replay_range(records: int, rate: AssumedRate) -> tuple[int, int]:
    """(fast, slow) seconds: the rate spread by MEASURED_SPREAD, or DEFAULT_SPREAD for the
    default."""
    spread = DEFAULT_SPREAD if rate.from_revision is None else MEASURED_SPREAD
    fast = AssumedRate(rate.records_per_second * spread, rate.startup_seconds)
    slow = AssumedRate(rate.records_per_second / spread, rate.startup_seconds)
    return replay_seconds(records, fast), replay_seconds(records, slow)


def estimate_of(records: int, rate: AssumedRate) -> BuildEstimate:
    return BuildEstimate(records=records, seconds=replay_seconds(records, rate),
                         records_per_second=round(rate.records_per_second, 1),
                         startup_seconds=round(rate.startup_seconds, 1),
                         from_revision=rate.from_revision)


def with_estimate(lag: Lag | None, estimate: BuildEstimate | None, elapsed: float
                  ) -> Lag | None:
    """The lag with the estimate's ETA where no measured one exists, `elapsed` seconds into
    the attempt: the start-up left, then what is not read yet at the assumed rate."""
    if lag is None or estimate is None or not lag.messages or lag.eta_seconds is not None:
        return lag
    unread = max(lag.messages - (lag.batch_read or 0), 0)
    eta = math.ceil(max(estimate.startup_seconds - elapsed, 0.0)
                    + unread / estimate.records_per_second)
    return lag.model_copy(update={"eta_seconds": eta, "eta_estimated": True})


def measured_rate(previous: BuildRate | None, committed: int, seconds: float) -> BuildRate:
    """The build's rate with a commit of `committed` records (from its history start)
    `seconds` into the attempt; `previous` unchanged unless the commit is newer and larger."""
    seconds = round(seconds, 3)
    if previous is None:
        return BuildRate(first_records=committed, first_seconds=seconds, records=committed,
                         seconds=seconds)
    if committed <= previous.records or seconds <= previous.seconds:
        return previous
    rate = (committed - previous.first_records) / (seconds - previous.first_seconds)
    return previous.model_copy(update={"records": committed, "seconds": seconds,
                                       "records_per_second": round(rate, 1)})
