"""`dv status` rows: the words and numbers people read, against hand-written expectations."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from derived_views.api.status import TopicLog
from derived_views.cli import rows
from derived_views.cli.app import hoist_global_options

NOW = dt.datetime(2026, 3, 1, 12, 0, 0, tzinfo=dt.UTC)


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


@pytest.mark.parametrize(("seconds", "expected"), [
    (0, "0s"), (45, "45s"), (119, "119s"), (120, "2m"), (7199, "119m"), (7200, "2h"),
    (47 * 3600, "47h"), (48 * 3600, "2d"), (-5, "0s"),
])
def test_age_is_compact_like_kubectl(seconds: int, expected: str) -> None:
    assert rows.age(NOW - dt.timedelta(seconds=seconds), NOW) == expected


@pytest.mark.parametrize(("seconds", "expected"), [
    (None, "-"), (0, "0s"), (59.4, "59s"), (60, "1m00s"), (125, "2m05s"), (3720, "1h02m"),
])
def test_duration(seconds: float | None, expected: str) -> None:
    assert rows.duration(seconds) == expected


def condition(type_: str, status: str, reason: str, message: str = "",
              since: str = "2026-03-01T11:58:00Z") -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": since}


MIGRATING: dict[str, Any] = {
    "metadata": {"name": "orders", "namespace": "shop", "generation": 3,
                 "creationTimestamp": "2026-03-01T09:00:00Z",
                 "annotations": {"derivedviews.io/paused": "true"}},
    "spec": {"cutover": {"mode": "manual"}},
    "status": {
        "observedGeneration": 3, "phase": "Backfilling", "revision": "bbbbbbbbbb",
        "active": {"revision": "aaaaaaaaaa", "index": "orders__aaaaaaaaaa",
                   "since": "2026-03-01T10:00:00Z",
                   "lag": {"messages": 2, "seconds": 0}},
        "candidate": {"revision": "bbbbbbbbbb", "index": "orders__bbbbbbbbbb",
                      "phase": "Backfilling", "since": "2026-03-01T11:55:00Z",
                      "lag": {"messages": 4000, "seconds": 95}},
        "revisions": [
            {"revision": "aaaaaaaaaa", "index": "orders__aaaaaaaaaa", "phase": "Active",
             "since": "2026-03-01T10:00:00Z", "sparkApplication": "orders-aaaaaaaaaa",
             "checkpointLocation": "/ck/a", "startedAt": "2026-03-01T09:00:00Z",
             "lag": {"messages": 2, "seconds": 0}, "reason": "Promoted",
             "content": {"topics": ["orders"], "format": "json", "schema": "id STRING",
                         "sql": "SELECT id FROM events", "primaryKey": ["id"]}},
            {"revision": "bbbbbbbbbb", "index": "orders__bbbbbbbbbb", "phase": "Backfilling",
             "since": "2026-03-01T11:55:00Z", "sparkApplication": "orders-bbbbbbbbbb",
             "checkpointLocation": "/ck/b", "startedAt": "2026-03-01T11:55:00Z",
             "lag": {"messages": 4000, "seconds": 95}, "reason": "JobRunning",
             "message": "replaying"},
        ],
        "conditions": [condition("Ready", "True", "Serving"),
                       condition("Reconciling", "True", "Backfilling", "building bbbbbbbbbb"),
                       condition("Degraded", "False", "AsExpected")],
        "lastCutover": {"from": "0000000000", "to": "aaaaaaaaaa",
                        "gateHeldAt": "2026-03-01T09:59:50Z",
                        "switchedAt": "2026-03-01T10:00:00Z"},
    },
}


def test_a_migrating_view_shows_the_candidates_lag() -> None:
    assert rows.view_row(MIGRATING, NOW) == rows.ViewRow(
        namespace="shop", name="orders", phase="Backfilling", active="aaaaaaaaaa",
        candidate="bbbbbbbbbb", lag_messages="4000", lag_time="1m35s", ready="True", age="3h")


def test_a_view_without_status_shows_dashes() -> None:
    view = {"metadata": {"name": "fresh", "namespace": "ns",
                         "creationTimestamp": "2026-03-01T11:59:30Z"}, "spec": {}}
    assert rows.view_row(view, NOW) == rows.ViewRow(
        namespace="ns", name="fresh", phase="-", active="-", candidate="-", lag_messages="-",
        lag_time="-", ready="-", age="30s")


def test_revision_rows_newest_phase_change_first_with_roles() -> None:
    status = rows.parse_status(MIGRATING)
    assert rows.revision_rows(status, NOW) == [
        rows.RevisionRow(revision="bbbbbbbbbb", role="candidate", phase="Backfilling",
                         lag_messages="4000", lag_time="1m35s", in_phase_for="5m",
                         content="-", note="JobRunning: replaying"),
        rows.RevisionRow(revision="aaaaaaaaaa", role="active", phase="Active",
                         lag_messages="2", lag_time="0s", in_phase_for="2h", content="kept",
                         note="Promoted"),
    ]


def test_condition_rows() -> None:
    status = rows.parse_status(MIGRATING)
    assert rows.condition_rows(status, NOW)[1] == rows.ConditionRow(
        type="Reconciling", status="True", reason="Backfilling", message="building bbbbbbbbbb",
        age="2m")


def test_cutover_line_says_how_long_after_the_gate() -> None:
    assert rows.cutover_line(rows.parse_status(MIGRATING), NOW) == (
        "0000000000 -> aaaaaaaaaa at 2026-03-01T10:00:00+00:00 (2h ago), "
        "10s after the gate held")


def test_cutover_line_of_a_rollback_and_of_none() -> None:
    status = rows.parse_status({"status": {"lastCutover": {
        "from": "bbbbbbbbbb", "to": "aaaaaaaaaa", "switchedAt": "2026-03-01T11:59:00Z"}}})
    assert rows.cutover_line(status, NOW) == (
        "bbbbbbbbbb -> aaaaaaaaaa at 2026-03-01T11:59:00+00:00 (60s ago), no gate (rollback)")
    assert rows.cutover_line(rows.parse_status({}), NOW) == "no cutover yet"


def test_header_lines_show_mode_generation_and_pause() -> None:
    assert rows.header_lines(MIGRATING, rows.parse_status(MIGRATING)) == [
        ("View", "shop/orders"), ("Phase", "Backfilling"), ("Spec revision", "bbbbbbbbbb"),
        ("Active", "aaaaaaaaaa (orders__aaaaaaaaaa)"), ("Candidate", "bbbbbbbbbb (Backfilling)"),
        ("Cutover mode", "manual"),
        ("Bad records", "fail; none counted yet"), ("History", "complete"),
        ("History (active)", "not recorded yet (before its first batch)"),
        ("History (candidate)", "not recorded yet (before its first batch); hydrating (not "
                                "every record of its start is in its index yet)"),
        ("Generation", "3 (observed 3)"), ("Paused", "yes"),
    ]


def test_history_lines_say_where_each_index_starts_and_which_topics_are_compacted() -> None:
    view = {**MIGRATING, "spec": {**MIGRATING.get("spec", {}), "source": {
        "history": "fromLogStart"}}}
    status = rows.parse_status(view).model_copy(update={"source_logs": [
        TopicLog(topic="orders", cleanup_policy="compact")]})
    active = status.record("aaaaaaaaaa")
    assert active is not None
    status = status.model_copy(update={"revisions": [
        active.model_copy(update={"history_start": {"orders/0": 1000},
                                  "history_gaps": {"orders/1": 7}}),
        *(r for r in status.revisions if r.revision != "aaaaaaaaaa")]})
    lines = dict(rows.history_lines(view, status))
    assert lines["History"] == "fromLogStart"
    assert lines["History (active)"] == (
        "orders/0 from offset 1000 (1000 records deleted by retention); "
        "orders/1: 7 records deleted before its replay read them")
    assert lines["Topic orders"].startswith("cleanup.policy=compact: a replay reads the "
                                            "latest record per key")


@pytest.mark.parametrize(("argv", "expected"), [
    (["status", "-n", "shop"], ["-n", "shop", "status"]),
    (["watch", "orders", "--namespace=shop", "--timeout", "5"],
     ["--namespace=shop", "watch", "orders", "--timeout", "5"]),
    (["--context", "c1", "plot", "v", "-o", "x.png", "--kubeconfig", "k"],
     ["--context", "c1", "--kubeconfig", "k", "plot", "v", "-o", "x.png"]),
    (["status", "-A"], ["status", "-A"]),            # -A belongs to `status` itself
    (["rollback", "v", "--", "-n"], ["rollback", "v", "--", "-n"]),
    (["--help"], ["--help"]),
])
def test_group_options_after_the_command_are_hoisted(argv: list[str],
                                                     expected: list[str]) -> None:
    assert hoist_global_options(argv) == expected


CHECKED: dict[str, Any] = {**MIGRATING, "status": {
    **MIGRATING["status"], "phase": "CaughtUp", "checks": "rowCount failed",
    "candidate": {**MIGRATING["status"]["candidate"], "phase": "CaughtUp", "checks": {
        "checksHash": "0123456789ab", "checkedAt": "2026-03-01T11:59:30Z",
        "results": [
            {"name": "rowCount", "outcome": "Failed", "observed": "250 rows (the active "
             "index: 500)", "expected": "500 ± 0 rows", "seconds": 0.0123},
            {"name": "no-negative-balances", "outcome": "Passed", "observed": "0 row(s)",
             "expected": "no rows", "seconds": 0.004}]}}}}


def test_checks_in_the_header_and_their_own_table() -> None:
    status = rows.parse_status(CHECKED)
    header = dict(rows.header_lines(CHECKED, status))
    assert header["Checks"] == "rowCount failed (run at 2026-03-01T11:59:30+00:00)"
    assert list(dict(rows.header_lines(CHECKED, status)))[-3:] == [
        "Checks", "Generation", "Paused"]
    assert rows.check_lines(status) == [
        ("rowCount", "Failed", "250 rows (the active index: 500)", "500 ± 0 rows", "0.012s"),
        ("no-negative-balances", "Passed", "0 row(s)", "no rows", "0.004s")]
    assert rows.view_row(CHECKED, NOW).checks == "rowCount failed"
    assert rows.view_row(MIGRATING, NOW).checks == "-"
