"""What the planner asks the shell to do.

The shell carries a plan's actions out in order and stops at the first that
fails (the next reconcile replans from a fresh observation). Each action is
idempotent when carried out: replanning after a partial run repeats at most
the steps that did not land. Order within a plan:

    RecordIntent, AddFinalizer, SwitchAlias, DeleteSparkApplication,
    CreateSparkApplication, DropAlias, DropIndex, UpdateStatus, upkeep (TakeChecks,
    SubmitChecks or ForgetChecks, PruneLedger), EmitEvent..., RemoveFinalizer

Upkeep is neither in the intent nor an effect: it repeats harmlessly on every pass that
plans it, and a pass that stops before it loses nothing a later pass does not redo.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any, Literal

from derived_views.api.status import CheckRun, DerivedViewStatus, Intent
from derived_views.core.check_runs import CheckRequest
from derived_views.core.cutover.monotonic import Guard


@dataclass(frozen=True)
class RecordIntent:
    """Patch `status.intent` (merge patch `{"intent": ...}`) BEFORE any other action."""

    intent: Intent
    patch: dict[str, Any]
    """The status merge patch to send, e.g. `{"intent": {...}}`."""


@dataclass(frozen=True)
class AddFinalizer:
    """Add `finalizer` to the view's metadata.finalizers (no-op if present)."""

    finalizer: str


@dataclass(frozen=True)
class RemoveFinalizer:
    """Remove `finalizer` from the view's metadata.finalizers (no-op if absent)."""

    finalizer: str


@dataclass(frozen=True)
class SecretCopy:
    """A Secret a job in a job namespace mounts: `source_namespace/source` copied there as
    `name`, owned by the jobs that mount it, so Kubernetes' garbage collector removes it with
    the last of them. `platform`: the checkpoint Secret, left as it is when the job namespace
    holds one the platform made itself (credentials scoped to that namespace)."""

    source_namespace: str
    source: str
    name: str
    platform: bool = False


@dataclass(frozen=True)
class CreateSparkApplication:
    """Create this manifest as is (409 Already Exists counts as success) in its
    metadata.namespace; then write `copies` there, owned by it."""

    revision: str
    name: str
    manifest: dict[str, Any]
    copies: tuple[SecretCopy, ...] = ()

    @property
    def namespace(self) -> str:
        return str(self.manifest["metadata"]["namespace"])


@dataclass(frozen=True)
class DeleteSparkApplication:
    """Delete the SparkApplication `name` in `namespace` ("": the view's; 404 counts as
    success)."""

    revision: str
    name: str
    namespace: str = ""


@dataclass(frozen=True)
class SwitchAlias:
    """In ONE atomic step of the sink (a PostgreSQL transaction replacing a VIEW, one
    OpenSearch `_aliases` request): if `schema.alias` still reads `from_index` (None: there is
    no alias), point it at `to_index`. Already on `to_index`: no-op. Pointing elsewhere: fail
    (someone else moved it) so the next reconcile replans."""

    schema: str
    alias: str
    to_index: str
    from_index: str | None
    not_behind: Guard | None = None
    """Checked again in the same step, with the active's writes held (core.cutover.monotonic): the
    candidate has committed at least as far as the active; otherwise nothing changes."""


@dataclass(frozen=True)
class DropAlias:
    """Remove the alias `schema.alias` if it exists (a PostgreSQL VIEW, an OpenSearch alias)."""

    schema: str
    alias: str


@dataclass(frozen=True)
class DropIndex:
    """Drop the index `schema.index` if it exists and delete the revision's ledger entries;
    refuse while the alias still reads it (PostgreSQL: in one transaction)."""

    schema: str
    index: str
    revision: str
    owner_uid: str = field(default="", compare=False)
    """The dropping view's metadata.uid: the adapter refuses an index recorded for another
    view (and, without one, any index with a recorded owner)."""
    checkpoints: str = field(default="", compare=False)
    """The revision's build-0 checkpoint location (core.job.checkpoints.dropped_revision_location):
    once the index is dropped, the shell deletes the revision's checkpoints there (a failure
    is logged, never raised). Empty: none are deleted."""


@dataclass(frozen=True)
class HoldSecret:
    """Put the sink-secret finalizer on a Secret the view's cleanup will need."""

    name: str


@dataclass(frozen=True)
class ReleaseSecret:
    """Take the sink-secret finalizer off a Secret, unless another view still holds it."""

    name: str


@dataclass(frozen=True)
class UpdateStatus:
    """Send `patch` as a JSON merge patch of the status subresource (`{"status": patch}`).

    `status` is the full result for readers and tests; `patch` is its difference from the
    observed status, with nulls for fields that must disappear.
    """

    status: DerivedViewStatus
    patch: dict[str, Any]


@dataclass(frozen=True)
class EmitEvent:
    """A Kubernetes Event on the view: CamelCase reason, a past-tense message."""

    reason: str
    message: str
    type: Literal["Normal", "Warning"] = "Normal"


@dataclass(frozen=True)
class SubmitChecks:
    """Queue a run of the candidate's cutover checks on the operator's check runner (off the
    pass threads), dated `at`: the pass that saw the gate holding. The planner plans it only
    when none of the view's runs is queued or measuring."""

    request: CheckRequest
    at: dt.datetime


@dataclass(frozen=True)
class TakeChecks:
    """The finished run this pass recorded in status: log it, count its failing checks, and
    clear it from the check runner (after the status that records it)."""

    revision: str
    run: CheckRun


@dataclass(frozen=True)
class ForgetChecks:
    """The view's checks are not due (paused, deleted, switched, the gate broke): drop its run
    from the check runner (a run measuring is dropped when it finishes)."""


@dataclass(frozen=True)
class PruneLedger:
    """Cut the sink's ledger to what resuming and the rate read, as this pass's observation
    found it (SinkSession.prune_ledger): the observation itself writes nothing."""


Upkeep = SubmitChecks | TakeChecks | ForgetChecks | PruneLedger

UPKEEP = (SubmitChecks, TakeChecks, ForgetChecks, PruneLedger)
"""Actions kept out of the intent: they repeat harmlessly on every pass that plans them."""

Action = (RecordIntent | AddFinalizer | RemoveFinalizer | CreateSparkApplication
          | DeleteSparkApplication | SwitchAlias | DropAlias | DropIndex | UpdateStatus | EmitEvent
          | HoldSecret | ReleaseSecret | SubmitChecks | TakeChecks | ForgetChecks | PruneLedger)

EFFECTS = (AddFinalizer, RemoveFinalizer, CreateSparkApplication, DeleteSparkApplication,
           SwitchAlias, DropAlias, DropIndex, HoldSecret, ReleaseSecret)
"""Actions that change the world outside the view's status and events."""


def describe(action: Action) -> str:
    """One line per action, for the intent and for logs."""
    match action:
        case CreateSparkApplication(revision=rev, name=name):
            return f"create SparkApplication {name} (revision {rev})"
        case DeleteSparkApplication(revision=rev, name=name):
            return f"delete SparkApplication {name} (revision {rev})"
        case SwitchAlias(schema=schema, alias=alias, to_index=to, from_index=frm):
            return f"switch alias {schema}.{alias} from {frm or '(none)'} to {to}"
        case DropAlias(schema=schema, alias=alias):
            return f"drop alias {schema}.{alias}"
        case DropIndex(schema=schema, index=index):
            return f"drop index {schema}.{index}"
        case AddFinalizer(finalizer=f):
            return f"add finalizer {f}"
        case RemoveFinalizer(finalizer=f):
            return f"remove finalizer {f}"
        case HoldSecret(name=name):
            return f"hold Secret {name} until the view's cleanup is done"
        case ReleaseSecret(name=name):
            return f"release Secret {name}"
        case SubmitChecks(request=request):
            return f"run the cutover checks of revision {request.revision}"
        case TakeChecks(revision=rev):
            return f"take the cutover checks' run of revision {rev}"
        case ForgetChecks():
            return "forget the cutover checks' run"
        case PruneLedger():
            return "prune the sink's ledger"
        case RecordIntent():
            return "record intent"
        case UpdateStatus():
            return "update status"
        case EmitEvent(reason=reason, message=message):
            return f"event {reason}: {message}"
