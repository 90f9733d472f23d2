"""The exit code of many previews, for CI: 1 refused, else 2 a change, else 0."""

from __future__ import annotations

import pytest

from derived_views.api.status import DerivedViewStatus
from derived_views.core.preview.change import LiveView
from derived_views.core.preview.previews import Preview, exit_code_of, preview_of
from support.world.hand_observed import CONTENT_V1, I1, R1, record
from support.world.samples import NAMESPACE, SQL_V2, T0, VIEW, make_settings, make_spec, spec_body

SETTINGS = make_settings()
LIVE = LiveView(make_spec(), DerivedViewStatus.model_validate(
    {"revision": R1, "active": {"revision": R1, "index": I1, "since": "2026-03-01T11:00:00Z"},
     "revisions": [record(R1, "Active", content=CONTENT_V1)]}))


def of(body: dict[str, object]) -> Preview:
    return preview_of(body, NAMESPACE, VIEW, LIVE, SETTINGS, T0)


UNCHANGED = of(spec_body())
SETTINGS_ONLY = of(spec_body(cutover={"maxLagMessages": 50}))
REPLAY = of(spec_body(SQL_V2))
REFUSED = of(spec_body(sink={"primaryKey": []}))


@pytest.mark.parametrize(("previews", "code"), [
    ([], 0), ([UNCHANGED], 0), ([UNCHANGED, SETTINGS_ONLY], 2), ([REPLAY], 2),
    ([REPLAY, REFUSED, UNCHANGED], 1),
])
def test_exit_codes(previews: list[Preview], code: int) -> None:
    assert exit_code_of(previews) == code


def test_only_a_replay_carries_a_cost() -> None:
    assert (UNCHANGED.cost, SETTINGS_ONLY.cost) == (None, None)
    assert REPLAY.cost is not None
    assert REPLAY.cost.unmeasured_topics == ("orders",)  # LIVE's status measured no offsets
