"""Observations built by hand for the planner's corner cases (test_plan_direct and others):
one revision record, one observed world, written out field by field."""

from __future__ import annotations

import datetime as dt
from typing import Any

from derived_views.api.status import DerivedViewStatus
from derived_views.core.observed import (
    LedgerPosition,
    Observed,
    SinkObserved,
    SparkApplicationObserved,
    ViewObserved,
)
from support.world.samples import (
    I1,
    I2,
    NAMESPACE,
    R1,
    R2,
    SECRET_LABELS,
    SQL_V1,
    SQL_V2,
    T0,
    UID,
    VIEW,
    make_settings,
)

__all__ = ["CONTENT_V1", "CONTENT_V2", "ENDS", "I1", "I2", "R1", "R2", "observed", "record"]

ENDS = {("orders", 0): 120, ("orders", 1): 80}
CONTENT_V1 = {"topics": ["orders"], "format": "json",
              "schema": "order_id STRING, customer_id STRING, amount DOUBLE",
              "sql": SQL_V1, "primaryKey": ["customer_id"]}
CONTENT_V2 = {**CONTENT_V1, "sql": SQL_V2}


def record(revision: str, phase: str = "Pending", **extra: Any) -> dict[str, Any]:
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
        status=DerivedViewStatus.model_validate(status), settings=make_settings(),
        spark_applications={r: SparkApplicationObserved(f"{VIEW}-{r}", r, state)
                            for r, state in apps.items()},
        sink=SinkObserved(frozenset(indexes), alias,
                          {r: LedgerPosition(p, T0) for r, p in ledger.items()}),
        end_offsets=ends, secret_labels=SECRET_LABELS)
