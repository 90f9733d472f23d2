"""The condition chains as tables: for each rule of PROBLEMS, RECONCILING, READY and
CAUGHT_UP a situation where it is the first that speaks, with the reason it gives; and every
rule of each chain has its row (the order of a chain decides which cause is shown)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from derived_views.api.status import Lag
from derived_views.core import conditions as cond
from derived_views.core import reasons
from derived_views.core.observed import IndexOwner
from derived_views.core.planner.draft import PromotionHold
from derived_views.core.planner.rules import verdicts
from derived_views.core.planner.rules.problems import PROBLEMS
from derived_views.core.planner.rules.standing import Rule, Standing, first
from support.world.standings import migration, standing

BEHIND = Lag(messages=500, seconds=120)
Tweak = Callable[[Any, Any], None]


def _with(ctx: Any, **observation: Any) -> Any:
    return dataclasses.replace(ctx, obs=dataclasses.replace(ctx.obs, **observation))


def situation(kwargs: dict[str, Any], tweak: Tweak | None = None,
              deleting: bool = False) -> Standing:
    ctx, draft = migration(**kwargs)
    if tweak is not None:
        tweak(ctx, draft)
    return standing(ctx, draft, deleting=deleting)


def spoke(rules: Sequence[Rule], s: Standing) -> str | None:
    return next((rule.__name__ for rule in rules if rule(s) is not None), None)


def _deletion_blocked(_ctx: Any, draft: Any) -> None:
    draft.deletion_problem = cond.Verdict("True", reasons.DELETION_BLOCKED, "a view depends")


def _failed_checks(_ctx: Any, draft: Any) -> None:
    from derived_views.api.status import CheckOutcome, CheckResult, CheckRun

    revision = _ctx.desired
    record = draft.records[revision]
    run = CheckRun(checks_hash=_checks_hash(_ctx), checked_at=record.caught_up_since,
                   results=[CheckResult(name="rowCount", outcome=CheckOutcome.Failed,
                                        observed="1 row", expected="2")])
    draft.set(revision, checks=run)


def _checks_hash(ctx: Any) -> str:
    from derived_views.core.cutover.checks import checks_hash, checks_of

    checks = checks_of(ctx.spec)
    assert checks is not None
    return checks_hash(checks)


CHECKS = {"cutover": {"checks": {"rowCount": {"maxDifference": 0}}}}

PROBLEM_CASES: list[tuple[str, dict[str, Any], Tweak | None, str]] = [
    ("deletion_blocked", {}, _deletion_blocked, reasons.DELETION_BLOCKED),
    ("checkpoint_not_durable", {"spec": {"spark": {"checkpointBase": "/local/ck"}}},
     lambda ctx, _d: None, ""),  # judged below with in_cluster
    ("job_namespace_unusable", {"observation": {"job_namespace_problem": (
        reasons.JOB_NAMESPACE_MISSING, "no such namespace")}}, None, reasons.JOB_NAMESPACE_MISSING),
    ("refused_by_policy", {"spec": {"spark": {"image": "attacker/spark:latest"}}}, None,
     reasons.POLICY_VIOLATION),
    ("spec_refused", {"spec": {"transform": {"sql": "SELECT nope FROM events"}}}, None,
     reasons.INVALID_TRANSFORM),
    ("check_refused", {"spec": {"cutover": {"checks": {"assertions": [{
        "name": "a", "sql": "SELECT pg_sleep(1) FROM {index}"}]}}}}, None,
     reasons.POLICY_VIOLATION),
    ("sink_table_claimed", {"sink": {"alias_owner": IndexOwner("billing", "x", "u-2")}}, None,
     reasons.SINK_TABLE_CLAIMED),
    ("sink_unreadable", {"observation": {"sink": None, "sink_problem": (
        reasons.SINK_UNREACHABLE, "connection refused")}}, None, reasons.SINK_UNREACHABLE),
    ("source_unreadable", {"observation": {"end_offsets": None, "source_problem": (
        reasons.KAFKA_UNAVAILABLE, "no broker")}}, None, reasons.KAFKA_UNAVAILABLE),
    ("topic_missing", {"observation": {"missing_topics": frozenset({"orders"})}}, None,
     reasons.TOPIC_MISSING),
    ("topic_reset", {"observation": {"end_offsets": {("orders", 0): 1, ("orders", 1): 80}}},
     None, reasons.TOPIC_RESET),
    ("history_incomplete", {"candidate": {"historyStart": {"orders/0": 50}}}, None,
     reasons.HISTORY_INCOMPLETE),
    ("candidate_failed", {"candidate": {"phase": "Failed", "reason": "JobFailed",
                                        "message": "OOMKilled"}}, None, reasons.JOB_FAILED),
    ("checks_failing", {"spec": CHECKS}, _failed_checks, reasons.CHECK_FAILED),
    ("active_job_stopped", {"active": {"reason": "JobFailed", "message": "OOMKilled"}}, None,
     reasons.JOB_FAILED),
    ("active_index_missing", {"sink": {"indexes": frozenset()}}, None, reasons.INDEX_MISSING),
]
ELSEWHERE = {
    "checkpoint_not_durable": "tests/unit/core/planner/test_plan_scenarios.py (in_cluster)",
    "reader_schema_unknown": "tests/unit/core/planner/test_plan_schema_registry.py",
    "registry_unreadable": "tests/unit/core/planner/test_plan_schema_registry.py",
    "index_owned_by_another_view": "tests/unit/core/test_ownership.py",
    "active_index_lost": "tests/unit/core/planner/test_plan_integrity.py",
    "partitions_grew": "tests/unit/core/planner/test_plan_integrity.py",
}
"""Rules whose situation needs a world of its own (Avro, a lost table, partition growth);
the named file holds them to their rule."""


@pytest.mark.parametrize(("rule", "kwargs", "tweak", "reason"),
                         [c for c in PROBLEM_CASES if c[0] not in ELSEWHERE],
                         ids=[c[0] for c in PROBLEM_CASES if c[0] not in ELSEWHERE])
def test_each_problem_rule_speaks_first_in_its_situation(
        rule: str, kwargs: dict[str, Any], tweak: Tweak | None, reason: str) -> None:
    s = situation(kwargs, tweak)
    assert spoke(PROBLEMS, s) == rule
    verdict = first(PROBLEMS, s)
    assert verdict is not None and verdict.status == "True" and verdict.reason == reason


def test_a_calm_migration_has_no_problem() -> None:
    assert first(PROBLEMS, situation({})) is None


def test_every_problem_rule_has_a_row_here_or_a_named_test_elsewhere() -> None:
    named = {c[0] for c in PROBLEM_CASES} | set(ELSEWHERE)
    assert {rule.__name__ for rule in PROBLEMS} == named


def test_the_first_of_two_causes_is_shown() -> None:
    """A missing topic and a failed candidate: the chain's order says which one is shown."""
    s = situation({"observation": {"missing_topics": frozenset({"orders"})},
                   "candidate": {"phase": "Failed", "reason": "JobFailed", "message": "x"}})
    verdict = first(PROBLEMS, s)
    assert verdict is not None and verdict.reason == reasons.TOPIC_MISSING


# Reconciling, Ready, CaughtUp: each chain's rules after the problem and the job problem

def chained(s: Standing) -> Standing:
    s = dataclasses.replace(s, problem=first(PROBLEMS, s))
    s = dataclasses.replace(s, job_problem=verdicts.job_problem(s))
    return dataclasses.replace(s, reconciling=first(verdicts.RECONCILING, s))


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
    ("RECONCILING", "building", {}, None, False, ("True", reasons.CAUGHT_UP)),
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
     ("False", reasons.CAUGHT_UP)),
    ("READY", "alias_misdirected", {"sink": {"alias_target": "elsewhere"}}, None, False,
     ("False", reasons.ALIAS_MISDIRECTED)),
    ("READY", "active_stale", {"spec": {"cutover": {"maxLagSeconds": 10}},
                               "active_lag": Lag(messages=9, seconds=60)}, None, False,
     ("False", reasons.STALE)),
    ("READY", "older_revision_serves", {}, None, False, ("False", reasons.CAUGHT_UP)),
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
    rules = getattr(verdicts, chain)
    s = chained(situation(kwargs, tweak, deleting))
    assert spoke(rules, s) == rule
    verdict = first(rules, s)
    assert verdict is not None and (verdict.status, verdict.reason) == expected


def test_every_condition_rule_has_a_row_here_or_a_named_test_elsewhere() -> None:
    for chain in ("RECONCILING", "READY", "CAUGHT_UP"):
        rows = {c[1] for c in VERDICT_CASES if c[0] == chain} | set(ELSEWHERE_VERDICTS)
        assert {r.__name__ for r in getattr(verdicts, chain)} <= rows, chain
