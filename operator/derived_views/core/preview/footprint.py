"""What a replay holds while it runs: the Spark resources of its job (and of both jobs while
the active's keeps serving), how long the two jobs run side by side, and the sink space.

The resources are read from the SparkApplication the operator would render for the
revision (core.job.sparkapplication: spec.spark over the installation's defaults and the
template), then sized as Spark on Kubernetes sizes its pods: the memory asked is
spark.<role>.memory plus its overhead (spark.<role>.memoryOverhead, else the overhead factor
times the memory, at least the minimum; Python jobs' factor is 0.4 unless set), and an
executor's PySpark and off-heap memory when set. Both jobs of a view are rendered from the
same spec.spark (core.planner.phases.candidate.apply_job_settings restarts the active's when
its settings change), so while both run they ask twice one job's resources.

The lifecycle, as the planner runs it (core.planner): the candidate's job replays beside the
active's; once it has caught up, its gate must hold for stableForSeconds and its cutover
checks pass (run once the gate holds, each run within the installation's check budget);
`manual` mode then waits for the promote annotation. At the cutover the old revision's job
keeps following the log for keepPreviousRunningSeconds (at most retainPreviousSeconds:
core.planner.readings.follow_seconds), then stops; its index is dropped once
retainPreviousSeconds have passed since the cutover. Both indexes exist from the candidate's
start until then.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from derived_views.api.spec import DerivedViewSpec
from derived_views.api.status import DerivedViewStatus, JobStage, Phase
from derived_views.core import naming
from derived_views.core.job.sparkapplication import render_spark_application
from derived_views.core.job.stages import IN_DRIVER_CONF, STEADY, JobSize
from derived_views.core.judges.source_schema import ReaderSchemas
from derived_views.core.planner.readings import follow_seconds
from derived_views.core.settings import Settings

NON_JVM_OVERHEAD_FACTOR = 0.4
"""Spark on Kubernetes: a Python job's default memory overhead factor (its Python workers
live outside the JVM heap); JVM jobs get 0.1."""
JVM_OVERHEAD_FACTOR = 0.1
MIN_OVERHEAD = "384m"
"""spark.{driver,executor}.minMemoryOverhead's default (Spark 4.0; fixed before it)."""
PLAN_UID = "dv-plan"
"""The owner uid a rendering for dv plan carries: not the view's (a new view has none yet);
resources do not depend on it."""
_SIZE = re.compile(r"([0-9]+)([a-z]*)")
_MIB_PER_UNIT = {"b": 1 / 2**20, "k": 1 / 2**10, "kb": 1 / 2**10, "m": 1, "mb": 1,
                 "g": 2**10, "gb": 2**10, "t": 2**20, "tb": 2**20, "p": 2**30, "pb": 2**30}


def spark_mib(size: str) -> int:
    """A size in Spark's notation (512m, 2g, 1024: MiB without a unit) in whole MiB, rounded
    down as Spark rounds it; ValueError when it is not one."""
    found = _SIZE.fullmatch(size.strip().lower())
    if found is None or found.group(2) not in ("", *_MIB_PER_UNIT):
        raise ValueError(f"{size!r} is not a size in Spark's notation (e.g. 512m, 2g)")
    number, unit = found.groups()
    return int(int(number) * _MIB_PER_UNIT.get(unit, 1))


@dataclass(frozen=True)
class PodShape:
    """The pods of one role (the driver, the executors) as Spark asks Kubernetes for them."""

    instances: int
    cores: int
    """Per pod (spark.<role>.cores)."""
    memory_mib: int
    """Per pod: the JVM's heap (spark.<role>.memory)."""
    overhead_mib: int
    """Per pod, asked beyond the heap: the memory overhead, and for executors the PySpark and
    off-heap memory when set."""

    @property
    def pod_memory_mib(self) -> int:
        return self.memory_mib + self.overhead_mib


@dataclass(frozen=True)
class JobResources:
    """What one revision's job asks: its driver and its executors."""

    driver: PodShape
    executor: PodShape

    @property
    def pods(self) -> int:
        return self.driver.instances + self.executor.instances

    @property
    def cores(self) -> int:
        return self.driver.instances * self.driver.cores + self.executor.instances * self.executor.cores

    @property
    def memory_mib(self) -> int:
        return (self.driver.instances * self.driver.pod_memory_mib
                + self.executor.instances * self.executor.pod_memory_mib)


def _factor(conf: Mapping[str, str], role: str, python: bool) -> float:
    """Spark's overhead factor of a role: spark.<role>.memoryOverheadFactor, else
    spark.kubernetes.memoryOverheadFactor (which the driver hands its executors), else the
    default for the job's language."""
    for key in (f"spark.{role}.memoryOverheadFactor", "spark.kubernetes.memoryOverheadFactor"):
        if key in conf:
            return float(conf[key])
    return NON_JVM_OVERHEAD_FACTOR if python else JVM_OVERHEAD_FACTOR


def _pod(body: Mapping[str, Any], conf: Mapping[str, str], role: str, python: bool) -> PodShape:
    pod = body.get(role) or {}
    memory = spark_mib(str(pod.get("memory") or conf.get(f"spark.{role}.memory", "1g")))
    fixed = pod.get("memoryOverhead") or conf.get(f"spark.{role}.memoryOverhead")
    if fixed is not None:
        overhead = spark_mib(str(fixed))
    else:
        least = spark_mib(conf.get(f"spark.{role}.minMemoryOverhead", MIN_OVERHEAD))
        overhead = max(int(_factor(conf, role, python) * memory), least)
    if role == "executor":
        if python and "spark.executor.pyspark.memory" in conf:
            overhead += spark_mib(conf["spark.executor.pyspark.memory"])
        if conf.get("spark.memory.offHeap.enabled", "false").lower() == "true":
            overhead += spark_mib(conf.get("spark.memory.offHeap.size", "0"))
    if role != "executor":
        instances = 1
    elif conf.get(IN_DRIVER_CONF) == "true":
        instances = 0  # its tasks run in the driver: no executor pods
    else:
        instances = int(pod.get("instances") or 1)
    return PodShape(instances, int(pod.get("cores") or 1), memory, overhead)


def job_resources(manifest: Mapping[str, Any]) -> JobResources:
    """The resources a rendered SparkApplication asks. Its `memoryOverhead` fields and
    `memoryOverheadFactor` (a template's) are the Spark Operator's names for the sparkConf
    keys above, and win over them as its spark-submit arguments do."""
    body = manifest.get("spec") or {}
    conf = {str(k): str(v) for k, v in (body.get("sparkConf") or {}).items()}
    if body.get("memoryOverheadFactor") is not None:
        conf["spark.kubernetes.memoryOverheadFactor"] = str(body["memoryOverheadFactor"])
    python = body.get("type") in ("Python", "R")
    return JobResources(_pod(body, conf, "driver", python), _pod(body, conf, "executor", python))


@dataclass(frozen=True)
class SparkFootprint:
    """One job's resources and, while both run, the two jobs' together."""

    job: JobResources | None
    """None when the SparkApplication could not be rendered (`not_rendered` says why)."""
    side_by_side: bool
    """The active's job serves while this one runs: twice `job` in all."""
    not_rendered: str = ""
    running: JobResources | None = None
    """What the view's running jobs ask now, from the live spec, when that differs (the apply
    restarts them with `job`'s)."""
    steady: JobResources | None = None
    """The steady stage's, when `job` is a replay sized apart from it: what the job restarts
    with before the switch, and what the active's job asks beside it."""

    @property
    def both(self) -> tuple[int, int] | None:
        """(cores, MiB) of the two jobs while both run: this one and the active's (steady)."""
        if self.job is None or not self.side_by_side:
            return None
        other = self.steady or self.job
        return self.job.cores + other.cores, self.job.memory_mib + other.memory_mib


def spark_footprint(spec: DerivedViewSpec, settings: Settings, namespace: str, view: str,
                    revision: str, reader_schemas: ReaderSchemas, *, beside_active: bool,
                    size: JobSize = STEADY) -> SparkFootprint:
    """The resources of `revision`'s job as the operator would render it now, in the stage
    `size` says (core.job.stages: a replay sized for its backlog restarts steady before the
    switch; the active's job is steady)."""
    base = spec.spark.checkpoint_base or settings.checkpoints.base

    def resources(sized: JobSize) -> JobResources:
        return job_resources(render_spark_application(
            settings.spark.template, settings=settings, namespace=namespace, view=view,
            uid=PLAN_UID, spec=spec, revision=revision,
            checkpoint_location=naming.checkpoint_location(base, namespace, view, revision),
            reader_schemas=reader_schemas, size=sized))

    try:
        job = resources(size)
        steady = resources(STEADY) if size.stage is JobStage.Replay else None
        return SparkFootprint(job, beside_active, steady=steady)
    except (ValueError, LookupError) as exc:  # a template, or a reader schema not known
        return SparkFootprint(None, beside_active, f"the SparkApplication was not rendered: {exc}")


@dataclass(frozen=True)
class SideBySide:
    """From the candidate job's start until the active's job stops."""

    replay: tuple[int, int] | None
    """The replay's expected time (ReplayCost.seconds); None while the records are unknown."""
    after_replay: tuple[int, int | None]
    """What the lifecycle adds once the replay has caught up, fast to slow; a slow end of
    None: no bound (manual mode waits for a person's promotion)."""
    assumptions: str

    @property
    def seconds(self) -> tuple[int, int | None] | None:
        """The whole overlap, fast to slow; None while the replay's time is unknown."""
        if self.replay is None:
            return None
        low, high = self.after_replay
        return (self.replay[0] + low, None if high is None else self.replay[1] + high)


def side_by_side(spec: DerivedViewSpec, settings: Settings, replay: tuple[int, int] | None
                 ) -> SideBySide:
    """How long a new revision's job and the active's run together: the replay, then the
    gate held for stableForSeconds while the cutover checks run (each run within the check
    budget), then keepPreviousRunningSeconds after the cutover; the slow end adds a pass
    (DV_LAG_POLL_SECONDS) for each step the operator notices on its next pass."""
    cutover = spec.cutover
    checks = cutover.checks is not None and cutover.checks.configured()
    follow = follow_seconds(cutover)
    poll = settings.polling.lag_seconds
    judged = max(cutover.stable_for_seconds,
                 int(settings.checks.budget_seconds) if checks else 0)
    passes = 3 if follow > 0 else 2  # the gate seen, the switch, the follower stopped
    low = cutover.stable_for_seconds + follow
    high = None if cutover.mode == "manual" else judged + follow + int(passes * poll)
    parts = [f"stableForSeconds {cutover.stable_for_seconds} s"]
    if checks:
        parts.append(f"cutover checks within {settings.checks.budget_seconds:g} s "
                     "(DV_CHECK_BUDGET_SECONDS)")
    if cutover.mode == "manual":
        parts.append("then until someone promotes it (mode: manual)")
    parts.append(f"the old job follows the log {follow} s after the cutover "
                 "(keepPreviousRunningSeconds)" if follow else
                 "the old job stops at the cutover (keepPreviousRunningSeconds 0)")
    deadline = (f"; a candidate not promoted within deadlineSeconds {cutover.deadline_seconds} s "
                "is torn down instead" if cutover.deadline_seconds is not None else "")
    return SideBySide(replay, (low, high),
                      f"the replay, then {', '.join(parts)}; up to {passes} passes of "
                      f"{poll:g} s (DV_LAG_POLL_SECONDS); records arriving meanwhile not "
                      f"counted{deadline}")


@dataclass(frozen=True)
class SinkSpace:
    """The indexes a replay holds in the sink: the active's (read), the candidate's (estimated
    as the active's), both from the candidate's start until the old index is dropped."""

    kind: str
    schema: str
    """Where the indexes are (PostgreSQL's schema; "" for OpenSearch)."""
    secret: str
    """The sink Secret the operator connects with."""
    candidate_index: str
    active_index: str | None
    """None: a new view, nothing to compare with."""
    retain_seconds: int
    """The old index is dropped this long after the cutover (retainPreviousSeconds)."""
    retained: tuple[str, ...] = ()
    """Indexes of replaced revisions the status still keeps (until their own retention ends),
    not counted in the peak."""
    active_bytes: int | None = None
    not_read: str = ""
    """Why `active_bytes` is unknown."""

    @property
    def peak_bytes(self) -> int | None:
        """The active's index and the candidate's, estimated at the active's size."""
        return None if self.active_bytes is None else 2 * self.active_bytes

    def with_size(self, size: int | None, why: str = "") -> SinkSpace:
        """This space with the active index's size as read (None: not read, `why`)."""
        return replace(self, active_bytes=size, not_read="" if size is not None else why)


def sink_space(spec: DerivedViewSpec, status: DerivedViewStatus | None, revision: str,
               active: str | None, *, refused: bool) -> SinkSpace:
    """The sink space of replaying `revision` beside `active`; its size is for the shell to
    read (SinkSpace.with_size), except for a refused view, whose sink dv plan does not reach."""
    alias = spec.sink.alias
    retained = tuple(r.index for r in (status.revisions if status is not None else ())
                     if r.phase == Phase.Retiring and r.revision not in (active, revision))
    space = SinkSpace(spec.sink.kind, spec.sink.db_schema, spec.sink.secret_ref.name,
                      naming.index_table(alias, revision),
                      naming.index_table(alias, active) if active is not None else None,
                      spec.cutover.retain_previous_seconds, retained)
    if refused and active is not None:
        return space.with_size(None, "the view is refused: dv plan does not connect to its sink")
    return space


@dataclass(frozen=True)
class Footprint:
    spark: SparkFootprint
    side_by_side: SideBySide | None
    """None for a new view: no active job runs beside the candidate's."""
    sink: SinkSpace | None
    """None when nothing is built beside the active (a settings change restarting jobs)."""
