"""What `dv plot` draws, extracted from status.lagHistory; no I/O, no matplotlib."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from derived_views.api.status import DerivedViewStatus, LagSample


class NoHistory(Exception):
    """The view has no lag samples yet."""


@dataclass(frozen=True)
class Series:
    """One revision's lag over time, oldest first; `seconds` has None where unknown."""

    revision: str
    times: tuple[dt.datetime, ...]
    elapsed: tuple[float, ...]
    """Seconds since PlotData.start: the x axis."""
    messages: tuple[int, ...]
    seconds: tuple[int | None, ...]
    etas: tuple[int | None, ...] = ()
    """The ETA shown at each sample (None: none)."""
    unread: tuple[int | None, ...] = ()
    """Messages not yet read by the running batch (None: no batch reported)."""

    @property
    def has_seconds(self) -> bool:
        return any(s is not None for s in self.seconds + self.etas)


@dataclass(frozen=True)
class PlotData:
    start: dt.datetime
    """Time of the oldest sample."""
    series: tuple[Series, ...]
    cutover_at: dt.datetime | None
    cutover_elapsed: float | None
    cutover_label: str


def plot_data(status: DerivedViewStatus) -> PlotData:
    """Series per revision in order of first appearance, plus the last cutover mark."""
    if not status.lag_history:
        raise NoHistory("the view has no lag history yet (status.lagHistory is empty): "
                        "wait for the operator to sample its lag")
    start = min(s.time for s in status.lag_history)
    order: list[str] = []
    samples: dict[str, list[LagSample]] = {}
    for sample in sorted(status.lag_history, key=lambda s: s.time):
        if sample.revision not in samples:
            order.append(sample.revision)
            samples[sample.revision] = []
        samples[sample.revision].append(sample)
    series = tuple(Series(
        revision=r, times=tuple(s.time for s in samples[r]),
        elapsed=tuple((s.time - start).total_seconds() for s in samples[r]),
        messages=tuple(s.messages for s in samples[r]),
        seconds=tuple(s.seconds for s in samples[r]),
        etas=tuple(s.eta_seconds for s in samples[r]),
        unread=tuple(None if s.batch_read is None else s.messages - s.batch_read
                     for s in samples[r])) for r in order)
    cut = status.last_cutover
    if cut is None:
        return PlotData(start=start, series=series, cutover_at=None, cutover_elapsed=None,
                        cutover_label="")
    label = f"cutover {cut.from_revision or '(first)'} -> {cut.to_revision}"
    return PlotData(start=start, series=series, cutover_at=cut.switched_at,
                    cutover_elapsed=(cut.switched_at - start).total_seconds(), cutover_label=label)
