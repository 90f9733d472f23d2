"""The planner on hand-built observations: precise corner cases, one decision each."""

from __future__ import annotations

import datetime as dt
from typing import Any

from core_samples import (
    NAMESPACE,
    SECRET_LABELS,
    SQL_V1,
    SQL_V2,
    T0,
    UID,
    VIEW,
    make_config,
    make_spec,
)

from derived_views.api.status import DerivedViewStatus
from derived_views.core import actions as A
from derived_views.core.observed import (
    LedgerPosition,
    Observed,
    SinkObserved,
    SparkApplicationObserved,
    ViewObserved,
)
from derived_views.core.plan import plan

R1, R2 = "71250ff800", "5d31ce3608"
I1, I2 = f"orders_by_customer__{R1}", f"orders_by_customer__{R2}"
ENDS = {("orders", 0): 120, ("orders", 1): 80}
CONTENT_V1 = {"topics": ["orders"], "format": "json",
              "schema": "order_id STRING, customer_id STRING, amount DOUBLE",
              "sql": SQL_V1, "primaryKey": ["customer_id"]}
CONTENT_V2 = {**CONTENT_V1, "sql": SQL_V2}


def record(revision: str, phase: str, **extra: Any) -> dict[str, Any]:
    return {"revision": revision, "index": f"orders_by_customer__{revision}", "phase": phase,
            "since": "2026-03-01T11:58:00Z", "sparkApplication": f"{VIEW}-{revision}",
            "checkpointLocation": f"s3a://checkpoints/dv/shop/{VIEW}/{revision}",
            "startedAt": "2026-03-01T11:58:00Z", "generation": 1, **extra}


def observed(status: dict[str, Any], *, indexes: set[str], alias: str | None,
             apps: dict[str, str], ledger: dict[str, dict[tuple[str, int], int]],
             annotations: dict[str, str] | None = None, ends: Any = ENDS,
             deletion: dt.datetime | None = None) -> Observed:
    return Observed(
        view=ViewObserved(NAMESPACE, VIEW, UID, 1, annotations or {},
                          ("derivedviews.io/cleanup",), deletion),
        status=DerivedViewStatus.model_validate(status), config=make_config(),
        spark_applications={r: SparkApplicationObserved(f"{VIEW}-{r}", r, state)
                            for r, state in apps.items()},
        sink=SinkObserved(frozenset(indexes), alias,
                          {r: LedgerPosition(p, T0) for r, p in ledger.items()}),
        end_offsets=ends, secret_labels=SECRET_LABELS)


def test_no_promotion_while_the_index_table_is_missing() -> None:
    status = {"revisions": [record(R1, "CaughtUp", content=CONTENT_V1,
                                   caughtUpSince="2026-03-01T11:59:00Z")]}
    actions = plan(make_spec(SQL_V1), observed(status, indexes=set(), alias=None,
                                               apps={R1: "RUNNING"}, ledger={R1: ENDS}), T0)
    assert not any(isinstance(a, A.SwitchAlias) for a in actions)
    update = next(a for a in actions if isinstance(a, A.UpdateStatus))
    rec = update.status.record(R1)
    assert rec is not None and rec.phase.value == "Backfilling" and rec.caught_up_since is None


def test_promotion_when_the_gate_held_long_enough() -> None:
    status = {"revisions": [record(R1, "CaughtUp", content=CONTENT_V1,
                                   caughtUpSince="2026-03-01T11:59:50Z")]}
    actions = plan(make_spec(SQL_V1), observed(status, indexes={I1}, alias=None,
                                               apps={R1: "RUNNING"}, ledger={R1: ENDS}), T0)
    assert A.SwitchAlias("public", "orders_by_customer", I1, None) in actions
    early = plan(make_spec(SQL_V1), observed(status, indexes={I1}, alias=None,
                                             apps={R1: "RUNNING"}, ledger={R1: ENDS}),
                 T0 - dt.timedelta(seconds=1))
    assert not any(isinstance(a, A.SwitchAlias) for a in early)


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
