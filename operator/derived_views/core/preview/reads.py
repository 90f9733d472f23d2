"""What `dv plan` read of a view's sources before judging it, as the operator reads them
before a job: its Secrets' labels, its schema registry's answers, its topics' offsets.

The shell (cli) reads them, read-only and when it may; what it could not read is said here
in a sentence, so the preview can say what it left unjudged and why.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from derived_views.core.log.kafka_connection import SourceOffsets
from derived_views.core.observed import RegistryObserved


@dataclass(frozen=True)
class SourceReads:
    secret_labels: Mapping[str, Mapping[str, str] | None] | None
    """Each Secret the view names (tenancy.secrets_of) with its labels, None when it is
    missing; None when the Secrets could not be read."""
    registry: RegistryObserved | None = None
    """The registry's answers (reconcile.registry_reading); None: no Avro, or not read."""
    log: SourceOffsets | None = None
    """The source topics' end offsets and log starts; None when not read (no replay)."""
    not_read: tuple[str, ...] = ()
    """What could not be read, and why, each a sentence that says what to grant or fix."""
