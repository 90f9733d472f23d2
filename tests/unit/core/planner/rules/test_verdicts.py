"""The condition chains RECONCILING_RULES, READY_RULES and CAUGHT_UP_RULES as tables: for
each rule a situation where it is the first that speaks (after the problem and the job
problem), with the status and reason it gives, and every rule has its row."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from derived_views.api.status import Lag
from derived_views.core import reasons
from derived_views.core.planner.draft import PromotionHold
from derived_views.core.planner.rules import verdicts
from derived_views.core.planner.rules.problems import PROBLEMS
from derived_views.core.planner.rules.standing import Standing, first
from support.world.standings import (
    BEHIND,
    Tweak,
    situation,
    spoke,
)

# Reconciling, Ready, CaughtUp: each chain's rules after the problem and the job problem

def chained(s: Standing) -> Standing:
    s = dataclasses.replace(s, problem=first(PROBLEMS, s))
    s = dataclasses.replace(s, job_problem=verdicts.job_problem(s))
    return dataclasses.replace(s, reconciling=first(verdicts.RECONCILING_RULES, s))


def _hold(reason: str, said: str) -> Tweak:
    def tweak(_ctx: Any, draft: Any) -> None:
        draft.promotion_hold = PromotionHold(reason, said)
    return tweak


def _paused(ctx: Any, _draft: Any) -> None:
    object.__setattr__(ctx, "paused", True)


VERDICT_CASES: list[tuple[str, str, dict[str, Any], Tweak | None, bool, tuple[str, str]]] = [
    # (chain, rule, migration kwargs, tweak, deleting, (status, reason))
    ("RECONCILING", "reconciling_deleting", {}, None, True, ("True", reasons.DELETING)),
    ("RECONCILING", "reconciling_paused", {}, _paused, False, ("False", reasons.PAUSED)),
    ("RECONCILING", "building", {}, None, False, ("True", reasons.CAUGHT_UP_REASON)),
    ("RECONCILING", "building", {}, _hold(reasons.AWAITING_PROMOTION, "annotate"), False,
     ("True", reasons.AWAITING_PROMOTION)),
    ("RECONCILING", "not_started", {"spec": {"transform": {"sql": "SELECT nope FROM events"}},
                                    "unstarted": True}, None, False,
     ("False", reasons.INVALID_TRANSFORM)),
    ("RECONCILING", "not_started", {"unstarted": True}, None, False, ("True", reasons.STARTING)),
    ("RECONCILING", "reconciled", {"settled": True}, None, False,
     ("False", reasons.RECONCILED)),
    ("READY", "ready_deleting", {}, None, True, ("False", reasons.DELETING)),
    ("READY", "has_problem", {"observation": {"missing_topics": frozenset({"orders"})}}, None,
     False, ("False", reasons.TOPIC_MISSING)),
    ("READY", "sink_unknown", {"observation": {"sink": None}}, None, False,
     ("Unknown", reasons.SINK_UNREACHABLE)),
    ("READY", "nothing_serves", {"first": True, "lag": BEHIND}, None, False,
     ("False", reasons.CAUGHT_UP_REASON)),
    ("READY", "alias_misdirected", {"sink": {"alias_target": "elsewhere"}}, None, False,
     ("False", reasons.ALIAS_MISDIRECTED)),
    ("READY", "active_stale", {"spec": {"cutover": {"maxLagSeconds": 10}},
                               "active_lag": Lag(messages=9, seconds=60)}, None, False,
     ("False", reasons.STALE)),
    ("READY", "older_revision_serves", {}, None, False, ("False", reasons.CAUGHT_UP_REASON)),
    ("READY", "serving", {"settled": True}, None, False, ("True", reasons.SERVING)),
    ("CAUGHT_UP", "lag_unknown", {"lag": None}, None, False, ("Unknown", reasons.LAG_UNKNOWN)),
    ("CAUGHT_UP", "not_hydrated", {"candidate": {"hydratedAt": None,
                                                 "hydrationTarget": {"orders/0": 500}}},
     None, False, ("False", reasons.HYDRATING)),
    ("CAUGHT_UP", "lag_within_gate", {}, None, False, ("True", reasons.LAG_WITHIN_GATE)),
    ("CAUGHT_UP", "lag_above_gate", {"lag": BEHIND, "spec": {"cutover": {"maxLagSeconds": 0}}},
     None, False, ("False", reasons.LAG_ABOVE_GATE)),
]
ELSEWHERE_VERDICTS = {
    "job_cannot_run_and_nothing_serves": "tests/unit/core/planner/test_plan_job_state.py",
}


@pytest.mark.parametrize(("chain", "rule", "kwargs", "tweak", "deleting", "expected"),
                         VERDICT_CASES, ids=[f"{c[0]}-{c[1]}" for c in VERDICT_CASES])
def test_each_condition_rule_speaks_first_in_its_situation(
        chain: str, rule: str, kwargs: dict[str, Any], tweak: Tweak | None, deleting: bool,
        expected: tuple[str, str]) -> None:
    rules = getattr(verdicts, f"{chain}_RULES")
    s = chained(situation(kwargs, tweak, deleting))
    assert spoke(rules, s) == rule
    verdict = first(rules, s)
    assert verdict is not None and (verdict.status, verdict.reason) == expected


def test_every_condition_rule_has_a_row_here_or_a_named_test_elsewhere() -> None:
    for chain in ("RECONCILING", "READY", "CAUGHT_UP"):
        rows = {c[1] for c in VERDICT_CASES if c[0] == chain} | set(ELSEWHERE_VERDICTS)
        assert {r.__name__ for r in getattr(verdicts, f"{chain}_RULES")} <= rows, chain


def test_a_caught_up_candidate_is_said_in_words() -> None:
    verdict = first(verdicts.RECONCILING_RULES, chained(situation({})))
    assert verdict is not None and " is caught up: lag " in verdict.message, verdict
