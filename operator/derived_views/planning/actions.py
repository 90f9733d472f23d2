"""What the planner asks the shell to do; each is idempotent when carried out."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CreateSparkApplication:
    """Start (or resume from its checkpoint) the replay job of a revision."""

    revision: str


@dataclass(frozen=True)
class DeleteSparkApplication:
    revision: str


@dataclass(frozen=True)
class SwitchAlias:
    """Point the alias at `to_index` in one transaction, if it still points at `from_index`."""

    to_index: str
    from_index: str | None


@dataclass(frozen=True)
class DropIndex:
    """Drop a revision's index table and its ledger rows (never the alias's target)."""

    index: str
    revision: str


@dataclass(frozen=True)
class DropAlias:
    pass


@dataclass(frozen=True)
class EmitEvent:
    reason: str
    message: str
    type: str = "Normal"


@dataclass(frozen=True)
class RemoveFinalizer:
    pass


Action = (CreateSparkApplication | DeleteSparkApplication | SwitchAlias | DropIndex | DropAlias
          | EmitEvent | RemoveFinalizer)
