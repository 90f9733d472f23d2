"""Names of the DerivedView API that the CRD, the planner, the shell and the CLI must agree on,
and the one reading of the annotation they all interpret."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

GROUP: Final = "derivedviews.io"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
KIND: Final = "DerivedView"
PLURAL: Final = "derivedviews"
SINGULAR: Final = "derivedview"
SHORT_NAMES: Final = ("dv",)

FINALIZER: Final = f"{GROUP}/cleanup"
"""Held while the view exists so deletion can stop its jobs (and drop indexes with Delete)."""

SECRET_FINALIZER: Final = f"{GROUP}/sink-secret"
"""On the sink Secret of a view with deletionPolicy Delete: deleting the namespace deletes the
Secret too, and the view's cleanup still needs it to drop the alias and indexes."""

PROMOTE_ANNOTATION: Final = f"{GROUP}/promote"
"""`<revision>`: in manual mode, allow the cutover to that revision once its gate holds."""
PAUSED_ANNOTATION: Final = f"{GROUP}/paused"
"""`"true"`: plan nothing but status (observations still refresh). Read with `is_paused`."""
RETRY_ANNOTATION: Final = f"{GROUP}/retry"
"""Any new value restarts a failed job (once per value)."""

JOB_SETTINGS_ANNOTATION: Final = f"{GROUP}/job-settings"
"""On a SparkApplication: hash of the view's job settings (`spec.spark`, the Kafka connection)
it was created with; when the spec's hash differs, the job is restarted from its checkpoint."""

JOB_STAGE_LABEL: Final = f"{GROUP}/job-stage"
"""On a SparkApplication: `replay` or `steady`, the stage it was rendered for
(core.job.stages): `kubectl get sparkapplications -l derivedviews.io/job-stage=replay`."""

VIEW_LABEL: Final = f"{GROUP}/view"
VIEW_NAMESPACE_LABEL: Final = f"{GROUP}/view-namespace"
JOBS_FOR_LABEL: Final = f"{GROUP}/jobs-for"
"""On a job namespace: the view namespace whose jobs it runs. The platform sets it (the chart
does for the namespaces it lists); the operator places no job in a namespace without it, so a
tenant's own namespace, which may share the name, never receives another tenant's jobs."""
"""On a view's jobs, their pods and Secret copies: the view's namespace, which differs from
theirs when jobs run in a job namespace (core.naming.job_namespace)."""
REVISION_LABEL: Final = f"{GROUP}/revision"
MANAGED_BY_LABEL: Final = "app.kubernetes.io/managed-by"
MANAGED_BY: Final = "derived-views"


def is_paused(annotations: Mapping[str, str] | None) -> bool:
    """The paused annotation is true, case and spaces aside (`kubectl annotate ... paused=True`
    pauses too): the operator, the CLI's `describe` and `dv resume` read it alike."""
    return (annotations or {}).get(PAUSED_ANNOTATION, "").strip().lower() == "true"
