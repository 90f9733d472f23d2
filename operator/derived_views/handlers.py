"""Kopf handlers: thin; every trigger runs the same observe -> plan -> act pass.

A timer refreshes lag at DV_LAG_POLL_SECONDS; create/update/resume react at
once.  Deletion is held by ONE finalizer, `derivedviews.io/cleanup`: Kopf needs
a finalizer of its own for the timer and on.delete, so it is told to use the
planner's name instead of adding a second; on.delete reruns the deletion plan
(jobs gone, indexes dropped per deletionPolicy) until the planner releases the
view by removing it.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

import kopf

from derived_views.adapters.kafka_offsets import EndOffsetsCache
from derived_views.adapters.kube import Kube, new_api_client
from derived_views.adapters.sink import SinkPools
from derived_views.api.constants import FINALIZER, GROUP, PLURAL, VERSION
from derived_views.metrics import Metrics
from derived_views.reconcile import Deps, reconcile
from derived_views.render.sparkapplication import TEMPLATE_PATH, load_template
from derived_views.settings import from_env, operator_config

SETTINGS = from_env()
TOPIC_REGISTRATION_SECONDS = 600.0
"""How long the offsets cache keeps fetching a topic after its view last asked: longer than
the time between two passes of one view with many views (EndOffsetsCache)."""
_deps: Deps | None = None


def deps() -> Deps:
    global _deps
    if _deps is None:
        metrics = Metrics()
        _deps = Deps(kube=Kube(new_api_client()),
                     offsets=EndOffsetsCache(interval=SETTINGS.lag_poll_seconds,
                                             expire_after=TOPIC_REGISTRATION_SECONDS,
                                             on_fetch=metrics.offsets_fetched),
                     metrics=metrics,
                     config=operator_config(SETTINGS, load_template(
                         Path(SETTINGS.spark_template) if SETTINGS.spark_template
                         else TEMPLATE_PATH)),
                     sink_pools=SinkPools(SETTINGS.sink_pool_size))
    return _deps


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


# Kopf may run a view's timer and its change handler at once; passes for one
# view are serialised and each starts from the latest stored object, so a
# stale body never replays a decision already recorded in status.
_locks: defaultdict[str, threading.Lock] = defaultdict(threading.Lock)


def _pass(body: kopf.Body) -> bool:
    ns, name = body["metadata"]["namespace"], body["metadata"]["name"]
    with _locks[f"{ns}/{name}"]:
        fresh = deps().kube.get_view(ns, name)
        if fresh is None:
            return True
        return reconcile(fresh, deps(), _now())


class _QuietRefresh(logging.Filter):
    """Drop the refresh timer's success line: it fires every lag poll for every
    view and would be most of the log. Its failures and every other handler's
    lines still come through."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != "Timer 'refresh' succeeded."


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.persistence.finalizer = FINALIZER
    # Kopf's own calls are bounded like ours (adapters.kube.REQUEST_TIMEOUT): a hung API
    # server fails a call, it never holds a handler for good.
    settings.networking.connect_timeout = 10
    settings.networking.request_timeout = 60
    settings.posting.level = 100  # our own events are CamelCase lifecycle events; mute Kopf's
    logging.getLogger("kopf.objects").addFilter(_QuietRefresh())
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


@kopf.timer(GROUP, VERSION, PLURAL, interval=SETTINGS.lag_poll_seconds, idle=0)
def refresh(body: kopf.Body, **_: Any) -> None:
    if body.get("metadata", {}).get("deletionTimestamp"):
        return
    _pass(body)


@kopf.on.delete(GROUP, VERSION, PLURAL)
def on_delete(body: kopf.Body, **_: Any) -> None:
    if not _pass(body):
        raise kopf.TemporaryError("deletion not finished yet", delay=2)
