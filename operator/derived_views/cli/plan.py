"""`dv plan`'s report: the previews of a manifest's views as text, Markdown or JSON.

Markdown is written to be read as a pull-request comment (a summary line, then one section
per view: what changes, the content diff, what is refused with the operator's words, what a
replay reads and how long it is expected to take); JSON is for tools, its keys stable. No
I/O here: the command in cli.app gathers the previews and prints what these return.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from derived_views.cli.plan_footprint import (
    footprint_lines,
    side_by_side_json,
    sink_json,
    spark_json,
)
from derived_views.cli.rows import duration
from derived_views.core.log.build_rates import (
    DEFAULT_SPREAD,
    MEASURED_SPREAD,
    AssumedRate,
    replay_range,
)
from derived_views.core.preview.change import ChangeKind
from derived_views.core.preview.previews import Preview, exit_code_of
from derived_views.core.preview.replay_cost import PartitionRead, ReplayCost

SCHEMA_VERSION = 2
"""Of the JSON report: a key removed or changed in meaning raises it (2: `cost.rate`, the
rate assumed, replaced `cost.builds`)."""
MILLION = 1_000_000
"""A new view's records are unknown when its log was not read: its time is said per million."""
ALWAYS_UNJUDGED = (
    "the sink (whether another view claims the table or index): not judged",
)
HEADLINES = {
    ChangeKind.NONE: "no change",
    ChangeKind.SETTINGS: "settings only, applied in place, no replay",
    ChangeKind.CHECKS: "cutover checks only, re-judged, no replay",
    ChangeKind.ROLLBACK: "rollback to a retained revision, no replay",
    ChangeKind.REPLAY: "new revision, replays",
}
PARTITIONS_SHOWN = 20
"""Partitions listed one by one in text and Markdown (JSON lists them all)."""


@dataclass
class PlanReport:
    previews: list[Preview]
    skipped: int = 0
    """Documents of other kinds in the manifests."""
    warnings: list[str] = field(default_factory=list)
    """What the plan could not read as it should (the tenancy policy, the server dry run)."""

    @property
    def exit_code(self) -> int:
        return exit_code_of(self.previews)


def headline(preview: Preview) -> str:
    if preview.change is None:
        return "refused: the spec does not validate"
    text = HEADLINES[preview.change.kind]
    if preview.change.kind is ChangeKind.REPLAY and preview.change.active is None:
        text = "new view, replays"
    return f"refused ({text} once fixed)" if preview.refused else text


def summary_line(report: PlanReport) -> str:
    views = report.previews
    counted = [
        (sum(p.refused for p in views), "refused"),
        (sum(not p.refused and p.change is not None and p.change.kind is ChangeKind.REPLAY
             for p in views), "replay"),
        (sum(not p.refused and p.change is not None
             and p.change.kind in (ChangeKind.SETTINGS, ChangeKind.CHECKS, ChangeKind.ROLLBACK)
             for p in views), "change without a replay"),
        (sum(not p.refused and p.change is not None and p.change.kind is ChangeKind.NONE
             for p in views), "unchanged"),
    ]
    parts = [f"{n} {what}" for n, what in counted if n]
    skipped = f"; {report.skipped} other document(s) skipped" if report.skipped else ""
    return (f"{len(views)} DerivedView(s): {', '.join(parts) or 'none'}{skipped} "
            f"(exit {report.exit_code})")


def _holds(read: PartitionRead) -> str:
    if read.holds_beginning is False:
        return f"no: offsets below {read.first_offset:,} deleted"
    return "yes" if read.holds_beginning else "unknown: retention deletes"


def cost_lines(cost: ReplayCost) -> list[str]:
    """The replay's cost in sentences (the partitions are rendered by each format)."""
    records = cost.records
    lines = [f"records to read: {'unknown' if records is None else f'at most {records:,}'}"
             + (f" (no offsets measured for {', '.join(cost.unmeasured_topics)})"
                if cost.unmeasured_topics else "")
             + (", as the log holds them now" if cost.from_log and records is not None else "")]
    span = cost.seconds()
    if span is None:
        fast, slow = replay_range(MILLION, cost.rate)
        lines.append(f"expected replay time: unknown (the records to read are unknown); "
                     f"{_span(fast, slow)} per million records ({rate_text(cost.rate)})")
    else:
        lines.append(f"expected replay time: {_span(*span)} ({rate_text(cost.rate)})")
    if cost.lost_beginning:
        where = "at the log start" if cost.from_log else "where the active's did"
        lines.append(f"the log no longer holds its beginning on {', '.join(cost.lost_beginning)}"
                     f": a replay starts {where}")
    if cost.held:
        lines.append(f"held, as the operator would hold it: {cost.held}")
    if cost.may_lose_beginning and cost.complete_history:
        lines.append("if retention deleted records since the active revision replayed, the new "
                     "revision lacks them and is not promoted (spec.source.history: complete)")
    if cost.compacted:
        lines.append(f"compacted: {', '.join(cost.compacted)} (a replay reads the latest record "
                     "per key)")
    if cost.retention:
        lines.append(f"retention: {cost.retention}")
    return lines


def _span(fast: int, slow: int) -> str:
    return (f"about {duration(fast)}" if duration(fast) == duration(slow)
            else f"{duration(fast)} to {duration(slow)}")


def rate_text(rate: AssumedRate) -> str:
    """Where the expected time comes from, as the operator's estimate says it."""
    assumed = (f"{rate.startup_seconds:,.0f} s start-up, then "
               f"{rate.records_per_second:,.0f} records/s")
    if rate.from_revision is None:
        return (f"the installation's default: {assumed}, no build of this view measured; "
                f"{DEFAULT_SPREAD:g}x either way")
    return f"revision {rate.from_revision}'s measured build: {assumed}; {MEASURED_SPREAD:g}x either way"


def _view_lines(preview: Preview, markdown: bool) -> list[str]:
    out: list[str] = []
    change = preview.change
    code = (lambda s: f"`{s}`") if markdown else (lambda s: s)
    if change is not None:
        active = f", active {code(change.active)}" if change.active else ""
        out.append(f"Revision {code(change.revision)}{active}: {change.what}")
        if change.restarts_jobs and change.kind is not ChangeKind.SETTINGS:
            out.append("The running jobs restart from their checkpoints (changed job settings)")
    if preview.refusals:
        out.append("Refused, as the operator (or the API server) would say it:")
        out += [f"- {code(r.reason)}: {r.message}" for r in preview.refusals]
        out += [""] if markdown else []  # the list ends before the next line
    if change is not None and change.fields:
        label = ("Changed in place" if change.kind in (ChangeKind.SETTINGS, ChangeKind.CHECKS)
                 else "Also changed in place")
        out.append(f"{label}: {', '.join(code(f) for f in change.fields)}")
    if change is not None and change.content_diff:
        against = "against the active revision" if change.active else "(a new view)"
        out.append(f"Content {against}:")
        out += (["```diff", *change.content_diff, "```"] if markdown
                else [f"  {line}" for line in change.content_diff])
    if preview.cost is not None:
        out += _cost(preview.cost, markdown)
    if preview.footprint is not None:
        out += _footprint(preview, markdown)
    if preview.not_judged:
        out.append("Not judged: " + "; ".join(preview.not_judged))
    return out


def _cost(cost: ReplayCost, markdown: bool) -> list[str]:
    shown = cost.partitions[:PARTITIONS_SHOWN]
    more = len(cost.partitions) - len(shown)
    out = ["Replay cost:"]
    if markdown:
        out.append("")
        if shown:
            out += ["| partition | records | from offset | log holds its beginning |",
                    "|---|---:|---:|---|"]
            out += [f"| {p.partition} | {p.records:,} | {p.first_offset:,} | {_holds(p)} |"
                    for p in shown]
            out += [f"| ... {more} more | | | |"] if more else []
            out.append("")
        out += [f"- {line}" for line in cost_lines(cost)]
    else:
        out += [f"  {p.partition}: {p.records:,} records from offset {p.first_offset:,}; log "
                f"holds its beginning: {_holds(p)}" for p in shown]
        out += [f"  ... and {more} more partitions"] if more else []
        out += [f"  {line}" for line in cost_lines(cost)]
    return out


def _footprint(preview: Preview, markdown: bool) -> list[str]:
    """Under the replay's cost, as more of its lines; alone for jobs a settings change
    restarts."""
    assert preview.footprint is not None
    lines = footprint_lines(preview.footprint)
    if preview.cost is None:
        return lines
    return [f"- {line}" if markdown else f"  {line}" for line in lines]


def render_text(report: PlanReport) -> str:
    out = [f"dv plan: {summary_line(report)}"]
    out += [f"warning: {w}" for w in report.warnings]
    for preview in report.previews:
        out += ["", f"{preview.namespace}/{preview.name}: {headline(preview)}"]
        out += [f"  {line}" for line in _view_lines(preview, markdown=False)]
    out += ["", "not read by dv plan: " + "; ".join(ALWAYS_UNJUDGED)]
    return "\n".join(out) + "\n"


def render_markdown(report: PlanReport) -> str:
    out = [f"### `dv plan`: {summary_line(report)}", ""]
    out += [f"> **warning:** {w}" for w in report.warnings]
    if report.warnings:
        out.append("")
    for preview in report.previews:
        out += [f"#### `{preview.namespace}/{preview.name}`: {headline(preview)}", ""]
        for line in _view_lines(preview, markdown=True):
            structural = not line or line.startswith(("```", "|", "- ", "+ "))
            out.append(line if structural else line + "  ")  # a line break, not a paragraph
        out.append("")
    out.append("<sub>Not read by dv plan: " + "; ".join(ALWAYS_UNJUDGED) + ".</sub>")
    return "\n".join(out) + "\n"


def _cost_json(cost: ReplayCost) -> dict[str, Any]:
    span = cost.seconds()
    return {
        "records": cost.records,
        "partitions": [{"partition": p.partition, "firstOffset": p.first_offset,
                        "endOffset": p.end_offset, "records": p.records,
                        "holdsBeginning": p.holds_beginning} for p in cost.partitions],
        "unmeasuredTopics": list(cost.unmeasured_topics),
        "replaySeconds": None if span is None else {"low": span[0], "high": span[1]},
        "rate": {"recordsPerSecond": cost.rate.records_per_second,
                 "startupSeconds": cost.rate.startup_seconds,
                 "fromRevision": cost.rate.from_revision},
        "retention": cost.retention or None,
        "compacted": list(cost.compacted),
        "completeHistory": cost.complete_history,
        "fromLog": cost.from_log,
        "held": cost.held or None,
    }


def preview_json(preview: Preview) -> dict[str, Any]:
    change = preview.change
    return {
        "namespace": preview.namespace,
        "name": preview.name,
        "refused": preview.refused,
        "change": None if change is None else {
            "kind": change.kind.value, "revision": change.revision, "active": change.active,
            "contentDiff": list(change.content_diff), "fields": list(change.fields),
            "restartsJobs": change.restarts_jobs, "what": change.what},
        "refusals": [{"reason": r.reason, "message": r.message} for r in preview.refusals],
        "notJudged": list(preview.not_judged),
        "cost": None if preview.cost is None else _cost_json(preview.cost) | _footprint_json(preview),
        "restartedJobs": (spark_json(preview.footprint.spark)
                          if preview.cost is None and preview.footprint is not None else None),
    }


def _footprint_json(preview: Preview) -> dict[str, Any]:
    """A replay's footprint as more of its cost's keys."""
    footprint = preview.footprint
    if footprint is None:
        return {}
    return {"spark": spark_json(footprint.spark),
            "sideBySide": side_by_side_json(footprint.side_by_side),
            "sink": None if footprint.sink is None else sink_json(footprint.sink)}


def render_json(report: PlanReport) -> str:
    document = {
        "schemaVersion": SCHEMA_VERSION,
        "exitCode": report.exit_code,
        "skipped": report.skipped,
        "warnings": list(report.warnings),
        "notRead": list(ALWAYS_UNJUDGED),
        "views": [preview_json(p) for p in report.previews],
    }
    return json.dumps(document, indent=2, sort_keys=False) + "\n"
