"""`dv plot` data: series per revision and the cutover mark, from status.lagHistory."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from derived_views.api.status import DerivedViewStatus
from derived_views.cli.plot import LOG_SPREAD, _spread, write_png
from derived_views.cli.plot_data import NoHistory, Series, plot_data


def at(seconds: int) -> dt.datetime:
    return dt.datetime(2026, 3, 1, 12, 0, seconds, tzinfo=dt.UTC)


STATUS = DerivedViewStatus.model_validate({
    "lagHistory": [
        # deliberately out of order: the extraction sorts by time
        {"time": "2026-03-01T12:00:20Z", "revision": "bb", "messages": 400, "seconds": 12},
        {"time": "2026-03-01T12:00:00Z", "revision": "aa", "messages": 5},
        {"time": "2026-03-01T12:00:10Z", "revision": "bb", "messages": 900, "batchRead": 300,
         "etaSeconds": 20},
        {"time": "2026-03-01T12:00:30Z", "revision": "aa", "messages": 0, "seconds": 0},
        {"time": "2026-03-01T12:00:40Z", "revision": "bb", "messages": 0, "seconds": 0},
    ],
    "lastCutover": {"from": "aa", "to": "bb", "gateHeldAt": "2026-03-01T12:00:45Z",
                    "switchedAt": "2026-03-01T12:00:50Z"},
})


def test_series_per_revision_in_order_of_first_sample() -> None:
    data = plot_data(STATUS)
    assert data.start == at(0)
    assert data.series == (
        Series(revision="aa", times=(at(0), at(30)), elapsed=(0.0, 30.0), messages=(5, 0),
               seconds=(None, 0), etas=(None, None), unread=(None, None)),
        # bb's first batch had read 300 of its 900 (600 still unread), ETA 20 s
        Series(revision="bb", times=(at(10), at(20), at(40)), elapsed=(10.0, 20.0, 40.0),
               messages=(900, 400, 0), seconds=(None, 12, 0), etas=(20, None, None),
               unread=(600, None, None)),
    )
    assert (data.cutover_at, data.cutover_elapsed, data.cutover_label) == (
        at(50), 50.0, "cutover aa -> bb")


def test_no_cutover_yet_means_no_mark() -> None:
    data = plot_data(DerivedViewStatus.model_validate({"lagHistory": [
        {"time": "2026-03-01T12:00:00Z", "revision": "aa", "messages": 7}]}))
    assert (data.cutover_at, data.cutover_elapsed) == (None, None)
    assert data.series[0].has_seconds is False


def test_no_history_is_a_clear_error() -> None:
    with pytest.raises(NoHistory, match="no lag history yet"):
        plot_data(DerivedViewStatus())


def test_png_is_written(tmp_path: Path) -> None:
    path = tmp_path / "lag.png"
    write_png(plot_data(STATUS), "shop/orders lag", path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_an_hour_of_staleness_beside_seconds_of_eta_is_drawn_on_a_log_axis(
        tmp_path: Path) -> None:
    status = DerivedViewStatus.model_validate({"lagHistory": [
        {"time": "2026-03-01T12:00:00Z", "revision": "bb", "messages": 900, "seconds": 3600,
         "etaSeconds": 40, "batchRead": 100},
        {"time": "2026-03-01T12:00:10Z", "revision": "bb", "messages": 0, "seconds": 0}]})
    data = plot_data(status)
    assert _spread(data) == 90.0 > LOG_SPREAD
    path = tmp_path / "lag.png"
    write_png(data, "shop/orders lag", path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
