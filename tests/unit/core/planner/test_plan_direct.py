"""The planner on hand-built observations: precise corner cases, one decision each."""

from __future__ import annotations

import datetime as dt
from typing import Any

from derived_views.core import actions as A
from derived_views.core.plan import plan
from support.world.hand_observed import (
    CONTENT_V1,
    CONTENT_V2,
    ENDS,
    I1,
    I2,
    R1,
    R2,
    observed,
    record,
)
from support.world.samples import (
    SQL_V1,
    SQL_V2,
    T0,
    VIEW,
    make_spec,
)


def test_no_promotion_while_the_index_table_is_missing() -> None:
    status = {"revisions": [record(R1, "CaughtUp", content=CONTENT_V1,
                                   caughtUpSince="2026-03-01T11:59:00Z")]}
    actions = plan(make_spec(SQL_V1), observed(status, indexes=set(), alias=None,
                                               apps={R1: "RUNNING"}, ledger={R1: ENDS}), T0)
    assert not any(isinstance(a, A.SwitchAlias) for a in actions)
    update = next(a for a in actions if isinstance(a, A.UpdateStatus))
    rec = update.status.record(R1)
    assert rec is not None and rec.phase.value == "Backfilling" and rec.caught_up_since is None


def test_a_first_revision_serves_once_the_gate_holds() -> None:
    """Nothing serves before it, and the gate reads staleness: no stability window."""
    status = {"revisions": [record(R1, "CaughtUp", content=CONTENT_V1,
                                   caughtUpSince="2026-03-01T12:00:00Z")]}
    actions = plan(make_spec(SQL_V1), observed(status, indexes={I1}, alias=None,
                                               apps={R1: "RUNNING"}, ledger={R1: ENDS}), T0)
    assert A.SwitchAlias("public", "orders_by_customer", I1, None) in actions


def test_unknown_lag_keeps_the_gate_memory_but_does_not_promote() -> None:
    status = {"revisions": [record(R1, "CaughtUp", content=CONTENT_V1,
                                   caughtUpSince="2026-03-01T11:59:00Z")]}
    actions = plan(make_spec(SQL_V1), observed(status, indexes={I1}, alias=None,
                                               apps={R1: "RUNNING"}, ledger={R1: ENDS},
                                               ends=None), T0)
    assert not any(isinstance(a, A.SwitchAlias) for a in actions)
    update = next((a for a in actions if isinstance(a, A.UpdateStatus)), None)
    assert update is not None
    rec = update.status.record(R1)
    assert rec is not None and rec.caught_up_since == dt.datetime(2026, 3, 1, 11, 59, tzinfo=dt.UTC)


def test_a_topic_missing_from_the_end_offsets_is_not_caught_up() -> None:
    status = {"revisions": [record(R1, "Backfilling", content=CONTENT_V1)]}
    actions = plan(make_spec(SQL_V1), observed(status, indexes={I1}, alias=None,
                                               apps={R1: "RUNNING"}, ledger={},
                                               ends={("payments", 0): 5}), T0)
    update = next(a for a in actions if isinstance(a, A.UpdateStatus))
    ready = update.status.condition("CaughtUp")
    assert ready is not None and ready.status == "Unknown"


def test_a_torn_status_with_two_actives_keeps_the_one_the_alias_serves() -> None:
    status = {"revisions": [record(R1, "Active", content=CONTENT_V1),
                            record(R2, "Active", content=CONTENT_V2)]}
    actions = plan(make_spec(SQL_V2), observed(status, indexes={I1, I2}, alias=I2,
                                               apps={R1: "RUNNING", R2: "RUNNING"},
                                               ledger={R1: ENDS, R2: ENDS}), T0)
    update = next(a for a in actions if isinstance(a, A.UpdateStatus))
    phases = {r.revision: r.phase.value for r in update.status.revisions}
    assert phases == {R1: "Retiring", R2: "Active"}
    assert A.DeleteSparkApplication(R1, f"{VIEW}-{R1}") in actions


def test_deleting_overrides_pause() -> None:
    status = {"revisions": [record(R1, "Active", content=CONTENT_V1)]}
    actions = plan(make_spec(SQL_V1), observed(
        status, indexes={I1}, alias=I1, apps={R1: "RUNNING"}, ledger={R1: ENDS},
        annotations={"derivedviews.io/paused": "true"}, deletion=T0), T0)
    assert A.DeleteSparkApplication(R1, f"{VIEW}-{R1}") in actions
    assert actions[-1] == A.RemoveFinalizer("derivedviews.io/cleanup")


def test_condition_transition_times_move_only_when_the_status_changes() -> None:
    status = {"revisions": [record(R1, "Active", content=CONTENT_V1)],
              "conditions": [
                  {"type": "Ready", "status": "True", "reason": "Serving", "message": "old",
                   "lastTransitionTime": "2026-02-01T00:00:00Z", "observedGeneration": 1},
                  {"type": "Stalled", "status": "True", "reason": "JobFailed", "message": "x",
                   "lastTransitionTime": "2026-02-01T00:00:00Z", "observedGeneration": 1}]}
    actions = plan(make_spec(SQL_V1), observed(status, indexes={I1}, alias=I1,
                                               apps={R1: "RUNNING"}, ledger={R1: ENDS}), T0)
    update = next(a for a in actions if isinstance(a, A.UpdateStatus))
    ready, stalled = update.status.condition("Ready"), update.status.condition("Stalled")
    assert ready is not None and stalled is not None
    assert ready.last_transition_time == dt.datetime(2026, 2, 1, tzinfo=dt.UTC)
    assert ready.message.startswith("public.orders_by_customer serves revision")
    assert (stalled.status, stalled.last_transition_time) == ("False", T0)
    assert update.patch["conditions"][0]["lastTransitionTime"] == "2026-02-01T00:00:00Z"


def test_a_naive_now_is_refused() -> None:
    status: dict[str, Any] = {}
    try:
        plan(make_spec(SQL_V1), observed(status, indexes=set(), alias=None, apps={}, ledger={}),
             dt.datetime(2026, 3, 1, 12))
    except ValueError as exc:
        assert "time zone" in str(exc)
    else:
        raise AssertionError("a naive datetime was accepted")


def test_status_patch_removes_fields_with_nulls() -> None:
    status = {"revisions": [record(R1, "Active", content=CONTENT_V1)],
              "candidate": {"revision": R2, "index": I2, "phase": "Backfilling",
                            "since": "2026-03-01T11:00:00Z"},
              "intent": {"steps": ["x"], "recordedAt": "2026-03-01T11:00:00Z"}}
    actions = plan(make_spec(SQL_V1), observed(status, indexes={I1}, alias=I1,
                                               apps={R1: "RUNNING"}, ledger={R1: ENDS}), T0)
    update = next(a for a in actions if isinstance(a, A.UpdateStatus))
    assert update.patch["candidate"] is None and update.patch["intent"] is None
