"""The DerivedView status, as written by the operator (kstatus conditions + revisions)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field


class Phase(StrEnum):
    Pending = "Pending"
    Backfilling = "Backfilling"
    CaughtUp = "CaughtUp"
    Active = "Active"
    Retiring = "Retiring"
    Retired = "Retired"
    Failed = "Failed"
    Superseded = "Superseded"


class StatusModel(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class Lag(StatusModel):
    messages: Annotated[int | None, Field(description="Sum over partitions of end offset minus committed offset.")] = None
    seconds: Annotated[float | None, Field(description="Age of the newest committed batch.")] = None
    partitions: Annotated[dict[str, int], Field(description="Lag per `topic/partition`.")] = {}


class RevisionStatus(StatusModel):
    revision: Annotated[str, Field(description="Content hash of the definition.")]
    index: Annotated[str, Field(description="Index table of this revision.")]
    phase: Annotated[Phase, Field(description="Lifecycle phase.")]
    sparkApplication: Annotated[str | None, Field(description="Name of the revision's SparkApplication.")] = None
    since: Annotated[str | None, Field(description="When the revision entered its phase (RFC 3339).")] = None
    createdAt: Annotated[str | None, Field(description="When the revision's replay started.")] = None
    caughtUpSince: Annotated[str | None, Field(description="Start of the current run of lag at or under the gate.")] = None
    retireAfter: Annotated[str | None, Field(description="When a retiring index is dropped.")] = None
    lag: Annotated[Lag | None, Field(description="Latest lag.")] = None
    message: Annotated[str | None, Field(description="Why the revision is in its phase.")] = None


class Condition(StatusModel):
    type: Annotated[str, Field(description="Ready, Reconciling, Stalled, CaughtUp or Degraded.")]
    status: Annotated[str, Field(description="True, False or Unknown.")]
    reason: Annotated[str, Field(description="CamelCase reason.")] = ""
    message: Annotated[str, Field(description="Human-readable detail.")] = ""
    lastTransitionTime: Annotated[str | None, Field(description="When status last changed.")] = None
    observedGeneration: Annotated[int | None, Field(description="Generation the condition reflects.")] = None


class DerivedViewStatus(StatusModel):
    observedGeneration: Annotated[int | None, Field(description="The spec generation last reconciled.")] = None
    phase: Annotated[str | None, Field(description="Summary: the candidate's phase, or the active's.")] = None
    active: Annotated[RevisionStatus | None, Field(description="The revision the alias serves.")] = None
    candidate: Annotated[RevisionStatus | None, Field(description="The revision being built.")] = None
    revisions: Annotated[list[RevisionStatus], Field(description="Every revision still known.")] = []
    conditions: Annotated[list[Condition], Field(description="kstatus-style conditions.")] = []
    intent: Annotated[str | None, Field(description="The action being carried out, recorded before acting.")] = None
