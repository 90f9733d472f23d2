"""Draws PlotData into a PNG with matplotlib's Agg backend (no display needed)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # before pyplot is imported: no display on servers and in CI

import matplotlib.pyplot as plt

from derived_views.cli.plot_data import PlotData


def write_png(data: PlotData, title: str, path: Path) -> None:
    """Messages on the left axis, seconds (dashed) on a right axis when any are known."""
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
            if seconds_axis is not None and series.has_seconds:
                known = [(x, s) for x, s in zip(series.elapsed, series.seconds, strict=True)
                         if s is not None]
                seconds_axis.plot([x for x, _ in known], [s for _, s in known], color=colour,
                                  linestyle="--", drawstyle="steps-post",
                                  label=f"{series.revision} (seconds)")
        if data.cutover_elapsed is not None:
            messages_axis.axvline(data.cutover_elapsed, color="black", linestyle=":",
                                  label=data.cutover_label)
        messages_axis.set_xlabel(
            f"seconds since {data.start.astimezone(dt.UTC).strftime('%Y-%m-%d %H:%M:%S')} UTC")
        messages_axis.set_ylabel("lag (messages)")
        messages_axis.set_ylim(bottom=0)
        handles, labels = messages_axis.get_legend_handles_labels()
        if seconds_axis is not None:
            seconds_axis.set_ylabel("lag (seconds)")
            seconds_axis.set_ylim(bottom=0)
            more_handles, more_labels = seconds_axis.get_legend_handles_labels()
            handles, labels = handles + more_handles, labels + more_labels
        messages_axis.legend(handles, labels, loc="upper right", fontsize="small")
        messages_axis.set_title(title)
        figure.tight_layout()
        figure.savefig(path, format="png")
    finally:
        plt.close(figure)
