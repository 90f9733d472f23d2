"""One view's preview from a manifest's spec document, and the exit code of many.

The spec is validated here, as the operator's pass validates it (an InvalidSpec refusal with
pydantic's messages, core.judges.unjudged); what the API server refuses on a server-side dry
run is the shell's to read and is handed in as a refusal. Exit codes, for CI: 0 nothing
replays and nothing is refused, 2 a replay or another change is planned, 1 a refusal.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from derived_views.api.spec import DerivedViewSpec
from derived_views.core import reasons
from derived_views.core.job.stages import STEADY, planned_size
from derived_views.core.judges.transform import Refusal
from derived_views.core.judges.unjudged import invalid_spec_message
from derived_views.core.log.build_rates import default_rate
from derived_views.core.log.kafka_connection import SourceOffsets
from derived_views.core.planner.context import recorded_active
from derived_views.core.preview.change import (
    Change,
    ChangeKind,
    LiveView,
    change_of,
    kept_reader_schemas,
)
from derived_views.core.preview.footprint import (
    Footprint,
    side_by_side,
    sink_space,
    spark_footprint,
)
from derived_views.core.preview.reads import SourceReads
from derived_views.core.preview.refusals import judge_spec
from derived_views.core.preview.replay_cost import ReplayCost, replay_cost
from derived_views.core.revision import revision_of
from derived_views.core.settings import Settings

EXIT_NOTHING = 0
EXIT_REFUSED = 1
EXIT_CHANGES = 2


@dataclass(frozen=True)
class Preview:
    """What applying one view's manifest would do."""

    namespace: str
    name: str
    change: Change | None
    """None when the spec does not validate."""
    refusals: tuple[Refusal, ...]
    not_judged: tuple[str, ...]
    cost: ReplayCost | None
    """Only for a replay."""
    footprint: Footprint | None = None
    """A replay's, or a settings change's that restarts the jobs: what the jobs ask, how
    long two run side by side, the sink space (its size for the shell to read)."""

    @property
    def refused(self) -> bool:
        return bool(self.refusals)


def preview_of(document: Mapping[str, Any], namespace: str, name: str, live: LiveView | None,
               settings: Settings, now: dt.datetime,
               server_refusal: Refusal | None = None,
               reads: SourceReads | None = None) -> Preview:
    """The preview of applying the spec `document` as `namespace/name` over `live` (None: a
    new view), under the installation's `settings`; `server_refusal`: the API server's;
    `reads`: what the shell read of the view's sources (None: nothing)."""
    server = (server_refusal,) if server_refusal is not None else ()
    try:
        spec = DerivedViewSpec.model_validate(document)
    except ValidationError as exc:
        invalid = Refusal(reasons.INVALID_SPEC, invalid_spec_message(exc))
        return Preview(namespace, name, None, (*server, invalid), (), None)
    change = change_of(spec, live, settings, now)
    status = live.status if live is not None else None
    active = recorded_active(status, None) if status is not None else None
    judged = judge_spec(spec, namespace, settings, change.revision, active,
                        kept_reader_schemas(status) if status is not None else {}, reads)
    unread = reads.not_read if reads is not None else ()
    cost = None
    if change.kind is ChangeKind.REPLAY:
        log = reads.log if reads is not None else None
        cost = replay_cost(spec, status, default_rate(settings.spark), revision=change.revision,
                           log=log)
        unread += _log_unread(log, status is not None)
    return Preview(namespace, name, change, (*server, *judged.refusals),
                   (*unread, *judged.not_judged), cost,
                   footprint_of(spec, change, cost, live, settings, namespace, name,
                                refused=bool(server or judged.refusals)))


def _log_unread(log: SourceOffsets | None, live: bool) -> tuple[str, ...]:
    """Why a replay's cost is not from the log, when it was tried; a cluster the policy does
    not list is never connected to, and its refusal says so already."""
    problem = log.problem() if log is not None else None
    if problem is None or problem[0] == reasons.POLICY_VIOLATION:
        return ()
    fallback = "the cost is from the live view's status" if live else "the records are unknown"
    return (f"the source log (records per partition, whether it holds its beginning): not "
            f"read ({problem[1]}); {fallback}",)


def footprint_of(spec: DerivedViewSpec, change: Change, cost: ReplayCost | None,
                 live: LiveView | None, settings: Settings, namespace: str, name: str, *,
                 refused: bool) -> Footprint | None:
    """The footprint of a replay (beside the active, if any) or of restarted jobs; None for
    changes that start no job."""
    replays = change.kind is ChangeKind.REPLAY
    if not replays and not (change.kind is ChangeKind.SETTINGS and change.restarts_jobs):
        return None
    status = live.status if live is not None else None
    known = kept_reader_schemas(status) if status is not None else {}
    beside = replays and change.active is not None
    size = planned_size(spec, cost.records if cost is not None else None, settings.spark) \
        if replays else STEADY
    spark = spark_footprint(spec, settings, namespace, name, change.revision, known,
                            beside_active=beside, size=size)
    if live is not None and live.spec is not None and live.spec.spark != spec.spark:
        running = spark_footprint(live.spec, settings, namespace, name,
                                  revision_of(live.spec), known, beside_active=False).job
        spark = dataclasses.replace(spark, running=running)
    if not replays:
        return Footprint(spark, None, None)
    overlap = (side_by_side(spec, settings, cost.seconds() if cost is not None else None)
               if beside else None)
    return Footprint(spark, overlap, sink_space(spec, status, change.revision, change.active,
                                                refused=refused))


def exit_code_of(previews: Iterable[Preview]) -> int:
    """1 when any view is refused, else 2 when any changes, else 0."""
    shown = list(previews)
    if any(p.refused for p in shown):
        return EXIT_REFUSED
    if any(p.change is not None and p.change.kind is not ChangeKind.NONE for p in shown):
        return EXIT_CHANGES
    return EXIT_NOTHING
