"""The `dv` CLI as a subprocess against the real API server of the local stack.

The test stands in for the operator: it writes the status an operator would
write (through the status subresource) and checks what the CLI shows and what
its patches really store.
"""

from __future__ import annotations

import datetime as dt
import queue
import re
import threading
import time
from pathlib import Path
from typing import Any

from derived_views.api.spec import DerivedViewSpec
from derived_views.core.revision import revision_of
from support.cli_harness import SQL_V1, SQL_V2, CliEnv, spec_v1, spec_v2

# The revision hashes of the two specs, as the operator would name them.
REV_V1 = revision_of(DerivedViewSpec.model_validate(spec_v1()))
REV_V2 = revision_of(DerivedViewSpec.model_validate(spec_v2()))


NOW = dt.datetime.now(dt.UTC).replace(microsecond=0)
"""One base time per run, so differences between written times are exact."""


def iso(seconds_ago: float) -> str:
    moment = NOW - dt.timedelta(seconds=seconds_ago)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def content(sql: str) -> dict[str, Any]:
    return {"topics": ["orders"], "format": "json",
            "schema": "order_id STRING, amount DOUBLE, currency STRING", "sql": sql,
            "primaryKey": ["order_id"]}


def record(revision: str, phase: str, sql: str | None, lag: dict[str, Any] | None,
           seconds_ago: float = 60) -> dict[str, Any]:
    out: dict[str, Any] = {
        "revision": revision, "index": f"orders__{revision}", "phase": phase,
        "since": iso(seconds_ago), "sparkApplication": f"orders-{revision}",
        "checkpointLocation": f"/checkpoints/t/orders/{revision}", "startedAt": iso(600)}
    if sql is not None:
        out["content"] = content(sql)
    if lag is not None:
        out["lag"] = lag
    return out


def conditions(ready: str, reason: str, degraded: tuple[str, str, str] = (
        "False", "AsExpected", "")) -> list[dict[str, Any]]:
    return [
        {"type": "Ready", "status": ready, "reason": reason, "message": "",
         "lastTransitionTime": iso(300), "observedGeneration": 1},
        {"type": "Reconciling", "status": "True" if reason == "Backfilling" else "False",
         "reason": reason, "message": "", "lastTransitionTime": iso(300),
         "observedGeneration": 1},
        {"type": "Stalled", "status": "False", "reason": "AsExpected", "message": "",
         "lastTransitionTime": iso(300), "observedGeneration": 1},
        {"type": "Degraded", "status": degraded[0], "reason": degraded[1],
         "message": degraded[2], "lastTransitionTime": iso(1), "observedGeneration": 1},
    ]


CANDIDATE_LAG = {"messages": 400, "seconds": 95, "partitions": {"orders/0": 400, "orders/1": 0},
                 "endOffsets": {"orders/0": 1000, "orders/1": 500}}
ACTIVE_LAG = {"messages": 0, "seconds": 0, "partitions": {"orders/0": 0, "orders/1": 0},
              "endOffsets": {"orders/0": 1000, "orders/1": 500}}


def migrating(candidate_lag: dict[str, Any] = CANDIDATE_LAG) -> dict[str, Any]:
    """Serving v1 while v2 (the spec) is replayed."""
    return {
        "observedGeneration": 1, "phase": "Backfilling", "revision": REV_V2,
        "active": {"revision": REV_V1, "index": f"orders__{REV_V1}", "since": iso(3600),
                   "lag": ACTIVE_LAG},
        "candidate": {"revision": REV_V2, "index": f"orders__{REV_V2}",
                      "phase": "Backfilling", "since": iso(120), "lag": candidate_lag},
        "revisions": [record(REV_V1, "Active", SQL_V1, ACTIVE_LAG, 3600),
                      record(REV_V2, "Backfilling", SQL_V2, candidate_lag, 120)],
        "conditions": conditions("True", "Backfilling"),
        "lastCutover": {"to": REV_V1, "gateHeldAt": iso(3605), "switchedAt": iso(3600)},
    }


def finished() -> dict[str, Any]:
    """v2 serves, v1 is retained; `candidate: None` removes it in the merge patch."""
    return {
        "phase": "Active", "candidate": None,
        "active": {"revision": REV_V2, "index": f"orders__{REV_V2}", "since": iso(1),
                   "lag": ACTIVE_LAG},
        "revisions": [record(REV_V1, "Retiring", SQL_V1, None, 1),
                      record(REV_V2, "Active", SQL_V2, ACTIVE_LAG, 1)],
        "conditions": conditions("True", "Serving"),
        "lastCutover": {"from": REV_V1, "to": REV_V2, "gateHeldAt": iso(7), "switchedAt": iso(1)},
        "lagHistory": [
            {"time": iso(100), "revision": REV_V2, "messages": 1500, "seconds": 90},
            {"time": iso(60), "revision": REV_V2, "messages": 400, "seconds": 40},
            {"time": iso(20), "revision": REV_V2, "messages": 0, "seconds": 0},
            {"time": iso(100), "revision": REV_V1, "messages": 3},
            {"time": iso(20), "revision": REV_V1, "messages": 0, "seconds": 0},
        ],
    }


def test_status_table_and_detail(cli_env: CliEnv) -> None:
    cli_env.create_view(spec_v2())
    cli_env.write_status(migrating())
    listed = cli_env.dv("status")  # namespace from the kubeconfig context
    assert listed.returncode == 0, listed.stderr
    header, row = listed.stdout.splitlines()[:2]
    assert header.split() == ["NAMESPACE", "NAME", "PHASE", "ACTIVE", "CANDIDATE", "LAG", "LAG",
                              "TIME", "BAD", "CHECKS", "READY", "AGE"]
    # BAD: no batch has counted bad records in this status (written by the test): "-";
    # CHECKS: the view has none: "-"
    assert row.split()[:10] == [cli_env.namespace, "orders", "Backfilling", REV_V1, REV_V2,
                                "400", "1m35s", "-", "-", "True"]
    detail = cli_env.dv("status", "orders")
    assert detail.returncode == 0, detail.stderr
    assert re.search(rf"{REV_V2}\s+candidate\s+Backfilling\s+400\s+1m35s", detail.stdout)
    assert re.search(rf"{REV_V1}\s+active\s+Active\s+0\s+0s", detail.stdout)
    assert re.search(r"Degraded\s+False\s+AsExpected", detail.stdout)
    assert f"(nothing) -> {REV_V1}" in detail.stdout
    assert "5s after the gate held" in detail.stdout


def test_status_of_a_missing_view_and_an_empty_namespace(cli_env: CliEnv) -> None:
    missing = cli_env.dv("status", "absent")
    assert missing.returncode == 1
    assert missing.stderr.strip() == f"error: DerivedView {cli_env.namespace}/absent not found"
    empty = cli_env.dv("status")
    assert (empty.returncode, empty.stdout.strip()) == (
        0, f"No DerivedViews in namespace {cli_env.namespace}.")


def test_promote_pause_resume_land_as_annotations(cli_env: CliEnv) -> None:
    cli_env.create_view(spec_v2(mode="manual"))
    no_candidate = cli_env.dv("promote", "orders")
    assert no_candidate.returncode == 1
    assert "has no candidate to promote" in no_candidate.stderr
    cli_env.write_status(migrating())
    promoted = cli_env.dv("promote", "orders")
    assert promoted.returncode == 0, promoted.stderr
    assert promoted.stderr == ""  # manual mode: no warning
    assert cli_env.view()["metadata"]["annotations"]["derivedviews.io/promote"] == REV_V2
    wrong = cli_env.dv("promote", "orders", "--revision", REV_V1)
    assert wrong.returncode == 1
    assert f"is not the candidate of {cli_env.namespace}/orders" in wrong.stderr

    assert cli_env.dv("pause", "orders").returncode == 0
    assert cli_env.view()["metadata"]["annotations"]["derivedviews.io/paused"] == "true"
    assert cli_env.dv("resume", "orders").returncode == 0
    assert "derivedviews.io/paused" not in cli_env.view()["metadata"]["annotations"]


def test_promote_warns_in_auto_mode(cli_env: CliEnv) -> None:
    cli_env.create_view(spec_v2(mode="auto"))
    cli_env.write_status(migrating())
    promoted = cli_env.dv("promote", "orders")
    assert promoted.returncode == 0
    assert promoted.stderr.startswith("warning: cutover mode is auto")


def test_rollback_puts_the_previous_content_back(cli_env: CliEnv) -> None:
    cli_env.create_view(spec_v2())
    cli_env.write_status({**finished(), "revision": REV_V2, "observedGeneration": 1})
    before = cli_env.view()

    dry = cli_env.dv("rollback", "orders", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines() == [
        f"{cli_env.namespace}/orders: roll back to revision {REV_V1} (dry run, nothing changed)",
        f"- spec.transform.sql: '{SQL_V2}'",
        f"+ spec.transform.sql: '{SQL_V1}'",
    ]
    assert cli_env.view()["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]

    done = cli_env.dv("rollback", "orders")
    assert done.returncode == 0, done.stderr
    after = cli_env.view()
    assert after["spec"]["transform"] == {"sql": SQL_V1}
    assert after["metadata"]["generation"] == before["metadata"]["generation"] + 1
    assert revision_of(DerivedViewSpec.model_validate(after["spec"])) == REV_V1
    assert "applied: generation 1 -> 2" in done.stdout


def test_rollback_without_retained_content_is_a_clear_error(cli_env: CliEnv) -> None:
    cli_env.create_view(spec_v2())
    cli_env.write_status({"revision": REV_V2, "revisions": [
        record(REV_V2, "Active", SQL_V2, None), record(REV_V1, "Retired", None, None)]})
    failed = cli_env.dv("rollback", "orders")
    assert failed.returncode == 1
    assert failed.stderr.startswith(
        "error: no retained revision has stored content to roll back to")
    assert cli_env.view()["metadata"]["generation"] == 1


def test_a_stale_resource_version_is_a_conflict(cli_env: CliEnv) -> None:
    from derived_views.adapters.kube.views import Conflict, Views

    created = cli_env.create_view(spec_v2())
    views = Views(cli_env.as_account)
    views.set_annotations(cli_env.namespace, "orders", {"note": "moved on"})
    try:
        views.patch(cli_env.namespace, "orders", {
            "metadata": {"resourceVersion": created["metadata"]["resourceVersion"]},
            "spec": {"transform": {"sql": SQL_V1}}})
    except Conflict as exc:
        assert "changed meanwhile" in str(exc)
    else:
        raise AssertionError("a stale resourceVersion was accepted")
    assert cli_env.view()["spec"]["transform"] == {"sql": SQL_V2}


def test_plot_writes_a_png(cli_env: CliEnv, tmp_path: Path) -> None:
    cli_env.create_view(spec_v2())
    cli_env.write_status(migrating())
    target = tmp_path / "lag.png"
    empty = cli_env.dv("plot", "orders", "-o", str(target))
    assert empty.returncode == 1
    assert "no lag history yet" in empty.stderr
    cli_env.write_status(finished())
    plotted = cli_env.dv("plot", "orders", "-o", str(target))
    assert plotted.returncode == 0, plotted.stderr
    data = target.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 1000
    assert "5 samples of 2 revision(s)" in plotted.stdout


class Lines:
    """Collects a subprocess's stdout lines from a reader thread."""

    def __init__(self, stream: Any) -> None:
        self.queue: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: Any) -> None:
        for line in stream:
            self.queue.put(line.rstrip("\n"))

    def wait_for(self, pattern: str, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.queue.get(timeout=0.2)
            except queue.Empty:
                continue
            self.seen.append(line)
            if re.search(pattern, line):
                return line
        raise AssertionError(f"no line matching {pattern!r} in {self.seen}")


def test_watch_exits_0_when_the_migration_finishes(cli_env: CliEnv) -> None:
    cli_env.create_view(spec_v2())
    cli_env.write_status(migrating())
    proc = cli_env.popen("watch", "orders", "--interval", "0.3", "--timeout", "60")
    try:
        lines = Lines(proc.stdout)
        lines.wait_for(r"^  orders/0 600/1000 \(60\.0%\)")
        lines.wait_for(r"^  orders/1 500/500 \(100\.0%\) .* eta 0s$")
        progressed = dict(CANDIDATE_LAG, messages=100, partitions={"orders/0": 100,
                                                                   "orders/1": 0})
        cli_env.write_status(migrating(progressed))
        lines.wait_for(r"^  orders/0 900/1000 \(90\.0%\) [0-9,.]+ msg/s eta ")
        # The operator's cutover lands while the CLI watches.
        writer = threading.Thread(target=cli_env.write_status, args=(finished(),))
        writer.start()
        writer.join()
        assert proc.wait(timeout=30) == 0
        lines.wait_for(rf"done \(Ready, no candidate left\); active revision {REV_V2}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_watch_exits_4_on_timeout(cli_env: CliEnv) -> None:
    cli_env.create_view(spec_v2())
    cli_env.write_status(migrating())
    started = time.monotonic()
    result = cli_env.dv("watch", "orders", "--interval", "0.5", "--timeout", "2")
    assert result.returncode == 4
    assert result.stderr.strip() == (f"error: {cli_env.namespace}/orders: timed out after 2s "
                                     "(phase Backfilling)")
    assert time.monotonic() - started >= 2


def test_watch_exits_3_when_degraded(cli_env: CliEnv) -> None:
    cli_env.create_view(spec_v2())
    status = migrating()
    status["conditions"] = conditions("True", "Backfilling", (
        "True", "DeadlineExceeded", "candidate not caught up within 3600s"))
    cli_env.write_status(status)
    result = cli_env.dv("watch", "orders", "--timeout", "30")
    assert result.returncode == 3
    assert result.stderr.strip() == (
        f"error: {cli_env.namespace}/orders: Degraded (DeadlineExceeded): candidate not caught "
        "up within 3600s")


def test_watch_of_a_missing_view_exits_1(cli_env: CliEnv) -> None:
    result = cli_env.dv("watch", "absent", "--timeout", "5")
    assert result.returncode == 1
    assert result.stderr.strip() == f"error: DerivedView {cli_env.namespace}/absent not found"


def test_the_shield_keeps_other_writers_out(cli_env: CliEnv) -> None:
    """The premise of these tests: no operator can overwrite the status written here."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    cli_env.create_view(spec_v2())
    try:
        client.CustomObjectsApi(cli_env.admin).patch_namespaced_custom_object_status(
            "derivedviews.io", "v1alpha1", cli_env.namespace, "derivedviews", "orders",
            {"status": {"phase": "Failed"}})
    except ApiException as exc:
        assert exc.status in (403, 422)
    else:
        raise AssertionError("an admin could write the status of a shielded view")
    assert "status" not in cli_env.view()
