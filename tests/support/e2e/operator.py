"""The operator an e2e test starts: which namespaces it watches, its environment; and the
operator a benchmark starts, as its own process at the product's pace."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dvstack.testing import replay
from dvstack.testing.waiting import wait_for
from support.e2e.checkpoints import checkpoint_env


def second_namespace(namespace: str) -> str:
    """The one further namespace a test may use (created and deleted by the test)."""
    return f"{namespace}-2"


JOB_NAMESPACE = "{namespace}-dv-jobs"
"""DV_JOB_NAMESPACE of tests marked `job_namespaces` (the chart's default)."""


def jobs_of(namespace: str) -> str:
    return JOB_NAMESPACE.replace("{namespace}", namespace)


def operator_namespace(namespace: str) -> str:
    """Where a `job_namespaces` test's operator "runs": the checkpoint Secret is there, not in
    the tenants' namespaces."""
    return f"{namespace}-ops"


def watched(namespace: str, *, jobs: bool = False) -> list[str]:
    """The operator's namespaces: the test's own and its second, by exact name.

    e2e files run side by side (`dvstack test`), each with its own operator, and two
    operators must never both reconcile one view; the cluster-wide mode
    (`--all-namespaces`) is the tutorial's, which runs alone. Not a pattern such as
    `<namespace>*`: Kopf stops serving a namespace matched by a pattern as soon as it
    is terminating with no blocking condition yet, so a view in a namespace being deleted
    would keep its finalizer forever (seen in test_deletion).
    """
    both = [namespace, second_namespace(namespace)]
    if jobs:  # their jobs' changes wake the views at once, as the chart watches them
        both += [jobs_of(n) for n in both]
    return [arg for n in both for arg in ("--namespace", n)]


TRIGGER_SECONDS = "10"
"""The micro-batch interval of the tests' jobs (DV_TRIGGER_SECONDS; the product's is 1 s).

A serving job's cost is mostly per batch, whatever the batch holds: one view under a
20 records/s producer took 1.25 cores at 1 s (the driver 0.71, the S3 checkpoint store
0.25, Kafka 0.12), 0.63 at 3 s; on an otherwise idle stack its driver took 0.127 cores at
5 s and 0.075 at 10 s, the S3 store 0.014 and 0.007. The suite runs up to six jobs at once
on two cores and is CPU-bound: each file took three to four times as long in the suite as
alone. Day one keeps the product's interval (marker `product_defaults`), so its default
path stays under test."""

GATE_SECONDS = 45
"""`cutover.maxLagSeconds` of test views whose gate is not what the test is about. The
oldest missing record is up to a trigger interval (10 s) plus a batch old, and batches take
seconds to tens of seconds beside five other jobs: under the default 10 s a candidate waits
for a quiet moment that a loaded machine seldom gives (a `skip` view never got one in
600 s). Day one tests the gate itself, alone. A first revision serves only once hydrated
(every record that existed when it started is in: docs/history.md), so a fresh backlog is
never served partly; a test that must see a candidate mid-replay still writes its backlog
older than the gate (`age_seconds`), so the gate does not open on it the moment it is
hydrated."""


def operator_env(stack: Any, checkpoint_prefix: str, *, product_trigger: bool = False,
                 node: bool = False, **extra: str) -> dict[str, str]:
    """The environment of an operator a test starts: the stack's API server and S3
    checkpoints, a 1 s lag poll, the tests' trigger interval unless `product_trigger`; with
    `node`, its jobs as pods of the project's Spark image on the real node."""
    env = {**os.environ, "KUBECONFIG": stack.kubeconfig, "DV_LAG_POLL_SECONDS": "1",
           "DV_LAG_HISTORY_SECONDS": "1", **checkpoint_env(stack, checkpoint_prefix)}
    if not product_trigger:
        env["DV_TRIGGER_SECONDS"] = TRIGGER_SECONDS
    env = {**env, **extra}
    env.update(replay.kafka_tenancy_env(stack.kafka_bootstrap, env.get("DV_TENANCY_POLICY")))
    if node:
        env["DV_SPARK_IMAGE"] = stack.images["spark"]
        env["DV_SPARK_TEMPLATE"] = stack.spark_template
        env["DV_SPARK_SERVICE_ACCOUNT"] = replay.SPARK_JOB_ACCOUNT
    return env


PACE_SETTINGS = ("DV_LAG_POLL_SECONDS", "DV_LAG_HISTORY_SECONDS", "DV_TRIGGER_SECONDS")
"""What the tests' operator sets faster or slower than the product: dropped for a benchmark."""
OPERATOR_STARTED = "Initial authentication has finished"
"""Kopf's log line once the operator watches: a benchmark applies its views after it."""


def product_pace_env(stack: Any, checkpoint_prefix: str,
                     lag_poll_seconds: float | None = None) -> dict[str, str]:
    """operator_env at the product's pace (PACE_SETTINGS left to the product's defaults),
    but for a lag poll a benchmark asks for."""
    env = operator_env(stack, checkpoint_prefix, product_trigger=True)
    for name in PACE_SETTINGS:
        env.pop(name, None)
    if lag_poll_seconds is not None:
        env["DV_LAG_POLL_SECONDS"] = str(lag_poll_seconds)
    return env


@contextlib.contextmanager
def operator_process(env: dict[str, str], namespace: str,
                     log_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """The real operator as its own process, watching `namespace`, logging to `log_path`;
    yielded once it watches, terminated at the end (the caller deletes its views first)."""
    with open(log_path, "ab") as log:
        operator = subprocess.Popen([sys.executable, "-m", "derived_views.main",
                                     *watched(namespace)], stdout=log, stderr=subprocess.STDOUT,
                                    env=env)
        try:
            wait_for(lambda: OPERATOR_STARTED in log_path.read_text(errors="replace")
                     or operator.poll() is not None, timeout=120, interval=0.2,
                     what="the operator to start watching")
            if operator.poll() is not None:
                raise SystemExit(f"the operator exited with {operator.returncode}; see {log_path}")
            yield operator
        finally:
            operator.terminate()
            operator.wait(timeout=60)
