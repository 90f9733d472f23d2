"""The installation's settings: the micro-batch interval a view's jobs get."""

from __future__ import annotations

import json

import pytest

from derived_views.api.spec import Cutover
from derived_views.core.revision import job_settings_of
from derived_views.core.settings import SparkSettings, gate_trigger_seconds
from support.rendering import BODY, render
from support.world.samples import make_spec


@pytest.mark.parametrize(("gate", "interval"), [
    (0, 1.0),  # messages only: the freshest index
    (1, 1.0), (2, 1.0), (3, 1.5), (10, 5.0), (45, 22.5), (120, 60.0), (86400, 60.0)])
def test_a_views_interval_is_half_its_gate_between_one_second_and_a_minute(
        gate: int, interval: float) -> None:
    assert gate_trigger_seconds(gate) == interval


def test_an_installation_interval_overrides_every_gate() -> None:
    cutover = Cutover.model_validate({"maxLagSeconds": 40})
    assert SparkSettings().trigger_of(cutover) == 20.0
    assert SparkSettings(trigger_seconds=3.0).trigger_of(cutover) == 3.0


def _trigger(body: dict[str, object]) -> object:
    return json.loads(render(body)["spec"]["arguments"][1])["trigger"]


def test_the_rendered_job_runs_at_its_gates_interval() -> None:
    assert _trigger(BODY) == {"processingTimeSeconds": 5}  # the default gate, 10 s
    assert _trigger({**BODY, "cutover": {"maxLagSeconds": 3}}) == {"processingTimeSeconds": 1.5}
    assert _trigger({**BODY, "cutover": {"maxLagSeconds": 0, "maxLagMessages": 10}}) == {
        "processingTimeSeconds": 1}


def test_jobs_at_one_second_keep_the_job_settings_they_had() -> None:
    """Before the interval was part of the job settings, every job ran at 1 s: those keep
    their hash (no restart on upgrade); any other interval is a setting of its own."""
    spec = make_spec()
    assert job_settings_of(spec, 1.0) == job_settings_of(spec)
    assert len({job_settings_of(spec, s) for s in (1.0, 5.0, 7.5)}) == 3
