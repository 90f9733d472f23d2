"""Standings built by hand, for the table tests of the planner's rule chains (as
cert-manager tests its policy chains): a view in one situation, the pass's context and draft
over it, and the facts the rules read.

`migration()` is the common case: revision R1 serves, R2 (the spec's) is caught up beside it.
Each keyword changes one thing of it; `first_view()` has no served revision yet.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Sequence
from typing import Any

from derived_views.api.spec import DerivedViewSpec
from derived_views.api.status import Lag, RevisionStatus
from derived_views.core.observed import LedgerPosition, Observed, SinkObserved
from derived_views.core.planner import context
from derived_views.core.planner.draft import Draft
from derived_views.core.planner.rules.promotion import Candidate
from derived_views.core.planner.rules.standing import Rule, Standing, stand
from derived_views.core.revision import revision_of
from support.world.hand_observed import CONTENT_V1, CONTENT_V2, ENDS, observed, record
from support.world.samples import T0, spec_body

NOW = T0 + dt.timedelta(minutes=5)
CAUGHT_UP = Lag(messages=0, seconds=0)


def _spec(sql_version: int, **overrides: Any) -> DerivedViewSpec:
    from support.world.samples import SQL_V1, SQL_V2

    return DerivedViewSpec.model_validate(spec_body(SQL_V1 if sql_version == 1 else SQL_V2,
                                                    **overrides))


def migration(*, spec: dict[str, Any] | None = None, candidate: dict[str, Any] | None = None,
              active: dict[str, Any] | None = None, sink: dict[str, Any] | None = None,
              observation: dict[str, Any] | None = None, apps: dict[str, str] | None = None,
              annotations: dict[str, str] | None = None, lag: Lag | None = CAUGHT_UP,
              active_lag: Lag | None = CAUGHT_UP, first: bool = False, settled: bool = False,
              unstarted: bool = False, driver_started: dt.datetime | None = None
              ) -> tuple[Any, Draft]:
    """(context, draft) of the view mid-migration, or, `first`, before its first revision
    serves, or, `settled`, served by the spec's revision alone; `unstarted`: the spec's
    revision has no record yet. `candidate`/`active` change their status records (camelCase
    keys), `sink` and `observation` the observed sink and observation fields, `apps` the
    jobs' states, `driver_started` when the spec's revision's job was created (its ledger's
    batch was committed at T0)."""
    the_spec = _spec(2, **(spec or {}))
    r2 = revision_of(the_spec)
    r1 = revision_of(_spec(1))
    caught_up_at = (NOW - dt.timedelta(minutes=1)).isoformat()
    wanted = {"phase": "CaughtUp", "content": CONTENT_V2, "caughtUpSince": caught_up_at,
              "hydratedAt": caught_up_at, **(candidate or {})}
    if settled:
        wanted = {**wanted, "phase": "Active", "caughtUpSince": None}
    records = [] if unstarted else [record(r2, **{k: v for k, v in wanted.items()
                                                  if v is not None})]
    if not first and not settled:
        records.insert(0, record(r1, **{"phase": "Active", "content": CONTENT_V1,
                                        **(active or {})}))
    status = {"revision": r2, "revisions": records}
    served = f"orders_by_customer__{r2}" if settled else f"orders_by_customer__{r1}"
    indexes = {f"orders_by_customer__{r2}"} | (set() if first else {served})
    seen = observed(status, indexes=indexes, alias=None if first else served,
                    apps=apps if apps is not None else
                    ({r2: "RUNNING"} if first or settled else {r1: "RUNNING", r2: "RUNNING"}),
                    ledger={r: dict(ENDS) for r in ([r2] if first or settled else [r1, r2])},
                    annotations=annotations)
    seen_sink = seen.sink
    assert seen_sink is not None
    seen = dataclasses.replace(seen, sink=dataclasses.replace(seen_sink, **(sink or {})),
                               log_starts=dict.fromkeys(ENDS, 0))
    seen = dataclasses.replace(seen, **(observation or {}))
    if driver_started is not None:
        apps = dict(seen.spark_applications)
        apps[r2] = dataclasses.replace(apps[r2], created_at=driver_started)
        seen = dataclasses.replace(seen, spark_applications=apps)
    ctx = context.build(the_spec, seen, NOW)
    draft = Draft.start(ctx)
    draft.lags[r2] = lag
    if not first and not settled:
        draft.lags[r1] = active_lag
    return ctx, draft


def standing(ctx: Any, draft: Draft, *, deleting: bool = False) -> Standing:
    return stand(ctx, draft, deleting)


def candidate(ctx: Any, draft: Draft, *, stable: bool = True) -> Candidate:
    revision = ctx.desired
    the_record: RevisionStatus = draft.records[revision]
    return Candidate(ctx, draft, revision, the_record, stable)


def ledger(ends: dict[tuple[str, int], int]) -> LedgerPosition:
    return LedgerPosition(ends, T0)


__all__ = ["CAUGHT_UP", "NOW", "Observed", "SinkObserved", "candidate", "ledger", "migration",
           "standing"]


BEHIND = Lag(messages=500, seconds=120)
"""A candidate well behind the gate."""
Tweak = Callable[[Any, Any], None]
"""A change to the (context, draft) of a situation before its standing is taken."""


def with_observation(ctx: Any, **observation: Any) -> Any:
    return dataclasses.replace(ctx, obs=dataclasses.replace(ctx.obs, **observation))


def situation(kwargs: dict[str, Any], tweak: Tweak | None = None,
              deleting: bool = False) -> Standing:
    ctx, draft = migration(**kwargs)
    if tweak is not None:
        tweak(ctx, draft)
    return standing(ctx, draft, deleting=deleting)


def spoke(rules: Sequence[Rule], s: Standing) -> str | None:
    """The name of the first rule of the chain that speaks."""
    return next((rule.__name__ for rule in rules if rule(s) is not None), None)
