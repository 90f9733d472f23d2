"""The planner and a spec whose SQL is refused: no job, no revision, the active serves on."""

from __future__ import annotations

from derived_views.core import actions as A
from derived_views.core.plan import plan
from support.world.hand_observed import CONTENT_V1, ENDS, I1, R1, observed, record
from support.world.samples import SQL_V1, T0, make_spec

BROKEN = "SELECT customer_id, count(*) AS orders FROM events GROUP BY custmer_id"


def _conditions(actions: list[A.Action]) -> dict[str, dict[str, str]]:
    update = next(a for a in actions if isinstance(a, A.UpdateStatus))
    return {c["type"]: c for c in update.patch["conditions"]}


def test_a_refused_revision_starts_no_job_and_the_active_keeps_serving() -> None:
    status = {"revisions": [record(R1, "Active", content=CONTENT_V1)]}
    world = observed(status, indexes={I1}, alias=I1, apps={R1: "RUNNING"}, ledger={R1: ENDS})
    actions = plan(make_spec(BROKEN), world, T0)
    assert not any(isinstance(a, A.CreateSparkApplication | A.DeleteSparkApplication
                              | A.SwitchAlias | A.DropIndex) for a in actions)
    update = next(a for a in actions if isinstance(a, A.UpdateStatus))
    assert [r.revision for r in update.status.revisions] == [R1]  # no record for the refused
    conditions = _conditions(actions)
    stalled = conditions["Stalled"]
    assert (stalled["status"], stalled["reason"]) == ("True", "InvalidTransform")
    assert "`custmer_id` cannot be resolved" in stalled["message"]
    assert f"revision {R1} keeps serving" in stalled["message"]
    assert conditions["Reconciling"]["reason"] == "InvalidTransform"


def test_the_first_revision_refused_names_no_server() -> None:
    world = observed({}, indexes=set(), alias=None, apps={}, ledger={})
    actions = plan(make_spec(BROKEN), world, T0)
    assert not any(isinstance(a, A.CreateSparkApplication) for a in actions)
    stalled = _conditions(actions)["Stalled"]
    assert stalled["reason"] == "InvalidTransform" and "keeps serving" not in stalled["message"]


def test_a_valid_spec_still_starts_its_job() -> None:
    world = observed({}, indexes=set(), alias=None, apps={}, ledger={})
    actions = plan(make_spec(SQL_V1), world, T0)
    assert any(isinstance(a, A.CreateSparkApplication) for a in actions)
