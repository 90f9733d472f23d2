"""The promotion holds, as a table: each rule of HOLDS in the situation where it speaks, the
first that speaks is the one shown, and none speaks for a candidate that may switch."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from derived_views.api.status import Lag
from derived_views.core import reasons
from derived_views.core.observed import SwitchBlocker
from derived_views.core.planner.rules import promotion
from support.world.samples import T0
from support.world.standings import candidate, migration

R2_INDEX_ROWS = "orders_by_customer__{}"


def _index(ctx: Any) -> str:
    return str(ctx.index(ctx.desired))


CASES: list[tuple[str, dict[str, Any], bool, str | None, str]] = [
    # (what, migration(...) keywords, stable, reason of the hold or None, words it says)
    ("nothing holds a stable candidate", {}, True, None, ""),
    ("nothing holds, nor switches, one that is not stable yet", {"spec": {"cutover": {
        "mode": "manual"}}}, False, None, ""),
    ("a candidate whose job still runs in its replay stage, even a first revision",
     {"first": True, "candidate": {"stage": "replay", "replayExecutors": 4}}, True,
     reasons.REPLAY_STAGE, "restarts in its steady stage"),
    ("a candidate whose job runs in its steady stage", {"candidate": {"stage": "steady"}},
     True, None, ""),
    ("a candidate whose job is not running (yet)", {"apps": {"?": "SUBMITTED"}}, True,
     reasons.JOB_STARTING, "until its job runs again"),
    ("a candidate whose job is gone, even a first revision", {"first": True, "apps": {}}, True,
     reasons.JOB_STARTING, "until its job runs again"),
    ("records wait, and its job's driver started after its last commit",
     {"driver_started": T0 + dt.timedelta(seconds=1), "lag": Lag(messages=5, seconds=2)}, True,
     reasons.JOB_STARTING, "new driver commits a batch"),
    ("records wait, and its job's driver has committed since it started",
     {"driver_started": T0 - dt.timedelta(seconds=1), "lag": Lag(messages=5, seconds=2)}, True,
     None, ""),
    ("records wait, and the last commit came in the second its driver was created (whole "
     "seconds, cut down: the commit may be the earlier driver's)",
     {"driver_started": T0 - dt.timedelta(seconds=0.5), "lag": Lag(messages=5, seconds=2)},
     True, reasons.JOB_STARTING, "new driver commits a batch"),
    ("nothing to read, and its job's driver started after its last commit",
     {"driver_started": T0 + dt.timedelta(seconds=1)}, True, None, ""),
    ("a history starting later than the serving one's",
     {"candidate": {"historyStart": {"orders/0": 50}}}, True, reasons.HISTORY_INCOMPLETE,
     "lacks history readers have"),
    ("a first revision below cutover.minRows",
     {"first": True, "spec": {"cutover": {"minRows": 100}},
      "sink": {"index_rows": {"?": 10}}}, True, reasons.BELOW_MIN_ROWS,
     "holds 10 rows, fewer than cutover.minRows 100"),
    ("a first revision whose rows are not counted yet",
     {"first": True, "spec": {"cutover": {"minRows": 100}}}, True, reasons.BELOW_MIN_ROWS,
     "no counted rows yet"),
    ("a first revision at cutover.minRows", {"first": True, "spec": {"cutover": {
        "minRows": 100}}, "sink": {"index_rows": {"?": 100}}}, True, None, ""),
    ("cutover.minRows is about a first revision only", {"spec": {"cutover": {"minRows": 100}},
     "sink": {"index_rows": {"?": 1}}}, True, None, ""),
    ("checks that have not run", {"spec": {"cutover": {"checks": {"rowCount": {
        "maxDifference": 0}}}}}, True,
     reasons.CHECKING, "cutover checks: pending"),
    ("manual cutover without the annotation", {"spec": {"cutover": {"mode": "manual"}}}, True,
     reasons.AWAITING_PROMOTION, "annotate derivedviews.io/promote="),
    ("the sink refuses the switch", {"sink": {"switch_blockers": {"?": SwitchBlocker(
        reasons.ALIAS_DEPENDENTS, "view reports depends on it")}}}, True,
     reasons.ALIAS_DEPENDENTS, ""),
    ("the sink deferred the last switch", {"observation": {"switch_deferred": ("?", "behind on "
     "orders/0")}}, True, reasons.BEHIND_ACTIVE, "never go back in time: behind on orders/0"),
]


def _with_the_candidates_index(kwargs: dict[str, Any], ctx_index: str, desired: str
                               ) -> dict[str, Any]:
    """The table names the candidate's index and revision `?` (they hash its spec)."""
    out = dict(kwargs)
    if "sink" in out:
        out["sink"] = {k: ({ctx_index if i == "?" else i: v for i, v in val.items()}
                           if isinstance(val, dict) else val) for k, val in out["sink"].items()}
    if "apps" in out:
        out["apps"] = {desired if r == "?" else r: state for r, state in out["apps"].items()}
    if "observation" in out and "switch_deferred" in out["observation"]:
        _, detail = out["observation"]["switch_deferred"]
        out["observation"] = {**out["observation"], "switch_deferred": (desired, detail)}
    return out


@pytest.mark.parametrize(("what", "kwargs", "stable", "reason", "says"), CASES,
                         ids=[c[0] for c in CASES])
def test_the_first_hold_that_speaks(what: str, kwargs: dict[str, Any], stable: bool,
                                    reason: str | None, says: str) -> None:
    ctx, _ = migration(**{k: v for k, v in kwargs.items() if k not in ("sink", "observation")})
    ctx, draft = migration(**_with_the_candidates_index(kwargs, _index(ctx), ctx.desired))
    hold = promotion.first_hold(candidate(ctx, draft, stable=stable))
    assert (hold.reason if hold is not None else None) == reason, what
    if hold is not None:
        assert says in hold.said, (what, hold.said)


def test_every_hold_rule_has_a_row() -> None:
    spoke = set()
    for _what, kwargs, stable, _reason, _ in CASES:
        ctx, _ = migration(**{k: v for k, v in kwargs.items() if k not in ("sink", "observation")})
        ctx, draft = migration(**_with_the_candidates_index(kwargs, _index(ctx), ctx.desired))
        c = candidate(ctx, draft, stable=stable)
        spoke |= {rule.__name__ for rule in promotion.HOLDS if rule(c) is not None}
    assert spoke == {rule.__name__ for rule in promotion.HOLDS}


def test_a_refused_switch_is_announced_once() -> None:
    blocker = SwitchBlocker(reasons.ALIAS_DEPENDENTS, "view reports depends on it")
    ctx, _ = migration()
    ctx, draft = migration(sink={"switch_blockers": {_index(ctx): blocker}})
    hold = promotion.first_hold(candidate(ctx, draft))
    assert hold is not None and hold.blocker == blocker
    assert hold.event is not None and hold.event[0] == reasons.ALIAS_DEPENDENTS
