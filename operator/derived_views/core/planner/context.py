"""What one planning pass knows and never changes: spec, observation, time, names, refusals.

Built once per pass (`build`), frozen; every phase, rule and the assembler read it. What the
pass decides lives in the draft (core.planner.draft).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass

from derived_views.api.constants import PROMOTE_ANNOTATION, RETRY_ANNOTATION
from derived_views.api.spec import DerivedViewSpec
from derived_views.api.status import DerivedViewStatus, Phase, RevisionStatus, SubjectVersion
from derived_views.core import check_runs, naming, ownership
from derived_views.core.cutover import checks
from derived_views.core.job.checkpoints import durable_base_problem, is_s3a
from derived_views.core.judges import tenancy
from derived_views.core.judges.source_schema import ReaderSchemas, pinned_reader
from derived_views.core.judges.tenancy import PolicyRefusal
from derived_views.core.judges.transform import Refusal, check_spec
from derived_views.core.observed import (
    IndexOwner,
    LedgerPosition,
    Observed,
    RegistryObserved,
    SinkObserved,
    SparkApplicationObserved,
    ViewObserved,
)
from derived_views.core.revision import reader_schemas_of, revision_of
from derived_views.core.settings import Settings


@dataclass(frozen=True)
class Context:
    """Read-only for the whole pass; its methods are questions answered from it alone."""

    spec: DerivedViewSpec
    obs: Observed
    now: dt.datetime
    settings: Settings
    view: ViewObserved
    sink: SinkObserved | None
    apps: Mapping[str, SparkApplicationObserved]
    desired: str
    """The spec's revision."""
    recorded_active: str | None
    """The Active revision the status records (the one the alias serves, if several are)."""
    schema: str
    """The PostgreSQL schema of the alias and the indexes ("" for OpenSearch)."""
    alias: str
    """The name readers query; each revision's index is `<alias>__<revision>`."""
    qualified_alias: str
    """The alias as people find it (`schema.table`), for messages."""
    alias_field: str
    """The spec field that names the alias, for messages that say what to change."""
    paused: bool
    retry_token: str | None
    promote_to: str
    claimed_by: IndexOwner | None
    """Another view (another UID, or for an alias recorded by name only another name) the
    alias of this sink table records as its owner: touch nothing of the sink's."""
    foreign: Mapping[str, IndexOwner]
    """Indexes another view records as its own (same name: same content and table): never
    resumed into, switched to or dropped; the desired or active one stalls the view."""
    owned_refusal: tuple[str, IndexOwner] | None
    checkpoint_problem: str | None
    reader_schemas: ReaderSchemas
    """Reader schemas pinned in the registry, by subject and version: fetched this pass, or
    kept by a revision's status (which wins: a started revision renders as it started)."""
    reader_hold: Refusal | None
    """The spec pins its reader schema in the registry and its text is not known: no job
    starts for the spec's revision (ReaderSchemaNotFound, or why the registry was not read)."""
    registry_problem: Refusal | None
    """Why the view's schema registry cannot be asked: no job of the view is created (each
    would fail as it starts), running ones are left alone."""
    spec_refusal: Refusal | None
    """A schema or SQL Spark would refuse: no job starts for it, the active one serves on."""
    policy_refusal: PolicyRefusal | None
    """What the platform's tenancy policy does not let this view's author choose: no job of
    the view is created (a running one is left alone: the policy gates what starts)."""
    check_refusal: tuple[str, str] | None
    """A check's SQL the policy refuses: the candidate builds, but is never promoted on it."""
    checks_due: check_runs.CheckRequest | None
    """The candidate's cutover checks this pass wants measured (core.cutover.checks.due), if any."""
    checks_taken: check_runs.Finished | None
    """The check runner's finished run of exactly `checks_due`: the one this pass records.
    A finished run of other checks or tables speaks for nothing and is forgotten."""

    def index(self, revision: str) -> str:
        return naming.index_table(self.alias, revision)

    def retire_after(self) -> dt.datetime:
        return self.now + dt.timedelta(seconds=self.spec.cutover.retain_previous_seconds)

    def index_exists(self, revision: str) -> bool | None:
        """None when the sink could not be asked."""
        return None if self.sink is None else self.index(revision) in self.sink.indexes

    def position_of(self, revision: str) -> LedgerPosition | None:
        return None if self.sink is None else self.sink.ledger.get(revision)

    def retry_requested(self, record: RevisionStatus) -> bool:
        """A failed job restarts only on a new spec generation or a new retry annotation value."""
        return (record.retry_token != self.retry_token
                or record.generation != self.view.generation)

    def checkpoint(self, revision: str, build: int) -> str:
        base = self.spec.spark.checkpoint_base or self.settings.checkpoints.base
        return naming.checkpoint_location(base, self.view.namespace, self.view.name, revision,
                                          build)

    def secrets_for_cleanup(self) -> list[str]:
        """What deleting with deletionPolicy Delete reads: the sink Secret, and the checkpoint
        Secret when checkpoints on s3a:// are deleted with the operator's credentials."""
        if self.spec.deletion_policy != "Delete":
            return []
        names = {self.spec.sink.secret_ref.name}
        base = self.spec.spark.checkpoint_base or self.settings.checkpoints.base
        if (self.settings.checkpoints.secret and is_s3a(base)
                and not self.settings.jobs.namespace):  # else it is not in the view's namespace
            names.add(self.settings.checkpoints.secret)
        return sorted(names)


def recorded_active(status: DerivedViewStatus, sink: SinkObserved | None) -> str | None:
    """The Active record the alias serves, else the first one (a torn status may have two)."""
    actives = [r for r in status.revisions if r.phase == Phase.Active]
    if not actives:
        return None
    serving = [r for r in actives if sink is not None and sink.alias_target == r.index]
    return (serving or actives)[0].revision


def known_reader_schemas(spec: DerivedViewSpec, observed: Observed) -> dict[SubjectVersion, str]:
    """Fetched reader schemas, then those the status keeps (the spec's revision's last): a
    registry whose version changed later never changes what a started revision runs."""
    known = dict(observed.registry.reader_schemas) if observed.registry is not None else {}
    desired = observed.status.record(revision_of(spec))
    for record in [*observed.status.revisions, *([desired] if desired else [])]:
        if record.content is not None:
            known.update(reader_schemas_of(record.content))
    return known


def reader_hold(spec: DerivedViewSpec, registry: RegistryObserved | None, known: ReaderSchemas
                ) -> Refusal | None:
    """Why the spec's pinned reader schema is not known: the registry could not be asked, or
    it has no such subject or version; None when it is known (or inline)."""
    pin = pinned_reader(spec.source)
    if pin is None or pin in known:
        return None
    problem = (registry.problem or registry.reader_problem) if registry is not None else None
    if problem is not None:
        return Refusal(*problem)
    return check_spec(spec, known)  # ReaderSchemaNotFound: not read from the registry yet


def registry_problem(registry: RegistryObserved | None) -> Refusal | None:
    problem = registry.problem if registry is not None else None
    return None if problem is None else Refusal(*problem)


def tenancy_refusal(spec: DerivedViewSpec, settings: Settings, namespace: str,
                    secret_labels: Mapping[str, Mapping[str, str] | None]
                    ) -> PolicyRefusal | None:
    """The spec's first choice the policy refuses, else its first Secret that is missing or
    not labelled for views (`secret_labels`: each Secret's labels, None when missing)."""
    refusal = tenancy.spec_refusal(spec, settings.tenancy, operator_image=settings.spark.image,
                                   operator_main_file=settings.spark.main_application_file,
                                   namespace=namespace)
    for name in tenancy.secrets_of(spec):
        refusal = refusal or tenancy.secret_refusal(
            namespace, name, secret_labels.get(name), settings.tenancy)
    return refusal


def build(spec: DerivedViewSpec, observed: Observed, now: dt.datetime) -> Context:
    """The pass's context; the refusals are judged in this order (each may raise, see
    core.judges.unjudged)."""
    view, sink = observed.view, observed.sink
    alias = spec.sink.alias
    desired = revision_of(spec)
    active = recorded_active(observed.status, sink)
    annotations = view.annotations
    foreign = ownership.foreign_indexes(sink, view)
    index_of_active = naming.index_table(alias, active) if active else None
    checkpoint_base = spec.spark.checkpoint_base
    due = checks.due(spec, observed.status, now,
                     stopped=view.paused or view.deletion_timestamp is not None)
    finished = observed.checks.finished
    known = known_reader_schemas(spec, observed)
    held = reader_hold(spec, observed.registry, known)
    return Context(
        spec=spec, obs=observed, now=now, settings=observed.settings, view=view, sink=sink,
        apps=observed.spark_applications, desired=desired, recorded_active=active,
        schema=spec.sink.db_schema, alias=alias, qualified_alias=spec.sink.qualified_alias,
        alias_field=("spec.sink.opensearch.index" if spec.sink.kind == "opensearch"
                    else "spec.sink.postgres.table"),
        # Deleting overrides a pause: the user asked for the jobs to stop.
        paused=view.paused and view.deletion_timestamp is None,
        retry_token=annotations.get(RETRY_ANNOTATION),
        promote_to=annotations.get(PROMOTE_ANNOTATION, "").strip(),
        claimed_by=ownership.alias_claimed_by(sink, view),
        foreign=foreign,
        owned_refusal=ownership.first_refused(
            (naming.index_table(alias, desired), index_of_active), foreign),
        checkpoint_problem=(None if checkpoint_base is None
                            else durable_base_problem(checkpoint_base, observed.settings.in_cluster)),
        reader_schemas=known, reader_hold=held,
        registry_problem=registry_problem(observed.registry),
        spec_refusal=None if held is not None else check_spec(spec, known),
        policy_refusal=tenancy_refusal(spec, observed.settings, view.namespace,
                                       observed.secret_labels),
        check_refusal=checks.refused_assertion(spec, naming.index_table(alias, desired),
                                               index_of_active),
        checks_due=due,
        checks_taken=(finished if finished is not None and due is not None
                      and check_runs.same_request(finished.request, due) else None))
