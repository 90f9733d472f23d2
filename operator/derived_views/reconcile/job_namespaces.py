"""Where a view's jobs run, and whether the platform made that namespace for them.

With DV_JOB_NAMESPACE set, a view's SparkApplications, their pods and the copies of its
Secrets live in a job namespace of the platform's (docs/security.md, "Where jobs run"). The
operator places a job only where the namespace exists and is labelled as the job namespace of
the view's namespace (`derivedviews.io/jobs-for`): a name alone proves nothing, a namespace
with that name could be another tenant's. Namespaces are read at most once a minute each.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from derived_views.api.constants import JOBS_FOR_LABEL
from derived_views.core import reasons
from derived_views.core.settings import Settings

LabelsOf = Callable[[str], "dict[str, str] | None"]

CACHE_SECONDS = 60.0
"""How long a namespace's labels are trusted: a job namespace created later is used within
this time."""


@dataclass
class JobNamespaces:
    """The labels of job namespaces, cached (a pass per view must not read its namespace)."""

    clock: Callable[[], float] = time.monotonic
    _seen: dict[str, tuple[float, dict[str, str] | None]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def labels(self, name: str, read: LabelsOf) -> dict[str, str] | None:
        now = self.clock()
        with self._lock:
            seen = self._seen.get(name)
        if seen is not None and now - seen[0] < CACHE_SECONDS:
            return seen[1]
        labels = read(name)
        with self._lock:
            self._seen[name] = (now, labels)
        return labels


def placement(settings: Settings, namespace: str, cache: JobNamespaces, read: LabelsOf
              ) -> tuple[str, tuple[str, str] | None]:
    """(the job namespace of views in `namespace`, why no job may be placed there or None)."""
    try:
        jobs = settings.jobs_of(namespace)
    except ValueError as exc:
        return namespace, (reasons.JOB_NAMESPACE_MISSING,
                           f"{exc}: shorten the namespace, or change DV_JOB_NAMESPACE (chart "
                           "value jobs.namespace)")
    if jobs == namespace:
        return jobs, None
    labels = cache.labels(jobs, read)
    where = (f"the jobs of views in namespace {namespace} run in namespace {jobs} "
             "(DV_JOB_NAMESPACE, chart value jobs.namespace)")
    if labels is None:
        return jobs, (reasons.JOB_NAMESPACE_MISSING,
                      f"{where}, which does not exist: the platform creates it, labelled "
                      f"{JOBS_FOR_LABEL}={namespace} (the chart does for the namespaces it "
                      "lists in watch.namespaces or jobs.tenants); no job starts until then")
    if labels.get(JOBS_FOR_LABEL) != namespace:
        return jobs, (reasons.JOB_NAMESPACE_MISSING,
                      f"{where}, but that namespace is not labelled {JOBS_FOR_LABEL}="
                      f"{namespace}: only a namespace the platform made for these jobs "
                      "receives them (and the view's Secrets); label it if it is one")
    return jobs, None
