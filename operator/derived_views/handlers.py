"""Kopf handlers: thin; every trigger runs the same observe -> plan -> act pass.

Create/update/resume react at once; after each pass, of whatever trigger,
the view's next timed pass is set (PassTimers): at DV_LAG_POLL_SECONDS, or
for a settled view (core.cadence: served, caught up, nothing pending) at
DV_SETTLED_POLL_SECONDS, the safety net for what nothing watches.  A settled
view is passed sooner when its topics' end offsets move (SettledWatch, one
offsets request per cluster per poll) and when one of its SparkApplications
changes.  The timers are not Kopf's: a Kopf timer keeps each view's body and
a task per view for its lifetime, the largest part of the operator's memory
at a thousand views.

Deletion is held by ONE finalizer, `derivedviews.io/cleanup`: Kopf needs a
finalizer of its own for on.delete, so it is told to use the planner's name
instead of adding a second; on.delete reruns the deletion plan (jobs gone,
indexes dropped per deletionPolicy) until the planner releases the view by
removing it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import os
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

import kopf

from derived_views.adapters.kafka.offsets import EndOffsetsCache, OffsetsReader
from derived_views.adapters.kafka.record_times import RecordTimesReader
from derived_views.adapters.kube.client import (
    SPARK_GROUP,
    SPARK_PLURAL,
    SPARK_VERSION,
    Kube,
    new_api_client,
)
from derived_views.adapters.sink_contract import SinkPools
from derived_views.api.constants import (
    FINALIZER,
    GROUP,
    PLURAL,
    VERSION,
    VIEW_LABEL,
    VIEW_NAMESPACE_LABEL,
)
from derived_views.core.cadence import ViewKey, next_pass_in
from derived_views.core.job.sparkapplication import TEMPLATE_PATH, load_template
from derived_views.core.log.kafka_connection import KafkaCluster
from derived_views.core.settings import Settings
from derived_views.process.environment import from_env
from derived_views.process.failpoints import Failpoints
from derived_views.process.malloc import keep_trimmed
from derived_views.process.metrics import Metrics
from derived_views.reconcile.check_runner import CheckRunner
from derived_views.reconcile.deps import Deps
from derived_views.reconcile.pass_timers import PassTimers
from derived_views.reconcile.run import PassOutcome, run_pass
from derived_views.reconcile.settled_watch import SettledWatch

SETTINGS = from_env()
TOPIC_REGISTRATION_SECONDS = 600.0
"""How long the offsets cache keeps fetching a topic after its view last asked: longer than
the time between two passes of one view with many views (EndOffsetsCache)."""
_deps: Deps | None = None
_settled: SettledWatch | None = None


def deps() -> Deps:
    global _deps, _settled
    if _deps is None:
        metrics = Metrics()
        reader, times = OffsetsReader(), RecordTimesReader()

        def forget(cluster: KafkaCluster) -> None:  # no view reads the cluster any more
            reader.forget(cluster)
            times.forget(cluster)

        offsets = EndOffsetsCache(interval=SETTINGS.polling.lag_seconds, fetch=reader,
                                  expire_after=TOPIC_REGISTRATION_SECONDS,
                                  on_fetch=metrics.offsets_fetched, forget=forget)
        _settled = SettledWatch(offsets, _wake, SETTINGS.polling.lag_seconds)
        metrics.count_settled(_settled.count)
        _deps = Deps(kube=Kube(new_api_client()),
                     offsets=offsets, record_times=times,
                     metrics=metrics,
                     settings=with_template(SETTINGS),
                     sink_pools=SinkPools(SETTINGS.sinks.pool_size),
                     check_runner=CheckRunner(SETTINGS.checks.concurrency,
                                              SETTINGS.checks.budget_seconds),
                     failpoints=Failpoints.from_env(os.environ))
    return _deps


def with_template(settings: Settings) -> Settings:
    """The settings with the SparkApplication template's text, read once (from
    DV_SPARK_TEMPLATE, else the checkout's): the planner renders from the text."""
    path = Path(settings.spark.template_path) if settings.spark.template_path else TEMPLATE_PATH
    return dataclasses.replace(settings, spark=dataclasses.replace(
        settings.spark, template=load_template(path)))


def _watch() -> SettledWatch:
    deps()
    assert _settled is not None  # deps() always makes one
    return _settled


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


# Kopf may run a view's timer and its change handler at once; passes for one
# view are serialised and each starts from the latest stored object, so a
# stale body never replays a decision already recorded in status.
_locks: defaultdict[ViewKey, threading.Lock] = defaultdict(threading.Lock)


def _pass(body: kopf.Body) -> bool:
    return _pass_view(body["metadata"]["namespace"], body["metadata"]["name"])


def _pass_view(ns: str, name: str, timed: bool = False) -> bool:
    """One pass of the view as stored now; then its next timed pass is set and the settled
    watch told what the pass found, or, once the view is gone or released, both forget it
    with everything else kept for it."""
    key = (ns, name)
    outcome: PassOutcome | None = None
    try:
        with _locks[key]:
            fresh = deps().kube.get_view(ns, name)
            if fresh is None:  # deleted: forget what was kept for it
                _locks.pop(key, None)
                outcome = PassOutcome(released=True)
            elif timed and fresh["metadata"].get("deletionTimestamp"):
                pass  # on.delete drives a deletion and retries it itself
            else:
                outcome = run_pass(fresh, deps(), _now())
            return outcome is not None and outcome.released
    finally:
        _after_pass(key, outcome)


def _after_pass(key: ViewKey, outcome: PassOutcome | None) -> None:
    """Set the view's next timed pass from the pass's outcome, then tell the settled watch
    (in that order: a wake the watch sends once told is never overwritten by the slow
    timer). No outcome (no pass ran, or it raised): the watch keeps what the last pass told
    it, and the timer follows that."""
    watch = _watch()
    if outcome is None:
        _timers.schedule(key, next_pass_in(watch.is_settled(key), SETTINGS.polling.lag_seconds,
                                           SETTINGS.polling.settled_seconds))
    elif outcome.released:
        watch.unsettled(key)  # first: a wake in between would pass a released view
        _timers.forget(key)
    else:
        _timers.schedule(key, next_pass_in(outcome.settled is not None,
                                           SETTINGS.polling.lag_seconds,
                                           SETTINGS.polling.settled_seconds))
        if outcome.settled is None:
            watch.unsettled(key)
        else:
            watch.settled(key, outcome.settled)


def _timed(key: ViewKey) -> None:
    _pass_view(*key, timed=True)


# Timed passes, and those of settled views woken by their log, run on the timers' few
# threads, outside Kopf's workers: a burst of wakes (a busy topic read by many views) is
# worked off without starving Kopf's own handlers of the CPU.
_timers = PassTimers(_timed, retry_after=SETTINGS.polling.lag_seconds)


def _wake(key: ViewKey) -> None:
    _timers.schedule(key, 0.0)


_QUIET = frozenset({"Handler 'on_job_event' succeeded."})


class _QuietRefresh(logging.Filter):
    """Drop the job-event handler's success line: it fires on every status change of
    every SparkApplication and would be most of the log. Its failures and every other
    handler's lines still come through."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() not in _QUIET


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.persistence.finalizer = FINALIZER
    # Kopf's own calls are bounded like ours (adapters.kube.client.REQUEST_TIMEOUT): a hung API
    # server fails a call, it never holds a handler for good.
    settings.networking.connect_timeout = 10
    settings.networking.request_timeout = 60
    settings.posting.level = 100  # our own events are CamelCase lifecycle events; mute Kopf's
    logging.getLogger("kopf.objects").addFilter(_QuietRefresh())
    _watch().start()
    _timers.start()
    keep_trimmed()
    if SETTINGS.metrics_port:
        try:
            deps().metrics.serve(SETTINGS.metrics_port)
        except OSError as exc:
            # A port clash never heals by retrying: stop the operator with the reason.
            raise kopf.PermanentError(
                f"cannot serve metrics on port {SETTINGS.metrics_port} ({exc.strerror}); "
                "set DV_METRICS_PORT (chart: metrics.port) to a free port, or 0 to turn "
                "metrics off") from exc


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL)
def on_change(body: kopf.Body, **_: Any) -> None:
    _pass(body)


@kopf.on.event(SPARK_GROUP, SPARK_VERSION, SPARK_PLURAL, labels={VIEW_LABEL: kopf.PRESENT})
def on_job_event(body: kopf.Body, **_: Any) -> None:
    """A settled view's job changed (failed, was deleted, restarted): pass it now rather
    than at its slow timer.  Views on the lag poll see it within a poll anyway."""
    labels = body["metadata"]["labels"]
    # in a job namespace, the view's own namespace is on the job (DV_JOB_NAMESPACE)
    key = (labels.get(VIEW_NAMESPACE_LABEL) or body["metadata"]["namespace"], labels[VIEW_LABEL])
    if _watch().is_settled(key):
        _pass_view(*key)


@kopf.on.delete(GROUP, VERSION, PLURAL)
def on_delete(body: kopf.Body, **_: Any) -> None:
    if not _pass(body):
        raise kopf.TemporaryError("deletion not finished yet", delay=2)
