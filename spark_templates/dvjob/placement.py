"""Where a job runs its tasks: on executors, or in its driver when it has none.

A serving view reads a few hundred records a second; a separate executor JVM for that costs
more than the work (measured on the real node: about 380 MB and half the view's CPU, most of
it the driver-executor heartbeat and task RPC). The operator renders a job without executors
with IN_DRIVER_CONF=true (derived_views.core.job.stages); the job then starts its session in
Spark's local mode inside the driver pod, one task thread per driver core, and keeps Spark's
retry of a failed task (local mode's own default is to fail the query at the first failure).
A restart between the two placements resumes from the same checkpoint: the state store's
partitions are the checkpoint's, not the placement's.
"""

from __future__ import annotations

from collections.abc import Callable

from dvjob.config import flag_setting
from dvjob.errors import ConfigError

IN_DRIVER_CONF = "spark.derivedviews.tasksInDriver"
"""true: the job's tasks run in its driver (no executors); unset or false: on executors."""
DEFAULT_TASK_MAX_FAILURES = 4
"""Spark's spark.task.maxFailures default on a cluster, which local mode does not apply."""


def _count(key: str, value: str | None, default: int) -> int:
    if value is None or value.strip() == "":
        return default
    try:
        number = int(value.strip())
    except ValueError:
        number = 0
    if number < 1:
        raise ConfigError(f"{key} is {value!r}: give a whole number of at least 1")
    return number


def in_driver_master(get: Callable[[str], str | None]) -> str | None:
    """The Spark master that runs a job's tasks in its driver (`local[cores,maxFailures]`), or
    None when its tasks run on executors; `get` reads the submitted Spark configuration."""
    if not flag_setting(IN_DRIVER_CONF, get(IN_DRIVER_CONF), default=False):
        return None
    cores = _count("spark.driver.cores", get("spark.driver.cores"), 1)
    failures = _count("spark.task.maxFailures", get("spark.task.maxFailures"),
                      DEFAULT_TASK_MAX_FAILURES)
    return f"local[{cores},{failures}]"


PYTHON_DAEMON_CONF = "spark.python.use.daemon"
"""PySpark's setting (default true) that forks Python workers from one daemon process."""


def one_staging_task(slots: int, daemon: str | None) -> bool:
    """Whether a batch's parallel staging (dvjob.sinks.postgres.stage) runs as one task.

    Without PySpark's worker daemon (a steady job: derived_views.core.job.stages) each task
    starts a Python process of its own, about a second on two cores, whatever its rows. A
    first batch of an aggregate staged its 500 rows in four tasks, one per shuffle partition:
    four Python starts one after another on a driver with one task thread, 5.5 of the batch's
    10 s. With one task slot the partitions run one after another anyway, so one task loses
    nothing. Spark's coalescing keeps the partitions in their order when they prefer no host,
    as a Kafka read's do in the driver's local mode (they prefer executors other than the
    driver), so each key's last row stays last. With the daemon a worker forks in
    milliseconds; with more slots the partitions stay, as coalescing into several tasks
    groups them by host, not in order."""
    return slots <= 1 and not flag_setting(PYTHON_DAEMON_CONF, daemon, default=True)
