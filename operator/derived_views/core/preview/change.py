"""What an apply changes for a view: nothing, settings in place, checks, a rollback, a replay.

Decided as the operator decides it. The revision is `revision_of`: a manifest whose content
hashes to the live spec's revision builds nothing, and what else it changes is applied in
place (a changed `job_settings_of` restarts the running jobs from their checkpoints, as
core.planner.phases.candidate.apply_job_settings does). Another revision is started as
core.planner.phases.start.start_desired starts it: the active one supersedes the candidate,
a Retiring one is switched back to or resumed (a rollback, no replay), any other replays.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from derived_views.api.spec import DerivedViewSpec
from derived_views.api.status import DerivedViewStatus, Phase, RevisionContent, SubjectVersion
from derived_views.core import naming
from derived_views.core.judges.source_schema import pinned_reader
from derived_views.core.patch import changed_leaves, spec_diff
from derived_views.core.planner.context import recorded_active
from derived_views.core.planner.records import BUILDING, is_torn_down
from derived_views.core.revision import (
    content_of,
    job_settings_of,
    reader_schemas_of,
    revision_of,
    spec_fields,
)
from derived_views.core.settings import Settings

CHECKS_FIELD = "spec.cutover.checks"
"""Where a view's cutover checks are: a change under it alone only re-judges the candidate."""


class ChangeKind(StrEnum):
    """What an apply does to a view, from cheapest to dearest."""

    NONE = "none"
    SETTINGS = "settings"
    """Fields that are not content: applied in place, no replay."""
    CHECKS = "checks"
    """Only spec.cutover.checks: the candidate is judged by the new checks, no replay."""
    ROLLBACK = "rollback"
    """Back to a revision the status retains: no replay."""
    REPLAY = "replay"
    """A revision to build from the log's start (a new view's first one included)."""


@dataclass(frozen=True)
class LiveView:
    """The view as the cluster holds it: its spec (None when it does not read: an operator of
    another version) and its status."""

    spec: DerivedViewSpec | None
    status: DerivedViewStatus


@dataclass(frozen=True)
class Change:
    kind: ChangeKind
    revision: str
    """The manifest's revision: the id the operator gives it (core.revision.revision_of)."""
    active: str | None
    """The revision readers are served from now, if any."""
    content_diff: tuple[str, ...]
    """A new revision's content fields against the active's (`- path: old`, `+ path: new`)."""
    fields: tuple[str, ...]
    """Spec fields the apply changes in place (paths), against the live spec."""
    restarts_jobs: bool
    """The job settings change: running jobs restart from their checkpoints (no replay)."""
    what: str
    """What the operator then does, in a sentence."""


def kept_reader_schemas(status: DerivedViewStatus) -> dict[SubjectVersion, str]:
    """Pinned reader schemas the status's revisions keep (the registry is not read)."""
    known: dict[SubjectVersion, str] = {}
    for record in status.revisions:
        if record.content is not None:
            known.update(reader_schemas_of(record.content))
    return known


def content_fields(spec: DerivedViewSpec, known: Mapping[SubjectVersion, str]) -> dict[str, Any]:
    """The spec's content as spec fields (core.revision.spec_fields). A pinned reader schema
    shows as its subject and version, so its text need not be known to show it."""
    pin = pinned_reader(spec.source)
    if pin is not None and pin not in known:
        known = {**known, pin: ""}  # spec_fields names a pinned schema, never its text
    return spec_fields(content_of(spec, known))


def content_diff(spec: DerivedViewSpec, active: RevisionContent | None,
                 known: Mapping[SubjectVersion, str]) -> tuple[str, ...]:
    """The spec's content against the active revision's (everything added for a new view)."""
    before = spec_fields(active) if active is not None else {}
    return tuple(spec_diff(before, content_fields(spec, known)))


def _document(spec: DerivedViewSpec) -> dict[str, Any]:
    dumped: dict[str, Any] = spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped


def job_settings_change(before: DerivedViewSpec, after: DerivedViewSpec,
                        settings: Settings) -> bool:
    """Whether the running jobs restart: their job settings hash differs."""
    trigger = settings.spark.trigger_of
    return (job_settings_of(before, trigger(before.cutover))
            != job_settings_of(after, trigger(after.cutover)))


def change_of(spec: DerivedViewSpec, live: LiveView | None, settings: Settings,
              now: dt.datetime) -> Change:
    """What applying `spec` over `live` (None: a new view) does."""
    revision = revision_of(spec)
    index = naming.index_table(spec.sink.alias, revision)
    if live is None:
        return Change(ChangeKind.REPLAY, revision, None, content_diff(spec, None, {}), (), False,
                      f"a new view: revision {revision} replays from the log's start into "
                      f"{index}")
    status = live.status
    active = recorded_active(status, None)
    before = live.spec
    live_revision = revision_of(before) if before is not None else status.revision
    restarts = before is not None and job_settings_change(before, spec, settings)
    if revision == live_revision:
        return _in_place(spec, live, revision, active, restarts)
    known = kept_reader_schemas(status)
    record = status.record(active) if active is not None else None
    diff = content_diff(spec, record.content if record is not None else None, known)
    fields: tuple[str, ...] = ()
    if before is not None:
        content = set(_paths(content_fields(before, known))) | set(_paths(content_fields(spec,
                                                                                         known)))
        fields = tuple(f for f in changed_fields(_document(before), _document(spec))
                       if not any(c == f or c.startswith(f + ".") for c in content))
    kind, what = _started(status, revision, active, live_revision, index, now)
    return Change(kind, revision, active, diff, fields, restarts, what)


def _paths(document: Mapping[str, Any]) -> list[str]:
    return [c.path for c in changed_leaves({}, document)]


def changed_fields(before: Any, after: Any, prefix: str = "spec") -> list[str]:
    """The paths an apply changes, a block added or removed as one path: a manifest that adds
    `cutover.checks.diff` changes that block, not each default the model fills into it."""
    if not (isinstance(before, Mapping) and isinstance(after, Mapping)):
        return [] if before == after else [prefix]
    out: list[str] = []
    for key in sorted(set(before) | set(after)):
        path = f"{prefix}.{key}"
        if key in before and key in after:
            out += changed_fields(before[key], after[key], path)
        else:
            out.append(path)
    return out


def _in_place(spec: DerivedViewSpec, live: LiveView, revision: str, active: str | None,
              restarts: bool) -> Change:
    if live.spec is None:
        return Change(ChangeKind.NONE, revision, active, (), (), False,
                      "the same revision; the live spec does not read, so its other fields "
                      "were not compared")
    fields = tuple(changed_fields(_document(live.spec), _document(spec)))
    if not fields:
        return Change(ChangeKind.NONE, revision, active, (), (), False, "nothing changes")
    if all(f == CHECKS_FIELD or f.startswith(CHECKS_FIELD + ".") for f in fields):
        building = live.status.candidate is not None
        return Change(ChangeKind.CHECKS, revision, active, (), fields, restarts,
                      ("the candidate is judged by the changed checks (a new run); no replay"
                       if building else "the next candidate is judged by the changed checks; "
                                        "no replay"))
    what = "applied in place; no replay"
    if restarts:
        what += ("; the running jobs restart from their checkpoints (changed job settings: "
                 "spec.spark, the Kafka connection, the batch bound, the bad-record policy or "
                 "the micro-batch interval)")
    return Change(ChangeKind.SETTINGS, revision, active, (), fields, restarts, what)


def _started(status: DerivedViewStatus, revision: str, active: str | None,
             live_revision: str | None, index: str, now: dt.datetime) -> tuple[ChangeKind, str]:
    """How the operator starts the spec's revision (core.planner.phases.start)."""
    record = status.record(revision)
    if revision == active:
        dropped = f" candidate {live_revision} is superseded;" if live_revision else ""
        return (ChangeKind.ROLLBACK,
                f"back to the active revision {revision}:{dropped} nothing replays")
    if record is not None and record.phase == Phase.Retiring:
        if record.follow_until is not None and now < record.follow_until:
            return (ChangeKind.ROLLBACK,
                    f"rollback to retained revision {revision}: readers switch back once its "
                    "gate holds; its job follows the log, no restart, no replay")
        return (ChangeKind.ROLLBACK,
                f"rollback to retained revision {revision}: its job resumes from its "
                "checkpoint; no replay from offset 0")
    if record is not None and record.phase in BUILDING:
        return ChangeKind.REPLAY, f"revision {revision} goes on replaying into {index}"
    if record is not None and not is_torn_down(record):
        return (ChangeKind.REPLAY,
                f"revision {revision} ({record.phase.value}) is tried again: its job resumes "
                "from its checkpoint while its index is there, else it replays from offset 0")
    if record is not None:
        return (ChangeKind.REPLAY,
                f"revision {revision} ({record.phase.value}, its index dropped) is rebuilt from "
                f"offset 0 into {index}")
    beside = f" beside the active {active}" if active is not None else ""
    return (ChangeKind.REPLAY,
            f"new revision {revision} replays from the log's start into {index}{beside}")
