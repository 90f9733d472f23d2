"""`dv rollback`: which retained revision to go back to, and the spec patch that does it.

Rolling back is an ordinary spec change: the spec's content fields get the
stored content of a retained revision, so the operator sees that revision's
hash again and resumes its index (no replay while it is retained). The field
mapping is `core.revision.spec_fields`, the one `with_content` uses. No I/O here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from derived_views.api.status import DerivedViewStatus, Phase, RevisionContent, RevisionStatus
from derived_views.core.revision import spec_fields

RETAINED_PHASES = (Phase.Retiring, Phase.Retired)
"""Phases of a previous active whose content (and maybe index) is still kept."""


class RollbackError(Exception):
    """No revision to roll back to, with what the user can do about it."""


@dataclass(frozen=True)
class RollbackTarget:
    revision: str
    content: RevisionContent


def rollback_target(status: DerivedViewStatus, to: str | None) -> RollbackTarget:
    """The revision to restore: `to` if given, else the previous active.

    The previous active is lastCutover.from when its content is still kept,
    else the retained revision (Retiring/Retired with content) that entered its
    phase last.
    """
    current = status.revision
    if to is not None:
        record = status.record(to)
        if record is None:
            raise RollbackError(f"revision {to} is not tracked by the view; "
                                f"{_choices(status)}")
        if record.content is None:
            raise RollbackError(f"revision {to} has no stored content any more "
                                f"(phase {record.phase.value}); {_choices(status)}")
        if to == current:
            raise RollbackError(f"the spec already is revision {to}")
        return RollbackTarget(to, record.content)
    cut = status.last_cutover
    if cut is not None and cut.from_revision is not None and cut.from_revision != current:
        record = status.record(cut.from_revision)
        if record is not None and record.content is not None:
            return RollbackTarget(record.revision, record.content)
    retained = [r for r in _with_content(status)
                if r.phase in RETAINED_PHASES and r.revision != current]
    if not retained:
        raise RollbackError("no retained revision has stored content to roll back to "
                            "(retired revisions keep it for cutover.retainPreviousSeconds)")
    latest = max(retained, key=lambda r: r.since)
    assert latest.content is not None  # filtered above
    return RollbackTarget(latest.revision, latest.content)


def _with_content(status: DerivedViewStatus) -> list[RevisionStatus]:
    return [r for r in status.revisions if r.content is not None]


def _choices(status: DerivedViewStatus) -> str:
    kept = [r.revision for r in _with_content(status) if r.revision != status.revision]
    return f"revisions with content: {', '.join(kept)}" if kept else \
        "no revision has stored content"


def spec_patch(spec: dict[str, Any], content: RevisionContent) -> dict[str, Any]:
    """A JSON merge patch of `spec` setting its content fields to `content`.

    Switching between SQL and Python removes the other transform, between a DDL and Avro the
    other encoding, and between an inline and a pinned reader schema the other form (null
    in a merge patch deletes the key).
    """
    patch = spec_fields(content)
    other = "sql" if "python" in patch["transform"] else "python"
    if other in (spec.get("transform") or {}):
        patch["transform"][other] = None
    source, current = patch["source"], spec.get("source") or {}
    for key in ("schema", "avro"):
        if key not in source and key in current:
            source[key] = None
    reader = (source.get("avro") or {}).get("readerSchema")
    current_reader = (current.get("avro") or {}).get("readerSchema") or {}
    if reader is not None:
        for key in ("schema", "subject", "version"):
            if key not in reader and key in current_reader:
                reader[key] = None
    return patch


def guarded_patch(spec_changes: dict[str, Any], resource_version: str) -> dict[str, Any]:
    """The whole-object patch: fails with 409 if the view changed since it was read."""
    return {"metadata": {"resourceVersion": resource_version}, "spec": spec_changes}
