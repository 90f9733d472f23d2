"""Where a job runs its tasks: the master its session starts with, from what it was given."""

from __future__ import annotations

import pytest

from dvjob.errors import ConfigError
from dvjob.placement import in_driver_master, one_staging_task


@pytest.mark.parametrize(("conf", "master"), [
    ({}, None),  # a job rendered before placements: on its executors
    ({"spark.derivedviews.tasksInDriver": "false"}, None),
    ({"spark.derivedviews.tasksInDriver": "true"}, "local[1,4]"),
    ({"spark.derivedviews.tasksInDriver": " TRUE ", "spark.driver.cores": "3"}, "local[3,4]"),
    ({"spark.derivedviews.tasksInDriver": "true", "spark.driver.cores": "2",
      "spark.task.maxFailures": "8"}, "local[2,8]"),
])
def test_the_master_of_a_jobs_session(conf: dict[str, str], master: str | None) -> None:
    assert in_driver_master(conf.get) == master

@pytest.mark.parametrize(("conf", "message"), [
    ({"spark.derivedviews.tasksInDriver": "yes"},
     "spark.derivedviews.tasksInDriver is 'yes': give true or false"),
    ({"spark.derivedviews.tasksInDriver": "true", "spark.driver.cores": "0"},
     "spark.driver.cores is '0': give a whole number of at least 1"),
    ({"spark.derivedviews.tasksInDriver": "true", "spark.task.maxFailures": "two"},
     "spark.task.maxFailures is 'two': give a whole number of at least 1"),
])
def test_a_setting_it_cannot_read_is_refused_before_the_session(
        conf: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        in_driver_master(conf.get)
    assert str(raised.value) == message


def test_the_operator_renders_the_setting_the_job_reads() -> None:
    """The operator cannot import the job (an import contract): the key is written twice."""
    from derived_views.core.job import stages
    from dvjob import placement
    assert stages.IN_DRIVER_CONF == placement.IN_DRIVER_CONF


@pytest.mark.parametrize(("slots", "daemon", "one"), [
    (1, "false", True),  # a steady job's tasks in its driver: one Python start, not four
    (1, " FALSE ", True),
    (1, None, False),  # Spark's default: the daemon forks workers in milliseconds
    (1, "true", False),
    (2, "false", False),  # coalescing into several tasks would group them out of order
    (4, "false", False),
])
def test_staging_runs_as_one_task_only_with_one_slot_and_no_daemon(
        slots: int, daemon: str | None, one: bool) -> None:
    assert one_staging_task(slots, daemon) is one


def test_a_daemon_setting_it_cannot_read_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"spark\.python\.use\.daemon is 'no': give true or false"):
        one_staging_task(1, "no")


def test_the_steady_stage_turns_off_the_daemon_the_job_reads() -> None:
    from derived_views.core.job import stages
    from dvjob import placement
    assert stages.STEADY_SPARK_CONF[placement.PYTHON_DAEMON_CONF] == "false"
