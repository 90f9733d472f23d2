"""Table rows for `dv status`: plain strings computed from a view object, no I/O.

Kept apart from the rich rendering so the words and numbers people read can be
tested with hand-written expectations.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from derived_views.api.constants import PROMOTE_ANNOTATION, is_paused
from derived_views.api.status import DerivedViewStatus, Lag, shown_lag
from derived_views.core.times import parse_timestamp

NONE = "-"


def parse_status(view: dict[str, Any]) -> DerivedViewStatus:
    """The view's status (empty before the operator's first pass)."""
    return DerivedViewStatus.model_validate(view.get("status") or {})


def age(since: dt.datetime | None, now: dt.datetime) -> str:
    """Compact age like kubectl's: 45s, 12m, 5h, 3d (a clock skew shows as 0s)."""
    if since is None:
        return NONE
    seconds = max(0, int((now - since).total_seconds()))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 120 * 60:
        return f"{seconds // 60}m"
    if seconds < 48 * 3600:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


def duration(seconds: float | None) -> str:
    """Seconds as 0s, 59s, 2m05s, 1h02m; `-` when unknown."""
    if seconds is None:
        return NONE
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def lag_messages(lag: Lag | None) -> str:
    return NONE if lag is None else str(lag.messages)


def lag_time(lag: Lag | None) -> str:
    return NONE if lag is None else duration(lag.seconds)


@dataclass(frozen=True)
class ViewRow:
    """One line of `dv status`."""

    namespace: str
    name: str
    phase: str
    active: str
    candidate: str
    lag_messages: str
    lag_time: str
    ready: str
    age: str
    bad_records: str = NONE
    checks: str = NONE


def bad_records(count: int | None) -> str:
    """Records left out under the bad-record policy; NONE before a first batch."""
    return NONE if count is None else str(count)


def view_row(view: dict[str, Any], now: dt.datetime) -> ViewRow:
    """The lag shown is the candidate's while one is built, else the active's."""
    meta = view.get("metadata") or {}
    status = parse_status(view)
    lag = shown_lag(status.active, status.candidate)
    ready = status.condition("Ready")
    return ViewRow(
        namespace=str(meta.get("namespace", "")), name=str(meta.get("name", "")),
        phase=status.phase.value if status.phase else NONE,
        active=status.active.revision if status.active else NONE,
        candidate=status.candidate.revision if status.candidate else NONE,
        lag_messages=lag_messages(lag), lag_time=lag_time(lag),
        ready=ready.status if ready else NONE,
        age=age(parse_timestamp(meta.get("creationTimestamp")), now),
        bad_records=bad_records(status.bad_records), checks=status.checks or NONE)


@dataclass(frozen=True)
class RevisionRow:
    revision: str
    role: str
    phase: str
    lag_messages: str
    lag_time: str
    in_phase_for: str
    content: str
    note: str
    bad_records: str = NONE


def revision_rows(status: DerivedViewStatus, now: dt.datetime) -> list[RevisionRow]:
    """Every tracked revision, newest phase change first, marked active/candidate."""
    active = status.active.revision if status.active else None
    candidate = status.candidate.revision if status.candidate else None
    rows = []
    for record in sorted(status.revisions, key=lambda r: r.since, reverse=True):
        role = "active" if record.revision == active else \
            "candidate" if record.revision == candidate else ""
        note = ": ".join(p for p in (record.reason, record.message) if p)
        rows.append(RevisionRow(
            revision=record.revision, role=role, phase=record.phase.value,
            lag_messages=lag_messages(record.lag), lag_time=lag_time(record.lag),
            in_phase_for=age(record.since, now),
            content="kept" if record.content is not None else NONE, note=note,
            bad_records=bad_records(record.bad_records)))
    return rows


@dataclass(frozen=True)
class ConditionRow:
    type: str
    status: str
    reason: str
    message: str
    age: str


def condition_rows(status: DerivedViewStatus, now: dt.datetime) -> list[ConditionRow]:
    return [ConditionRow(type=c.type, status=c.status, reason=c.reason, message=c.message,
                         age=age(c.last_transition_time, now)) for c in status.conditions]


def cutover_line(status: DerivedViewStatus, now: dt.datetime) -> str:
    """One sentence about the last alias switch."""
    cut = status.last_cutover
    if cut is None:
        return "no cutover yet"
    source = cut.from_revision or "(nothing)"
    line = f"{source} -> {cut.to_revision} at {cut.switched_at.isoformat()} " \
           f"({age(cut.switched_at, now)} ago)"
    if cut.gate_held_at is not None:
        waited = (cut.switched_at - cut.gate_held_at).total_seconds()
        line += f", {duration(waited)} after the gate held"
    else:
        line += ", no gate (rollback)"
    return line


def header_lines(view: dict[str, Any], status: DerivedViewStatus) -> list[tuple[str, str]]:
    """Key facts above the detail tables."""
    meta = view.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    mode = ((view.get("spec") or {}).get("cutover") or {}).get("mode", "auto")
    generation = meta.get("generation")
    observed = status.observed_generation
    lines = [
        ("View", f"{meta.get('namespace', '')}/{meta.get('name', '')}"),
        ("Phase", status.phase.value if status.phase else NONE),
        ("Spec revision", status.revision or NONE),
        ("Active", f"{status.active.revision} ({status.active.index})"
         if status.active else NONE),
        ("Candidate", f"{status.candidate.revision} ({status.candidate.phase.value})"
         if status.candidate else NONE),
        ("Cutover mode", str(mode)),
        ("Bad records", _bad_records_line(view, status)),
        ("Generation", f"{generation} (observed {observed if observed is not None else NONE})"),
    ]
    after = [name for name, _ in lines].index("Bad records") + 1
    lines[after:after] = history_lines(view, status)
    if status.checks is not None:
        lines.insert(-1, ("Checks", _checks_line(status)))
    if is_paused(annotations):
        lines.append(("Paused", "yes"))
    if annotations.get(PROMOTE_ANNOTATION):
        lines.append(("Promote", str(annotations[PROMOTE_ANNOTATION])))
    return lines


def check_lines(status: DerivedViewStatus) -> list[tuple[str, str, str, str, str]]:
    """(check, outcome, observed, expected, seconds) of the candidate's latest check run."""
    run = status.candidate.checks if status.candidate is not None else None
    if run is None:
        return []
    return [(r.name, r.outcome.value, r.observed or NONE, r.expected or NONE,
             NONE if r.seconds is None else f"{r.seconds:.3f}s") for r in run.results]


def _checks_line(status: DerivedViewStatus) -> str:
    """The candidate's checks in a few words, with when they last ran."""
    run = status.candidate.checks if status.candidate is not None else None
    return (status.checks or NONE) + (f" (run at {run.checked_at.isoformat()})" if run else "")


def _bad_records_line(view: dict[str, Any], status: DerivedViewStatus) -> str:
    """The policy, and how many records the shown revision left out under it."""
    policy = (((view.get("spec") or {}).get("source") or {}).get("badRecords") or {})
    name = str(policy.get("policy", "fail"))
    if policy.get("deadLetterTopic"):
        name += f" to {policy['deadLetterTopic']}"
    count = status.bad_records
    return f"{name}; {'none counted yet' if count is None else f'{count} left out'}"


def history_lines(view: dict[str, Any], status: DerivedViewStatus) -> list[tuple[str, str]]:
    """What history the served and the building index hold (docs/history.md): the policy,
    where each one's history starts, whether the candidate is hydrated, compacted topics."""
    policy = str(((view.get("spec") or {}).get("source") or {}).get("history", "complete"))
    lines = [("History", policy)]
    for role, revision in (("active", status.active.revision if status.active else None),
                           ("candidate", status.candidate.revision if status.candidate
                            else None)):
        record = status.record(revision) if revision else None
        if record is None:
            continue
        said = history_of(record.history_start, record.history_gaps)
        if role == "candidate" and record.hydrated_at is None:
            said += "; hydrating (not every record of its start is in its index yet)"
        lines.append((f"History ({role})", said))
    for log in status.source_logs:
        if "compact" in log.cleanup_policy:
            lines.append((f"Topic {log.topic}",
                          f"cleanup.policy={log.cleanup_policy}: a replay reads the latest "
                          "record per key (what a mirror of current state needs, not what a "
                          "count of events needs)"))
    return lines


def history_of(start: dict[str, int] | None, gaps: dict[str, int] | None) -> str:
    """`orders/0 from offset 1000 (1000 records deleted by retention), ...`."""
    if start is None and not gaps:
        return "not recorded yet (before its first batch)"
    said = [f"{p} from offset {o} ({o} records deleted by retention)"
            for p, o in sorted((start or {}).items()) if o > 0]
    said += [f"{p}: {n} records deleted before its replay read them"
             for p, n in sorted((gaps or {}).items())]
    return "; ".join(said) if said else "from offset 0 of every partition"
