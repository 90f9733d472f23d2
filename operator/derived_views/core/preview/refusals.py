"""What the operator would refuse in a manifest's spec, judged by the operator's own judges.

The same judges a pass runs before a job starts (core.planner.context.build): the checkpoint
base, the tenancy policy as the installation has it, the schema and SQL against the source's
columns, the cutover checks' SQL; the SQL and the checks only for a revision other than the
active one, as the operator judges them. Each message is the one Stalled then carries
(core.planner.rules.problems), without what a live view's status adds (who keeps serving).
What the shell read of the view's sources (core.preview.reads) is judged as the pass judges
it: its Secrets present and labelled, its schema registry's answers and pinned reader schema,
its topics present; what was not read is said as unjudged, never passed over in silence.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from derived_views.api.spec import DerivedViewSpec
from derived_views.api.status import SubjectVersion
from derived_views.core import naming, reasons
from derived_views.core.cutover import checks
from derived_views.core.job.checkpoints import durable_base_problem
from derived_views.core.judges import tenancy
from derived_views.core.judges.source_schema import pinned_reader
from derived_views.core.judges.transform import Refusal, check_spec
from derived_views.core.judges.unjudged import not_judged_message
from derived_views.core.planner.context import reader_hold, registry_problem, tenancy_refusal
from derived_views.core.planner.rules.problems import (
    checkpoint_text,
    policy_text,
    reader_hold_text,
    registry_text,
    spec_refused_text,
    topic_missing_text,
)
from derived_views.core.preview.reads import SourceReads
from derived_views.core.settings import Settings

SECRET_REASONS = (reasons.SECRET_MISSING, reasons.SECRET_NOT_LABELLED)


@dataclass(frozen=True)
class Judged:
    """What the judges refused, and what they could not judge without reading more."""

    refusals: tuple[Refusal, ...]
    not_judged: tuple[str, ...]


def _checkpoint(spec: DerivedViewSpec, settings: Settings) -> Refusal | None:
    base = spec.spark.checkpoint_base
    problem = None if base is None else durable_base_problem(base, settings.in_cluster)
    return None if problem is None else Refusal(reasons.CHECKPOINT_NOT_DURABLE,
                                                checkpoint_text(problem))


def _policy(spec: DerivedViewSpec, settings: Settings, namespace: str,
            secret_labels: Mapping[str, Mapping[str, str] | None] | None) -> Refusal | None:
    """The pass's tenancy refusal; the spec's choices alone when its Secrets were not read."""
    refusal = (tenancy.spec_refusal(spec, settings.tenancy, operator_image=settings.spark.image,
                                    operator_main_file=settings.spark.main_application_file,
                                    namespace=namespace)
               if secret_labels is None
               else tenancy_refusal(spec, settings, namespace, secret_labels))
    return None if refusal is None else Refusal(refusal.reason, policy_text(refusal.message))


def _registry(reads: SourceReads | None) -> Refusal | None:
    problem = registry_problem(reads.registry if reads is not None else None)
    if problem is None or (reads is not None and reads.secret_labels is not None
                           and problem.reason in SECRET_REASONS):
        return None  # its Secret missing or unlabelled: the tenancy refusal says it
    return Refusal(problem.reason, registry_text(problem.message))


def _reader(spec: DerivedViewSpec, reads: SourceReads, known: Mapping[SubjectVersion, str],
            revision: str) -> Refusal | None:
    hold = reader_hold(spec, reads.registry, known)
    return None if hold is None else Refusal(hold.reason, reader_hold_text(hold.message, revision))


def _topics(spec: DerivedViewSpec, reads: SourceReads | None) -> Refusal | None:
    missing = sorted(reads.log.missing) if reads is not None and reads.log is not None else []
    if not missing:
        return None
    return Refusal(reasons.TOPIC_MISSING,
                   topic_missing_text(missing, spec.source.kafka.bootstrap_servers))


def _transform(spec: DerivedViewSpec, known: Mapping[SubjectVersion, str], revision: str
               ) -> Refusal | None:
    refusal = check_spec(spec, known)
    return None if refusal is None else Refusal(refusal.reason,
                                                spec_refused_text(refusal.message, revision))


def _checks(spec: DerivedViewSpec, revision: str, active: str | None) -> Refusal | None:
    alias = spec.sink.alias
    refused = checks.refused_assertion(spec, naming.index_table(alias, revision),
                                       naming.index_table(alias, active) if active else None)
    if refused is None:
        return None
    name, why = refused
    return Refusal(reasons.POLICY_VIOLATION, f"cutover.checks.assertions {name}: {why}")


def _unread_pin(spec: DerivedViewSpec, reads: SourceReads | None,
                known: Mapping[SubjectVersion, str]) -> str | None:
    """Why the transform is not judged against its pinned reader schema, if it is not."""
    pin = pinned_reader(spec.source)
    registry = reads.registry if reads is not None else None
    if pin is None or pin in known or (registry is not None and registry.problem is None):
        return None
    why = ("the registry could not be asked (see the refusal)" if registry is not None
           else "the registry was not read")
    return f"the transform against the reader schema pinned in the registry ({pin.describe()}): {why}"


def judge_spec(spec: DerivedViewSpec, namespace: str, settings: Settings, revision: str,
               active: str | None, known: Mapping[SubjectVersion, str],
               reads: SourceReads | None = None) -> Judged:
    """The refusals of `spec` (the revision `revision`) in `namespace`, in the operator's order;
    `reads`: what the shell read of its sources (None: nothing).

    A judge that raises on the author's input is a refusal too (SpecNotJudged), as the
    operator's pass makes it (core.judges.unjudged)."""
    labels = reads.secret_labels if reads is not None else None
    judges: list[Callable[[], Refusal | None]] = [
        lambda: _checkpoint(spec, settings), lambda: _policy(spec, settings, namespace, labels),
        lambda: _registry(reads)]
    not_judged: list[str] = []
    if revision != active:
        fetched = reads.registry.reader_schemas if reads and reads.registry else {}
        known = {**fetched, **known}  # a revision's kept schema wins, as in the pass
        unread = _unread_pin(spec, reads, known)
        if unread is not None:
            not_judged.append(unread)
        elif reads is not None and reads.registry is not None and pinned_reader(spec.source):
            judges.append(lambda: _reader(spec, reads, known, revision)
                          or _transform(spec, known, revision))
        else:
            judges.append(lambda: _transform(spec, known, revision))
        judges.append(lambda: _checks(spec, revision, active))
    judges.append(lambda: _topics(spec, reads))
    refusals: list[Refusal] = []
    for judge in judges:
        try:
            refusal = judge()
        except Exception as exc:  # as the pass does: an unjudged spec is refused, not raised
            refusal = Refusal(reasons.SPEC_NOT_JUDGED, not_judged_message(exc, active))
        if refusal is not None:
            refusals.append(refusal)
    return Judged(tuple(refusals), tuple(not_judged))
