"""`dv diff`: which two indexes to compare, and the comparison printed as a table or JSON.

The same comparison as the cutover check `diff` (core.cutover.diff), asked for on demand: a
person deciding whether to promote a candidate in manual mode wants to see what it changes
before the annotation, and wants it whether or not the spec configures the check.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from derived_views.api.spec import CutoverChecks, DerivedViewSpec, DiffCheck
from derived_views.api.status import CheckOutcome, DerivedViewStatus, Phase
from derived_views.core.check_runs import CheckRequest
from derived_views.core.cutover.checks import checks_hash
from derived_views.core.cutover.diff import DiffFound, Mode, judge_diff

GONE = frozenset({Phase.Retired, Phase.Failed, Phase.Superseded})
"""Phases whose index may be dropped already: nothing to compare."""
UNJUDGED = DiffCheck(max_changed_rows="100%")
"""What is measured when the spec configures no diff: the comparison, without a verdict."""


class DiffError(Exception):
    """The view has no such pair of indexes to compare; the message says what it has."""


@dataclass(frozen=True)
class Compared:
    """Which indexes were compared, and the spec's thresholds if it configures the check."""

    view: str
    request: CheckRequest
    revision: str
    against: str
    judged: DiffCheck | None


def diff_request(view: str, spec: DerivedViewSpec, status: DerivedViewStatus,
                 revision: str | None, against: str | None) -> Compared:
    """The revision (default: the candidate) against another (default: the active)."""
    chosen = revision or (status.candidate.revision if status.candidate else None)
    other = against or (status.active.revision if status.active else None)
    if chosen is None:
        raise DiffError(f"{view} has no candidate: name a revision with --revision")
    if other is None:
        raise DiffError(f"{view} has no active revision: name one with --against")
    if chosen == other:
        raise DiffError(f"revision {chosen} against itself: name another with --against")
    records = []
    for name in (chosen, other):
        record = status.record(name)
        if record is None:
            known = ", ".join(r.revision for r in status.revisions) or "none"
            raise DiffError(f"{view} has no revision {name} (its revisions: {known})")
        if record.phase in GONE:
            raise DiffError(f"revision {name} of {view} is {record.phase.value}: its index may "
                            "be dropped")
        records.append(record)
    keys = [tuple(r.content.primary_key) if r.content else None for r in records]
    if keys[0] != keys[1] or keys[0] is None:
        raise DiffError(f"revisions {chosen} and {other} of {view} do not have the same primary "
                        "key: their rows cannot be matched")
    configured = spec.cutover.checks.diff if spec.cutover.checks else None
    timeout = spec.cutover.checks.timeout_seconds if spec.cutover.checks else 60
    checks = CutoverChecks(diff=configured or UNJUDGED, timeout_seconds=timeout)
    request = CheckRequest(
        revision=chosen, schema=spec.sink.db_schema, index=records[0].index,
        active_index=records[1].index, primary_key=keys[0], same_key=True, checks=checks,
        checks_hash=checks_hash(checks), active_revision=other)
    return Compared(view, request, chosen, other, configured)


def _verdict(compared: Compared, found: DiffFound) -> tuple[CheckOutcome, str] | None:
    if compared.judged is None:
        return None
    outcome, _, expected = judge_diff(compared.judged, found)
    return outcome, expected


def diff_json(compared: Compared, found: DiffFound, seconds: float) -> str:
    verdict = _verdict(compared, found)
    body: dict[str, Any] = {
        "view": compared.view,
        "revision": {"revision": compared.revision, "index": compared.request.index},
        "against": {"revision": compared.against, "index": compared.request.active_index},
        "mode": found.mode.value,
        "rows": {"revision": found.candidate_rows, "against": found.active_rows},
        "different": found.different,
        "onlyInRevision": {"rows": found.only_candidate,
                           "examples": list(found.only_candidate_examples)},
        "onlyInAgainst": {"rows": found.only_active, "examples": list(found.only_active_examples)},
        "changed": {"rows": found.changed, "examples": list(found.changed_examples)},
        "columns": [{"column": c.column, "rows": c.rows, "examples": list(c.examples)}
                    for c in found.columns],
        "notCompared": list(found.not_compared),
        "inFlight": found.in_flight,
        "settled": found.settled,
        "complete": found.complete,
        "seconds": round(seconds, 3),
        "verdict": None if verdict is None else {"outcome": verdict[0].value,
                                                 "expected": verdict[1]},
    }
    if found.mode is Mode.HASHED:
        body["ranges"] = {"hashed": found.ranges, "differing": found.differing_ranges}
    return json.dumps(body, indent=2) + "\n"


def _keys(examples: tuple[str, ...]) -> str:
    return ", ".join(examples) or "-"


def diff_table(compared: Compared, found: DiffFound, seconds: float) -> str:
    how = {Mode.FULL: "row by row",
           Mode.HASHED: f"hashed key ranges ({found.differing_ranges} of {found.ranges} "
                        "compared row by row)",
           Mode.STREAMED: "both indexes streamed in key order"}[found.mode]
    lines = [f"{compared.view}: revision {compared.revision} ({found.candidate_rows} rows) "
             f"against {compared.against} ({found.active_rows} rows), {how}, "
             f"{seconds:.2f}s"]
    if not found.complete:
        lines.append(f"incomplete: the timeout stopped it after {found.compared} rows; the "
                     "counts are of the rows compared")
    table = [("", "ROWS", "EXAMPLE KEYS"),
             ("only in the revision", str(found.only_candidate),
              _keys(found.only_candidate_examples)),
             ("only in --against", str(found.only_active), _keys(found.only_active_examples)),
             ("changed", str(found.changed), _keys(found.changed_examples)),
             *((f"  {c.column}", str(c.rows), _keys(c.examples)) for c in found.columns)]
    width = [max(len(row[i]) for row in table) for i in range(2)]
    lines.append("")
    lines += [f"{row[0]:<{width[0]}}  {row[1]:>{width[1]}}  {row[2]}".rstrip() for row in table]
    if found.not_compared:
        lines.append(f"not compared (in one index only): {', '.join(found.not_compared)}")
    if found.in_flight:
        lines.append(f"left out: {found.in_flight} keys written past the log position both "
                     "indexes have reached (they may differ by the lag alone)")
    if found.settled:
        lines.append(f"settled: {found.settled} keys differed only while one job was behind "
                     "the other (they agreed when read again)")
    lines.append("")
    verdict = _verdict(compared, found)
    if verdict is None:
        lines.append(f"{found.different} rows differ; no thresholds (spec.cutover.checks.diff "
                     "is not set)")
    else:
        word = {CheckOutcome.Passed: "passes", CheckOutcome.Failed: "blocks the cutover",
                CheckOutcome.Error: "cannot decide"}.get(verdict[0], verdict[0].value)
        lines.append(f"{found.different} rows differ: the diff check {word} "
                     f"(expected {verdict[1]})")
    return "\n".join(lines) + "\n"
