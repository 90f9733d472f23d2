"""What the operator would refuse in a manifest's spec, judged by the operator's own judges.

The same judges a pass runs before a job starts (core.planner.context.build): the checkpoint
base, the tenancy policy as the installation has it, the schema and SQL against the source's
columns, the cutover checks' SQL; the SQL and the checks only for a revision other than the
active one, as the operator judges them. Each message is the one Stalled then carries
(core.planner.rules.problems), without what a live view's status adds (who keeps serving). Secrets and the schema registry are not read here:
what is left unjudged is said, never passed over in silence.
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
from derived_views.core.planner.rules.problems import (
    checkpoint_text,
    policy_text,
    spec_refused_text,
)
from derived_views.core.settings import Settings


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


def _policy(spec: DerivedViewSpec, settings: Settings, namespace: str) -> Refusal | None:
    refusal = tenancy.spec_refusal(spec, settings.tenancy, operator_image=settings.spark.image,
                                   operator_main_file=settings.spark.main_application_file,
                                   namespace=namespace)
    return None if refusal is None else Refusal(refusal.reason, policy_text(refusal.message))


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


def judge_spec(spec: DerivedViewSpec, namespace: str, settings: Settings, revision: str,
               active: str | None, known: Mapping[SubjectVersion, str]) -> Judged:
    """The refusals of `spec` (the revision `revision`) in `namespace`, in the operator's order.

    A judge that raises on the author's input is a refusal too (SpecNotJudged), as the
    operator's pass makes it (core.judges.unjudged)."""
    judges: list[Callable[[], Refusal | None]] = [
        lambda: _checkpoint(spec, settings), lambda: _policy(spec, settings, namespace)]
    not_judged: list[str] = []
    if revision != active:
        pin = pinned_reader(spec.source)
        if pin is not None and pin not in known:
            not_judged.append(f"the transform against the reader schema pinned in the registry "
                              f"({pin.describe()}): dv plan does not read the registry")
        else:
            judges.append(lambda: _transform(spec, known, revision))
        judges.append(lambda: _checks(spec, revision, active))
    refusals: list[Refusal] = []
    for judge in judges:
        try:
            refusal = judge()
        except Exception as exc:  # as the pass does: an unjudged spec is refused, not raised
            refusal = Refusal(reasons.SPEC_NOT_JUDGED, not_judged_message(exc, active))
        if refusal is not None:
            refusals.append(refusal)
    return Judged(tuple(refusals), tuple(not_judged))
