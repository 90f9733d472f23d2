"""The problems chain as a table: for each rule of PROBLEMS a situation where it is the first
that speaks, with the reason it gives, and every rule has its row (the order of the chain
decides which cause is shown)."""

from __future__ import annotations

from typing import Any

import pytest

from derived_views.core import conditions as cond
from derived_views.core import reasons
from derived_views.core.observed import IndexOwner
from derived_views.core.planner.rules.problems import PROBLEMS
from derived_views.core.planner.rules.standing import first
from support.world.standings import (
    Tweak,
    situation,
    spoke,
)


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
    ("serves_less_history", {"candidate": {"historyStart": {"orders/0": 50}}}, None,
     reasons.HISTORY_INCOMPLETE),
    ("candidate_failed", {"candidate": {"phase": "Failed", "reason": "JobFailed",
                                        "message": "OOMKilled"}}, None, reasons.JOB_FAILED),
    ("checks_failing", {"spec": CHECKS}, _failed_checks, reasons.CHECK_FAILED),
    ("active_job_stopped", {"active": {"reason": "JobFailed", "message": "OOMKilled"}}, None,
     reasons.JOB_FAILED),
    ("active_index_missing", {"sink": {"indexes": frozenset()}}, None, reasons.INDEX_MISSING),
]
ELSEWHERE = {
    "checkpoint_not_durable": "tests/unit/core/planner/phases/test_start.py (a pod-local checkpoint base)",
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
