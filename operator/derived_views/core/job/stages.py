"""A job's stage: sized for the backlog its revision replays, then for following the log.

A build reads every record its topics hold when it starts (its backlog), then keeps up with
the records that arrive. The two want different jobs. A replay is work to be done as fast as
the installation allows: executors in proportion to the backlog, and PySpark's worker daemon,
which forks a Python worker per task at once (staging a PostgreSQL mirror in parallel). A
serving job is paid for as long as the view lives, so it runs with `spec.spark.executor` and
without the daemon: the daemon and its forked workers, once started by a replay, stay resident
for the job's life (measured: 597 -> 485 MB resident for a serving view; without the daemon
a mirror replay is 40 % slower, so that setting is the steady stage's only). By default
(`spec.spark.executor.instances` 0) a serving job has no executors: its tasks run in its
driver (IN_DRIVER_CONF), as a separate executor JVM cost a view on the real node about 380 MB
and most of its CPU (heartbeats and task RPC) for a few hundred records a second.

- A build whose backlog reaches `SparkSettings.replay_min_backlog` starts in the `replay`
  stage with `replay_executors_for` executors (or `spec.spark.replay.executor.instances`).
  A smaller one starts `steady`: its replay takes less than a restart would save, and a
  small view stays one job start from apply to Ready.
- Once its index is hydrated (core.log.history: it holds every record of the backlog it
  started with), the revision's stage becomes `steady` and its job is restarted from its
  checkpoint with the steady size (the job settings hash differs: the planner's
  apply_job_settings). This happens BEFORE readers switch: a replay-stage job is never
  promoted, nor one whose new driver has not committed while records wait
  (core.planner.rules.promotion), so the restart's gap (a new driver, 15-30 s) delays the
  switch and never the served index's freshness.
- A revision that has hydrated is steady for good: a job restarted later (a failure, a
  settings change, a rollback) starts steady. A rebuild from offset 0 decides afresh.

Pure: the planner records the stage in the revision's status and the renderer reads it.
"""

from __future__ import annotations

from dataclasses import dataclass

from derived_views.api.spec import DerivedViewSpec
from derived_views.api.status import JobStage, RevisionStatus
from derived_views.core.settings import SparkSettings

STEADY_SPARK_CONF = {
    "spark.python.use.daemon": "false",
    "spark.buffer.pageSize": "1m",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.ui.retainedJobs": "50",
    "spark.ui.retainedStages": "50",
    "spark.ui.retainedTasks": "500",
    "spark.sql.ui.retainedExecutions": "50",
}
"""Spark settings of the steady stage only, under the view's own `spec.spark.sparkConf`.

A serving job runs for months, a micro-batch every few seconds, and Spark's status store keeps
by default the last 1,000 jobs, stages and SQL executions and 100,000 tasks, each with its
plan and metrics: a heap that grows for the first hours of a job's life, which no benchmark
window sees. Fifty of each (a few minutes of batches) is what someone looking at a live job
reads; the web UI and its REST API, which monitoring and the tests read, stay on.

`spark.buffer.pageSize` 1 MB: Spark sizes the pages of its hash aggregation and sorts from
the heap and the task slots (16 MB for a 1 GB driver of one slot), and a page bigger than the
steady JVM's young generation (STEADY_JAVA_OPTIONS) is allocated straight into the old one,
where only a full collection frees it. A serving batch of a few hundred records fills a
fraction of one page; a larger one (a backlog after an outage) takes more pages, allocated as
it needs them. Measured (benchmarks/steady_cost.py, one view at 150 events/s): heap committed
168 -> 127 MB, resident 443 -> 402 MB; a 1,000,000-record backlog in the steady stage reached
Ready in 50.2 s against 50.5 s with the default page.

`spark.sql.codegen.factoryMode` NO_CODEGEN: the projections and filters Spark builds inside a
task, outside whole-stage code generation, are interpreted. The parse's are such (`from_json`
has no generated form, so its Project and the bad-record Filter stay out of the generated
stage), and their source was built again for every task of every batch (Spark caches the
compiled class, not the work of writing its source, which read the SQL settings anew each
time): 27 % of a serving driver's task thread. A batch of a few hundred rows gains nothing
from compiled code; whole-stage code generation is unchanged. Spark marks the setting
internal; its expression tests hold both paths to the same results. Measured
(steady_cost.py, alternating runs): resident 389-392 against 398-404 MB, young collections
16 against 20 per 10 s, driver cores within the runs' noise (0.150-0.156 against
0.116-0.182); a 1,000,000-record backlog in the steady stage reached Ready in 45.4 s with it
and without it."""
STEADY_JAVA_OPTIONS = ("-XX:+UseSerialGC -Xms32m -Xmn16m -XX:MinHeapFreeRatio=20 "
                       "-XX:MaxHeapFreeRatio=40 -XX:TieredStopAtLevel=1 "
                       "-XX:ReservedCodeCacheSize=128m")
"""JVM settings of the steady stage's driver and executors, after the template's (the last of
a repeated flag wins). A serving job allocates little per batch, yet its collector sized the
young generation at a third of the heap and kept old-generation headroom of 30 %: 190 MB
committed for 93 MB live. A young generation fixed at 16 MB and 20-40 % headroom keep the
heap near what it holds; the limit (driver.memory) is unchanged, so a large batch after an
outage still fits. Measured (benchmarks/steady_cost.py, one view at 150 events/s): resident
476 -> 429 MB, no change in cores (0.095 -> 0.096). Headroom of 5-20 % was measured too: a
driver running its tasks (no executors) then filled its old generation every few seconds,
80 full collections in its first 7 minutes on the real node against 30 with 20-40 %, and
cost 0.181 instead of 0.155 core for 14 MB less (656 against 670 MB). A replay allocates far
faster and keeps the template's settings. The executors, whose collector the template leaves
to the JVM's default, get the driver's serial collector too: a serving job's tasks are small.

`-XX:TieredStopAtLevel=1` compiles with C1 alone. A serving job runs the same few plans for
its life, yet C2 was still compiling 6 minutes in: its compiler thread was the driver's
busiest (0.034 core), and a driver's code cache had grown past 57 MB. Measured on the real
node over 300 s: 0.155 -> 0.106 core, 670 -> 590 MB; the task thread's own CPU rose 0.028 ->
0.033. The cost is a slower catch-up: a 1,000,000-record backlog replayed in the steady stage
reached Ready in 45.8 instead of 40.9 s (the replay stage, from DV_REPLAY_MIN_BACKLOG, keeps
C2).

`-XX:ReservedCodeCacheSize=128m`: with C1 alone the JVM reserves 48 MB for compiled code (240
MB with both compilers), and a serving driver's C1 code reaches it 8-9 minutes after its
start: the JVM then flushes the code cache (used 44 -> 30 MB) and compiles the flushed
methods again, and keeps doing so for as long as the job runs, a cost no window shortly after
Ready sees. Measured (benchmarks/steady_cost.py --warmup 480 --window 300, two views side by
side, Ready + 8 to 13 minutes): 48 MB, job 0.110 core (compiler 0.016, the flushing in the
JVM's other threads 0.021), resident 415 MB; 128 MB, job 0.074 core (compiler 0.001),
resident 398 MB, its code cache 46 MB at 13 minutes. The reservation is address space: the
JVM commits the code cache as code fills it."""


STATE_PARTITIONS_KEY = "spark.sql.shuffle.partitions"
"""Rendered as the job's task slots (JobSize.task_slots), under the template's and the view's
settings: one partition per task the job runs at once.

An aggregate's state lives in this many partitions, and Spark fixes the number when a
revision's checkpoint is created (later runs take it from the checkpoint, whatever they are
given). Every partition costs every micro-batch a task, a state store load and commit, and a
delta file written to the checkpoint store, whether its keys changed or not; more partitions
than task slots only queue behind each other. A serving view's job runs its tasks in its
driver, on one core by default, and with 4 partitions (the default before) the three its one
slot could not run at once anyway cost an eighth to a fifth of its cores. Measured
(benchmarks/steady_cost.py, one view at 150 events/s, stand-in): 4 partitions 0.109 and
0.116 core per view, 1 partition 0.087-0.105 in five runs (its tasks 0.030 -> 0.018-0.022,
its collector 0.010-0.013 -> 0.005-0.008, its share of the checkpoint store 0.008-0.013 ->
0.005-0.006); ten views 0.110 -> 0.103 and 0.107 per view; on the real node 0.148 -> 0.116
core and 515 -> 492 MB (332 -> 211 threads).

A revision that starts in the replay stage gets its executors' cores, so its replay's
aggregation stays as parallel as its executors, and it keeps that number once it serves: a
view with a backlog that large pays for it. A view that expects to grow into more executors
sets the key in spec.spark.sparkConf."""

IN_DRIVER_CONF = "spark.derivedviews.tasksInDriver"
"""The job's setting (dvjob.placement) that runs its tasks in its driver, Spark's local mode
in the driver pod: rendered "true" for a job of no executors, else "false", after the
author's sparkConf. Spark itself has no such setting: spark-submit refuses 0 executors, and
the Spark Operator submits every job with a cluster master."""


@dataclass(frozen=True)
class JobSize:
    """What a job is rendered with for its stage: `executors` replaces spec.spark.executor's
    instances in the replay stage; None runs the spec's."""

    stage: JobStage
    executors: int | None = None

    def executors_of(self, spec: DerivedViewSpec) -> int:
        """Executor pods of the job (0: its tasks run in the driver)."""
        return spec.spark.executor.instances if self.executors is None else self.executors

    def task_slots(self, spec: DerivedViewSpec) -> int:
        """Tasks the job runs at once: its executors' cores, or its driver's without any."""
        executors = self.executors_of(spec)
        if executors == 0:
            return spec.spark.driver.cores
        return executors * spec.spark.executor.cores

    def state_partitions_conf(self, spec: DerivedViewSpec) -> dict[str, str]:
        """The job's shuffle (and state store) partitions unless the installation's template
        or the view sets them: see STATE_PARTITIONS_KEY."""
        return {STATE_PARTITIONS_KEY: str(self.task_slots(spec))}

    @property
    def spark_conf(self) -> dict[str, str]:
        """The stage's own Spark settings."""
        return dict(STEADY_SPARK_CONF) if self.stage is JobStage.Steady else {}

    def java_options(self, template: str | None) -> str | None:
        """The JVM settings of the stage's driver and executors: the template's, then the
        stage's own."""
        own = STEADY_JAVA_OPTIONS if self.stage is JobStage.Steady else None
        return " ".join(o for o in (template, own) if o) or None


STEADY = JobSize(JobStage.Steady)


def executors_said(executors: int) -> str:
    """A job's executors in a message: none means its tasks run in the driver."""
    if executors == 0:
        return "no executors: its tasks run in the driver"
    return f"{executors} executor{'s' if executors != 1 else ''}"


def replay_executors_for(backlog: int, steady_instances: int, spark: SparkSettings) -> int:
    """Executors for a replay of `backlog` records: one per `replay_records_per_executor`
    (rounded up), at most `replay_max_executors`, never fewer than the steady stage runs."""
    wanted = -(-backlog // spark.replay_records_per_executor)
    return max(steady_instances, min(wanted, spark.replay_max_executors))


def stage_at_start(backlog: int | None, hydrated: bool, steady_instances: int,
                   spark: SparkSettings) -> tuple[JobStage | None, int | None]:
    """(stage, replay executors) of a build whose stage is not decided yet, as its job is
    created: steady once hydrated; undecided (None: the job runs steady) while the backlog
    is not known; replay from `replay_min_backlog` records to read, else steady."""
    if hydrated:
        return JobStage.Steady, None
    if backlog is None:
        return None, None
    if backlog < spark.replay_min_backlog:
        return JobStage.Steady, None
    return JobStage.Replay, replay_executors_for(backlog, steady_instances, spark)


def planned_size(spec: DerivedViewSpec, backlog: int | None, spark: SparkSettings) -> JobSize:
    """The size a new build's first job would start with, for `backlog` records to read (None:
    unknown, so steady, as the planner starts it); what `dv plan` shows."""
    stage, executors = stage_at_start(backlog, False, spec.spark.executor.instances, spark)
    if stage is not JobStage.Replay:
        return STEADY
    named = spec.spark.replay.executor if spec.spark.replay is not None else None
    return JobSize(JobStage.Replay, named.instances if named is not None else executors)


def size_of(spec: DerivedViewSpec, record: RevisionStatus) -> JobSize:
    """The size a revision's job is rendered with: its recorded stage (none recorded: steady,
    as every job ran before stages); in the replay stage the spec's replay executors, else
    those its backlog asked for, never fewer than the steady stage's."""
    if record.stage is not JobStage.Replay:
        return STEADY
    steady = spec.spark.executor.instances
    named = spec.spark.replay.executor if spec.spark.replay is not None else None
    if named is not None:
        return JobSize(JobStage.Replay, named.instances)
    return JobSize(JobStage.Replay, max(record.replay_executors or steady, steady))


def replay_done(record: RevisionStatus) -> bool:
    """A replay-stage revision whose index holds its backlog: its job goes steady now."""
    return record.stage is JobStage.Replay and record.hydrated_at is not None
