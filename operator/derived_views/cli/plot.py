"""Draws PlotData into a PNG with matplotlib's Agg backend (no display needed)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # before pyplot is imported: no display on servers and in CI

import matplotlib.pyplot as plt

from derived_views.cli.plot_data import PlotData

LOG_SPREAD = 30
"""Largest over smallest positive seconds value beyond which the seconds axis is logarithmic."""


def _spread(data: PlotData) -> float:
    values = [v for series in data.series for v in (*series.seconds, *series.etas)
              if v is not None and v > 0]
    return max(values) / min(values) if values else 0.0


def _known(xs: tuple[float, ...], ys: tuple[int | None, ...]
           ) -> tuple[list[float], list[int]]:
    pairs = [(x, y) for x, y in zip(xs, ys, strict=False) if y is not None]
    return [x for x, _ in pairs], [y for _, y in pairs]


def write_png(data: PlotData, title: str, path: Path) -> None:
    """Messages on the left axis (the lag, solid; what the running batch has not read yet,
    dotted), seconds on a right axis when any are known (staleness dashed, ETA dash-dot)."""
    figure, messages_axis = plt.subplots(figsize=(10, 5), dpi=100)
    try:
        seconds_axis = messages_axis.twinx() if any(s.has_seconds for s in data.series) \
            else None
        for index, series in enumerate(data.series):
            colour = f"C{index % 10}"
            # Steps: the operator samples a lag only when it changed, so each holds until
            # the next sample.
            messages_axis.plot(list(series.elapsed), list(series.messages), color=colour,
                               marker=".", drawstyle="steps-post",
                               label=f"{series.revision} (messages)")
            if any(u is not None for u in series.unread):
                messages_axis.plot(*_known(series.elapsed, series.unread), color=colour,
                                   linestyle=":", drawstyle="steps-post",
                                   label=f"{series.revision} (not yet read)")
            if seconds_axis is not None and any(s is not None for s in series.seconds):
                seconds_axis.plot(*_known(series.elapsed, series.seconds), color=colour,
                                  linestyle="--", drawstyle="steps-post",
                                  label=f"{series.revision} (staleness, s)")
            if seconds_axis is not None and any(e is not None for e in series.etas):
                seconds_axis.plot(*_known(series.elapsed, series.etas), color=colour,
                                  linestyle="-.", drawstyle="steps-post",
                                  label=f"{series.revision} (ETA, s)")
        if data.cutover_elapsed is not None:
            messages_axis.axvline(data.cutover_elapsed, color="black", linestyle=":",
                                  label=data.cutover_label)
        messages_axis.set_xlabel(
            f"seconds since {data.start.astimezone(dt.UTC).strftime('%Y-%m-%d %H:%M:%S')} UTC")
        messages_axis.set_ylabel("lag (messages)")
        messages_axis.set_ylim(bottom=0)
        handles, labels = messages_axis.get_legend_handles_labels()
        if seconds_axis is not None:
            seconds_axis.set_ylabel("seconds")
            seconds_axis.set_ylim(bottom=0)
            if _spread(data) > LOG_SPREAD:  # an hour of staleness beside an ETA of seconds
                seconds_axis.set_yscale("symlog", linthresh=10)
                seconds_axis.set_ylabel("seconds (log above 10)")
            more_handles, more_labels = seconds_axis.get_legend_handles_labels()
            handles, labels = handles + more_handles, labels + more_labels
        messages_axis.legend(handles, labels, loc="upper right", fontsize="small")
        messages_axis.set_title(title)
        figure.tight_layout()
        figure.savefig(path, format="png")
    finally:
        plt.close(figure)
