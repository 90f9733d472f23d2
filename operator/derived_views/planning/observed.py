"""One immutable snapshot of everything the planner may look at.

Gathered by the shell through adapters; the planner never reads anything
else (no clock, no environment, no I/O).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field

from derived_views.resource.status import DerivedViewStatus

TopicPartition = tuple[str, int]

JOB_FAILED_STATES = frozenset({"FAILED", "SUBMISSION_FAILED"})


@dataclass(frozen=True)
class Job:
    """A revision's SparkApplication as the Spark Operator reports it."""

    name: str
    state: str = ""
    error: str = ""

    @property
    def failed(self) -> bool:
        return self.state in JOB_FAILED_STATES


@dataclass(frozen=True)
class Progress:
    """What a revision has committed into its index (from the sink's ledger)."""

    committed: Mapping[TopicPartition, int] = field(default_factory=dict)
    committed_at: dt.datetime | None = None


@dataclass(frozen=True)
class Observed:
    generation: int
    status: DerivedViewStatus
    annotations: Mapping[str, str] = field(default_factory=dict)
    deleting: bool = False
    jobs: Mapping[str, Job] = field(default_factory=dict)
    """SparkApplications of this view, by revision."""
    indexes: frozenset[str] = frozenset()
    """Index tables that exist in the sink."""
    progress: Mapping[str, Progress] = field(default_factory=dict)
    """Ledger position by revision."""
    topic_ends: Mapping[TopicPartition, int] | None = None
    """High watermarks; None when Kafka could not be asked this time."""
    alias_target: str | None = None
    """The index the alias serves, None when there is no alias yet."""
