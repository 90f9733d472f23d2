"""Prometheus metrics: what a platform team graphs and alerts on, per view and revision.

Gauges are recomputed from each pass's status (the planner's own view of
lag, phases and readiness), so they never disagree with `kubectl get dv`;
series of revisions that disappeared are removed, and a deleted view's
series go with it. Labels are `view_namespace`/`view`, not `namespace`,
which Prometheus' Kubernetes discovery sets to the operator pod's namespace.
The registry is per instance so tests (and two operators in one process)
do not share state.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from derived_views.api.status import DerivedViewStatus, Phase

log = logging.getLogger("derived_views.process.metrics")

VIEW = ("view_namespace", "view")
REVISION = (*VIEW, "revision", "role")
INDEX = (*VIEW, "revision", "index")
ROLES = ("active", "candidate")
# An alias switch is one short transaction; a gate-to-switch is bounded by the poll interval.
SWITCH_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
GATE_BUCKETS = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
PASS_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


@dataclass(frozen=True)
class Sample:
    """One gauge value: which gauge, its labels in the gauge's label order, the value."""

    gauge: str
    labels: tuple[str, ...]
    value: float


def view_samples(namespace: str, view: str, status: DerivedViewStatus,
                 index_rows: Mapping[str, int]) -> list[Sample]:
    """The gauges for one view from its status and the sink's row estimates per index table."""
    out = [Sample("ready", (namespace, view), 1.0 if _ready(status) else 0.0)]
    shown = [("active", status.active.revision, status.active.lag,
              status.active.bad_records) if status.active else None,
             ("candidate", status.candidate.revision, status.candidate.lag,
              status.candidate.bad_records) if status.candidate else None]
    for entry in shown:
        if entry is None:
            continue
        role, revision, lag, bad = entry
        labels = (namespace, view, revision, role)
        if bad is not None:
            out.append(Sample("bad_records", labels, float(bad)))
        if lag is None:
            continue
        out.append(Sample("lag_messages", labels, float(lag.messages)))
        if lag.seconds is not None:
            out.append(Sample("lag_seconds", labels, float(lag.seconds)))
        if lag.eta_seconds is not None:
            out.append(Sample("lag_eta_seconds", labels, float(lag.eta_seconds)))
        if lag.batch_read is not None:
            out.append(Sample("lag_batch_read", labels, float(lag.batch_read)))
    for record in status.revisions:
        if record.phase == Phase.Retired or record.index not in index_rows:
            continue
        out.append(Sample("index_rows", (namespace, view, record.revision, record.index),
                          float(index_rows[record.index])))
    return out


def _ready(status: DerivedViewStatus) -> bool:
    ready = status.condition("Ready")
    return ready is not None and ready.status == "True"


def gate_to_switch_seconds(status: DerivedViewStatus) -> float | None:
    """Seconds from the gate holding to the alias switch of the last cutover, if recorded."""
    last = status.last_cutover
    if last is None or last.gate_held_at is None or last.switched_at is None:
        return None
    return max((last.switched_at - last.gate_held_at).total_seconds(), 0.0)


class Metrics:
    """The operator's metrics. Recording from a status can meet surprises, so those methods
    log instead of raising: metrics must never break a reconcile pass."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.gauges: dict[str, Gauge] = {
            "ready": Gauge("derived_views_ready",
                           "1 when the view's alias serves its spec's revision (condition Ready)",
                           VIEW, registry=r),
            "lag_messages": Gauge("derived_views_lag_messages",
                                  "Messages the revision's index is behind the log (sum over "
                                  "partitions)", REVISION, registry=r),
            "lag_seconds": Gauge("derived_views_lag_seconds",
                                 "The revision's staleness: age of the oldest record not yet "
                                 "in its index, from its Kafka timestamp (0 when caught up)",
                                 REVISION, registry=r),
            "lag_eta_seconds": Gauge("derived_views_lag_eta_seconds",
                                     "While behind: seconds the revision needs to drain what "
                                     "its running batch has not read yet (an estimate; before "
                                     "a rate is measured, its build's estimate)",
                                     REVISION, registry=r),
            "lag_batch_read": Gauge("derived_views_lag_batch_read_messages",
                                    "While a batch runs: messages of the lag it has read from "
                                    "the log, not yet committed (from the job's report)",
                                    REVISION, registry=r),
            "bad_records": Gauge("derived_views_bad_records",
                                 "Records the revision's job left out under the view's "
                                 "bad-record policy (skipped or dead-lettered; exact, from its "
                                 "ledger)", REVISION, registry=r),
            "index_rows": Gauge("derived_views_index_rows",
                                "Rows in the revision's index table (PostgreSQL's estimate)",
                                INDEX, registry=r),
        }
        self.cutovers = Counter("derived_views_cutovers", "Alias switches carried out", VIEW,
                                registry=r)
        self.switch_seconds = Histogram(
            "derived_views_cutover_switch_seconds",
            "Duration of the alias switch transaction", VIEW, buckets=SWITCH_BUCKETS, registry=r)
        self.gate_seconds = Histogram(
            "derived_views_cutover_gate_to_switch_seconds",
            "From the cutover gate holding to the alias switched (status.lastCutover)", VIEW,
            buckets=GATE_BUCKETS, registry=r)
        self.check_failures = Counter(
            "derived_views_check_failures", "Cutover check runs that failed or could not run, "
            "by revision and check", (*VIEW, "revision", "check"), registry=r)
        self.errors = Counter("derived_views_reconcile_errors",
                              "Reconcile passes that failed, by the stage that failed",
                              (*VIEW, "stage"), registry=r)
        self.pass_seconds = Histogram("derived_views_reconcile_duration_seconds",
                                      "Duration of one observe-plan-act pass", buckets=PASS_BUCKETS,
                                      registry=r)
        self.offsets_fetches = Counter(
            "derived_views_end_offsets_fetches", "Batched end-offset requests made to Kafka "
            "clusters (one answers every view of a cluster that needs it)", registry=r)
        self.settled_views = Gauge(
            "derived_views_settled_views", "Views off the lag poll: served by a caught-up "
            "running job with nothing pending, passed when their topics' end offsets or their "
            "SparkApplications change (and every DV_SETTLED_POLL_SECONDS)", registry=r)
        self._series: dict[tuple[str, str], set[tuple[str, tuple[str, ...]]]] = {}

    def observe_view(self, namespace: str, view: str, status: DerivedViewStatus,
                     index_rows: Mapping[str, int]) -> None:
        """Replace the view's gauges with those of this pass's status."""
        try:
            samples = view_samples(namespace, view, status, index_rows)
            now = {(s.gauge, s.labels) for s in samples}
            for gauge, labels in self._series.get((namespace, view), set()) - now:
                self.gauges[gauge].remove(*labels)
            for s in samples:
                self.gauges[s.gauge].labels(*s.labels).set(s.value)
            self._series[(namespace, view)] = now
        except Exception:  # pragma: no cover - defensive: never fail a pass for metrics
            log.exception("metrics: could not record %s/%s", namespace, view)

    def forget_view(self, namespace: str, view: str) -> None:
        """Drop every series of a deleted view (its counters and histograms included)."""
        try:
            for gauge, labels in self._series.pop((namespace, view), set()):
                self.gauges[gauge].remove(*labels)
            for metric in (self.cutovers, self.switch_seconds, self.gate_seconds):
                _remove_quietly(metric, namespace, view)
            for stage in list(_stages(self.errors, namespace, view)):
                self.errors.remove(namespace, view, stage)
            for labels in _label_sets(self.check_failures, namespace, view):
                self.check_failures.remove(*labels)
        except Exception:  # pragma: no cover
            log.exception("metrics: could not forget %s/%s", namespace, view)

    def cutover(self, namespace: str, view: str, switch_seconds: float) -> None:
        self.cutovers.labels(namespace, view).inc()
        self.switch_seconds.labels(namespace, view).observe(switch_seconds)

    def gate_to_switch(self, namespace: str, view: str, status: DerivedViewStatus) -> None:
        seconds = gate_to_switch_seconds(status)
        if seconds is not None:
            self.gate_seconds.labels(namespace, view).observe(seconds)

    def check_failed(self, namespace: str, view: str, revision: str, check: str) -> None:
        self.check_failures.labels(namespace, view, revision, check).inc()

    def reconcile_error(self, namespace: str, view: str, stage: str) -> None:
        self.errors.labels(namespace, view, stage).inc()

    def offsets_fetched(self) -> None:
        self.offsets_fetches.inc()

    def count_settled(self, count: Callable[[], int]) -> None:
        """The settled-views gauge reads `count` at each scrape."""
        self.settled_views.set_function(count)

    def reconcile_duration(self, seconds: float) -> None:
        self.pass_seconds.observe(seconds)

    def serve(self, port: int, addr: str = "0.0.0.0") -> None:
        """Serve /metrics over HTTP in a daemon thread."""
        start_http_server(port, addr=addr, registry=self.registry)
        log.info("metrics: serving on %s:%d/metrics", addr, port)


def _remove_quietly(metric: Counter | Histogram, namespace: str, view: str) -> None:
    with contextlib.suppress(KeyError):
        metric.remove(namespace, view)


def _label_sets(counter: Counter, namespace: str, view: str) -> set[tuple[str, ...]]:
    """Label values (in the counter's order) of the counter's series of one view."""
    names = counter._labelnames
    found = set()
    for family in counter.collect():
        for sample in family.samples:
            labels = sample.labels
            if labels.get("view_namespace") == namespace and labels.get("view") == view:
                found.add(tuple(labels[n] for n in names))
    return found


def _stages(errors: Counter, namespace: str, view: str) -> set[str]:
    return {labels[2] for labels in _label_sets(errors, namespace, view)}

