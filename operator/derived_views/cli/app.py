"""`dv`: the people-facing CLI for DerivedViews (status, watch, promote, pause, rollback, plot,
plan, diff).

The imperative shell: it reads views through adapters.kube.views, decides with
the pure modules beside it and prints with rich. Every expected failure ends
as one `error: ...` line on stderr and a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import sys
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, NoReturn

import pydantic
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn
from rich.table import Table

from derived_views.adapters.kube.installation import (
    OPERATOR_NAME,
    OPERATOR_NAMESPACE,
    operator_env,
)
from derived_views.adapters.kube.views import (
    Views,
    ViewsError,
    client_from_kubeconfig,
    default_namespace,
)
from derived_views.adapters.sink import diff_indexes, index_bytes
from derived_views.adapters.sink_contract import SinkSecretInvalid, SinkUnavailable
from derived_views.api.constants import PAUSED_ANNOTATION, PROMOTE_ANNOTATION
from derived_views.api.spec import DerivedViewSpec
from derived_views.api.status import CheckOutcome, DerivedViewStatus, Lag
from derived_views.cli import rows
from derived_views.cli.diff import DiffError, diff_json, diff_request, diff_table
from derived_views.cli.manifests import ManifestError, read_manifests
from derived_views.cli.plan import PlanReport, render_json, render_markdown, render_text
from derived_views.cli.plot_data import NoHistory, plot_data
from derived_views.cli.progress import (
    Outcome,
    Poll,
    batch_line,
    estimate,
    eta_text,
    partitions,
    percent,
    watch_verdict,
    watched_lag,
)
from derived_views.cli.rollback import (
    RollbackError,
    guarded_patch,
    rollback_target,
    spec_patch,
)
from derived_views.cli.source_reads import SourceReader
from derived_views.core.cutover.checks import CouldNotRun
from derived_views.core.cutover.diff import DiffFound, judge_diff
from derived_views.core.job.sparkapplication import load_template
from derived_views.core.judges.tenancy import secret_refusal
from derived_views.core.judges.transform import Refusal
from derived_views.core.patch import apply_merge_patch, spec_diff
from derived_views.core.preview.change import ChangeKind, LiveView, change_of
from derived_views.core.preview.footprint import SinkSpace
from derived_views.core.preview.previews import Preview, preview_of
from derived_views.core.revision import revision_of
from derived_views.core.settings import Settings
from derived_views.process.environment import SettingsError, from_env

EXIT_ERROR = 1
WATCH_WINDOW = 10
"""Observations kept for rate and ETA: long enough to smooth batchy progress."""

app = typer.Typer(name="dv", no_args_is_help=True, add_completion=False,
                  help="Inspect and steer DerivedViews: status, watch a migration, diff, "
                       "promote, pause/resume, roll back, plot lag.")
out = Console(highlight=False)
err = Console(stderr=True, highlight=False)
if not out.is_terminal:
    # Logs and pipes: wide enough that tables do not wrap revision hashes.
    out = Console(highlight=False, width=200)


@dataclass(frozen=True)
class ClusterTarget:
    kubeconfig: str | None
    context: str | None
    namespace: str | None

    def resolved_namespace(self) -> str:
        return self.namespace or default_namespace(self.kubeconfig, self.context)

    def api_client(self) -> Any:
        return client_from_kubeconfig(self.kubeconfig, self.context)

    def views(self) -> Views:
        return Views(self.api_client())


def fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    err.print(f"error: {message}", markup=False, soft_wrap=True)
    raise typer.Exit(code)


@contextmanager
def clear_errors() -> Iterator[None]:
    """Expected failures as one line each."""
    try:
        yield
    except (ViewsError, RollbackError, NoHistory, ManifestError, DiffError,
            SinkSecretInvalid) as exc:
        fail(str(exc))
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        fail(f"the view's status or spec is not understood ({where}: {first['msg']}); "
             "is the CLI older than the operator?")
    except OSError as exc:
        fail(f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": "))


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@app.callback()
def options(
    ctx: typer.Context,
    kubeconfig: Annotated[str | None, typer.Option(
        "--kubeconfig", help="Kubeconfig file (default: $KUBECONFIG, else ~/.kube/config).")
    ] = None,
    context: Annotated[str | None, typer.Option(
        "--context", help="Kubeconfig context (default: the current one).")] = None,
    namespace: Annotated[str | None, typer.Option(
        "-n", "--namespace", help="Namespace (default: the context's, else default).")] = None,
) -> None:
    ctx.obj = ClusterTarget(kubeconfig, context, namespace)


@app.command()
def status(
    ctx: typer.Context,
    view: Annotated[str | None, typer.Argument(help="A view for the detailed status.")] = None,
    all_namespaces: Annotated[bool, typer.Option(
        "-A", "--all-namespaces", help="List views of every namespace.")] = False,
) -> None:
    """List views (phase, revisions, lag, readiness), or show one in detail."""
    target: ClusterTarget = ctx.obj
    with clear_errors():
        views = target.views()
        if view is not None:
            if all_namespaces:
                fail("-A lists views; name a view with -n NAMESPACE instead")
            _print_detail(views.get(target.resolved_namespace(), view))
            return
        namespace = None if all_namespaces else target.resolved_namespace()
        items = views.list(namespace)
        if not items:
            where = "any namespace" if namespace is None else f"namespace {namespace}"
            out.print(f"No DerivedViews in {where}.")
            return
        now = _now()
        table = Table(box=None, header_style="bold", pad_edge=False)
        for column in ("NAMESPACE", "NAME", "PHASE", "ACTIVE", "CANDIDATE", "LAG", "LAG TIME",
                       "BAD", "CHECKS", "READY", "AGE"):
            table.add_column(column, no_wrap=True)
        found = sorted(items, key=lambda v: (v["metadata"].get("namespace", ""),
                                             v["metadata"]["name"]))
        for item in found:
            row = rows.view_row(item, now)
            table.add_row(row.namespace, row.name, row.phase, row.active, row.candidate,
                          row.lag_messages, row.lag_time, row.bad_records, row.checks, row.ready,
                          row.age)
        out.print(table)


def _print_detail(view: dict[str, Any]) -> None:
    now = _now()
    status = rows.parse_status(view)
    header = Table.grid(padding=(0, 2))
    for key, value in rows.header_lines(view, status):
        header.add_row(f"[bold]{key}[/bold]", value)
    out.print(header)
    revisions = Table(title="Revisions", title_justify="left", box=None, header_style="bold",
                      pad_edge=False)
    for column in ("REVISION", "ROLE", "PHASE", "LAG", "LAG TIME", "BAD", "IN PHASE", "CONTENT",
                   "REASON"):
        revisions.add_column(column, no_wrap=column != "REASON")
    for r in rows.revision_rows(status, now):
        revisions.add_row(r.revision, r.role, r.phase, r.lag_messages, r.lag_time,
                          r.bad_records, r.in_phase_for, r.content, r.note)
    out.print()
    out.print(revisions if status.revisions else "Revisions: none yet")
    checked = rows.check_lines(status)
    if checked:
        table = Table(title="Cutover checks", title_justify="left", box=None,
                      header_style="bold", pad_edge=False)
        for column in ("CHECK", "OUTCOME", "OBSERVED", "EXPECTED", "TOOK"):
            table.add_column(column, no_wrap=column not in ("OBSERVED", "EXPECTED"))
        for line in checked:
            table.add_row(*line)
        out.print()
        out.print(table)
    conditions = Table(title="Conditions", title_justify="left", box=None, header_style="bold",
                       pad_edge=False)
    for column in ("TYPE", "STATUS", "REASON", "AGE", "MESSAGE"):
        conditions.add_column(column, no_wrap=column != "MESSAGE")
    for c in rows.condition_rows(status, now):
        conditions.add_row(c.type, c.status, c.reason, c.age, c.message)
    out.print()
    out.print(conditions if status.conditions else "Conditions: none yet")
    out.print()
    out.print(f"[bold]Last cutover[/bold]  {rows.cutover_line(status, now)}")


@app.command()
def watch(
    ctx: typer.Context,
    view: Annotated[str, typer.Argument(help="The view to watch.")],
    timeout: Annotated[float | None, typer.Option(
        help="Give up after this many seconds (exit 4); default: wait forever.", min=0)
    ] = None,
    interval: Annotated[float, typer.Option(help="Seconds between polls.", min=0.1)] = 2.0,
) -> None:
    """Follow a migration until it is done (exit 0), failed (3) or timed out (4)."""
    target: ClusterTarget = ctx.obj
    with clear_errors():
        views = target.views()
        namespace = target.resolved_namespace()
        deadline = None if timeout is None else time.monotonic() + timeout
        display = _LiveProgress() if out.is_terminal else _PlainProgress()
        try:
            while True:
                obj = views.get(namespace, view)
                current = rows.parse_status(obj)
                verdict = watch_verdict(current, obj.get("metadata", {}).get("generation"))
                if verdict.outcome is Outcome.WAITING or watched_lag(current) is not None:
                    display.show(current)
                if verdict.outcome is Outcome.DONE:
                    display.close()
                    out.print(f"{namespace}/{view}: done ({verdict.reason}); active revision "
                              f"{current.active.revision if current.active else '-'}")
                    raise typer.Exit(0)
                if verdict.outcome is Outcome.FAILED:
                    display.close()
                    fail(f"{namespace}/{view}: {verdict.reason}", Outcome.FAILED.value)
                if deadline is not None and time.monotonic() >= deadline:
                    display.close()
                    phase = current.phase.value if current.phase else "no status"
                    fail(f"{namespace}/{view}: timed out after {timeout:g}s (phase {phase})",
                         Outcome.TIMED_OUT.value)
                pause = interval if deadline is None else \
                    max(0.0, min(interval, deadline - time.monotonic()))
                time.sleep(pause)
        finally:
            display.close()


class _Display:
    """Keeps a short window of observations of the watched revision."""

    def __init__(self) -> None:
        self.revision: str | None = None
        self.lag: Lag | None = None
        self.window: deque[Poll] = deque(maxlen=WATCH_WINDOW)

    def observe(self, current: DerivedViewStatus) -> Poll | None:
        watched = watched_lag(current)
        if watched is None:
            return None
        revision, lag = watched
        self.lag = lag
        if revision != self.revision:
            self.revision = revision
            self.window.clear()
        observation = Poll(_now(), tuple(partitions(lag)))
        self.window.append(observation)
        return observation

    @property
    def earliest(self) -> Poll | None:
        return self.window[0] if len(self.window) > 1 else None

    def close(self) -> None:
        """Nothing to release by default."""


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f} msg/s"


class _PlainProgress(_Display):
    """Non-TTY: a line per partition whenever progress changed, for logs."""

    def __init__(self) -> None:
        super().__init__()
        self.last: tuple[Any, ...] | None = None

    def show(self, current: DerivedViewStatus) -> None:
        observation = self.observe(current)
        phase = current.phase.value if current.phase else "no status"
        read = self.lag.batch_read if observation and self.lag else None
        key = (phase, self.revision, observation.progress if observation else None, read)
        if key == self.last:
            return
        self.last = key
        if observation is None:
            out.print(f"phase {phase}: no lag measured yet")
            return
        total_done = sum(p.done for p in observation.progress)
        total = sum(p.total for p in observation.progress)
        overall = estimate(self.earliest, observation)
        out.print(f"phase {phase} revision {self.revision}: {total_done}/{total} "
                  f"({percent(total_done, total):.1f}%) {_rate(overall.rate)} "
                  f"eta {eta_text(overall.eta_seconds, self.lag)}")
        reading = batch_line(self.lag) if self.lag is not None else None
        if reading:
            out.print(f"  {reading}")
        for p in observation.progress:
            est = estimate(self.earliest, observation, p.key)
            out.print(f"  {p.key} {p.done}/{p.total} ({percent(p.done, p.total):.1f}%) "
                      f"{_rate(est.rate)} eta {rows.duration(est.eta_seconds)}")
        sys.stdout.flush()


READ_TASK = "\0read"
"""The live display's row for what the running batch has read (no partition's key)."""


class _LiveProgress(_Display):
    """TTY: one redrawn bar per partition."""

    def __init__(self) -> None:
        super().__init__()
        self.progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.percentage:>5.1f}%"), TextColumn("{task.fields[rate]}"),
            TextColumn("eta {task.fields[eta]}"), console=out)
        self.tasks: dict[str, TaskID] = {}
        self.started = False

    def show(self, current: DerivedViewStatus) -> None:
        if not self.started:
            self.progress.start()
            self.started = True
        previous = self.revision
        observation = self.observe(current)
        if self.revision != previous:
            for task in self.tasks.values():
                self.progress.remove_task(task)
            self.tasks.clear()
        if observation is None:
            return
        for p in observation.progress:
            est = estimate(self.earliest, observation, p.key)
            if p.key not in self.tasks:
                self.tasks[p.key] = self.progress.add_task(
                    f"{self.revision} {p.key}", total=p.total, rate="", eta="")
            # no poll saw this partition move: the operator's ETA for the whole build
            self.progress.update(self.tasks[p.key], completed=p.done, total=p.total,
                                 rate=_rate(est.rate), eta=eta_text(est.eta_seconds, self.lag))
        lag = self.lag
        if lag is not None and lag.batch_read is not None:
            total = sum(p.total for p in observation.progress)
            done = sum(p.done for p in observation.progress)
            if READ_TASK not in self.tasks:
                self.tasks[READ_TASK] = self.progress.add_task(
                    f"{self.revision} read, not yet committed", total=total, rate="", eta="")
            self.progress.update(self.tasks[READ_TASK], completed=done + lag.batch_read,
                                 total=total, eta=eta_text(None, lag))

    def close(self) -> None:
        if self.started:
            self.progress.stop()
            self.started = False


@app.command()
def promote(
    ctx: typer.Context,
    view: Annotated[str, typer.Argument(help="The view whose candidate to promote.")],
    revision: Annotated[str | None, typer.Option(
        help="The candidate's revision, as a safety check (default: the current candidate).")
    ] = None,
) -> None:
    """Allow the cutover to the candidate (manual mode): sets derivedviews.io/promote."""
    target: ClusterTarget = ctx.obj
    with clear_errors():
        views, namespace = target.views(), target.resolved_namespace()
        obj = views.get(namespace, view)
        current = rows.parse_status(obj)
        if current.candidate is None:
            fail(f"{namespace}/{view} has no candidate to promote "
                 f"(phase {current.phase.value if current.phase else 'unknown'})")
        chosen = revision or current.candidate.revision
        if chosen != current.candidate.revision:
            fail(f"revision {chosen} is not the candidate of {namespace}/{view} "
                 f"(the candidate is {current.candidate.revision})")
        mode = ((obj.get("spec") or {}).get("cutover") or {}).get("mode", "auto")
        if mode == "auto":
            err.print("warning: cutover mode is auto: the operator switches by itself once "
                      "the lag gate holds; the annotation changes nothing", markup=False)
        views.set_annotations(namespace, view, {PROMOTE_ANNOTATION: chosen})
        out.print(f"{namespace}/{view}: promote requested for revision {chosen} "
                  f"({PROMOTE_ANNOTATION}={chosen}); the switch happens once its lag gate holds")


@app.command()
def pause(ctx: typer.Context,
          view: Annotated[str, typer.Argument(help="The view to pause.")]) -> None:
    """Stop planning for the view (no new jobs, cutovers or retirements); status still refreshes."""
    _set_paused(ctx.obj, view, paused=True)


@app.command()
def resume(ctx: typer.Context,
           view: Annotated[str, typer.Argument(help="The view to resume.")]) -> None:
    """Undo `dv pause`."""
    _set_paused(ctx.obj, view, paused=False)


def _set_paused(target: ClusterTarget, view: str, *, paused: bool) -> None:
    with clear_errors():
        views, namespace = target.views(), target.resolved_namespace()
        views.set_annotations(namespace, view, {PAUSED_ANNOTATION: "true" if paused else None})
        out.print(f"{namespace}/{view}: {'paused' if paused else 'resumed'}")


@app.command()
def rollback(
    ctx: typer.Context,
    view: Annotated[str, typer.Argument(help="The view to roll back.")],
    to: Annotated[str | None, typer.Option(
        "--to", help="Revision to restore (default: the previous active).")] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Print the spec change without applying it.")] = False,
) -> None:
    """Put the spec's content back to a retained revision (resumes its index if still kept)."""
    target: ClusterTarget = ctx.obj
    with clear_errors():
        views, namespace = target.views(), target.resolved_namespace()
        obj = views.get(namespace, view)
        chosen = rollback_target(rows.parse_status(obj), to)
        spec = obj.get("spec") or {}
        changes = spec_patch(spec, chosen.content)
        after = apply_merge_patch(spec, changes)
        diff = spec_diff(spec, after)
        if not diff:
            fail(f"the spec of {namespace}/{view} already has revision {chosen.revision}'s "
                 "content")
        out.print(f"{namespace}/{view}: roll back to revision {chosen.revision}"
                  f"{' (dry run, nothing changed)' if dry_run else ''}")
        for line in diff:
            out.print(line, markup=False, soft_wrap=True)
        _check_revision(after, chosen.revision)
        if dry_run:
            return
        before_generation = obj["metadata"].get("generation")
        updated = views.patch(namespace, view,
                              guarded_patch(changes, obj["metadata"]["resourceVersion"]))
        out.print(f"applied: generation {before_generation} -> "
                  f"{updated['metadata'].get('generation')}; the operator takes it from here")


def _check_revision(spec: dict[str, Any], expected: str) -> None:
    """Warn when the restored spec would not hash to the chosen revision."""
    try:
        computed = revision_of(DerivedViewSpec.model_validate(spec))
    except pydantic.ValidationError:
        return
    if computed != expected:
        err.print(f"warning: the restored spec hashes to {computed}, not {expected} (an "
                  "operator with another hash scheme?); it will be built as a new revision",
                  markup=False)


@app.command()
def plot(
    ctx: typer.Context,
    view: Annotated[str, typer.Argument(help="The view to plot.")],
    output: Annotated[Path, typer.Option("-o", "--output", help="PNG file to write.")],
) -> None:
    """Plot each revision's lag over time (status.lagHistory) with the last cutover."""
    target: ClusterTarget = ctx.obj
    with clear_errors():
        if output.suffix.lower() != ".png":
            fail(f"{output} must end in .png")
        if not output.parent.is_dir():
            fail(f"directory {output.parent} does not exist")
        views, namespace = target.views(), target.resolved_namespace()
        data = plot_data(rows.parse_status(views.get(namespace, view)))
        from derived_views.cli.plot import write_png  # matplotlib is slow to import

        write_png(data, f"{namespace}/{view} lag", output)
        samples = sum(len(s.times) for s in data.series)
        out.print(f"wrote {output}: {samples} samples of {len(data.series)} revision(s)")


class DiffOutput(enum.StrEnum):
    table = "table"
    json = "json"


@app.command(name="diff")
def diff_command(
    ctx: typer.Context,
    view: Annotated[str, typer.Argument(help="The view whose indexes to compare.")],
    revision: Annotated[str | None, typer.Option(
        help="The revision to compare (default: the candidate).")] = None,
    against: Annotated[str | None, typer.Option(
        help="The revision to compare it with (default: the active).")] = None,
    output: Annotated[DiffOutput, typer.Option(
        "-o", "--output", help="table or json.")] = DiffOutput.table,
    sink_address: Annotated[str | None, typer.Option(
        metavar="HOST:PORT", help="Connect here instead of the sink Secret's address, e.g. "
                                  "to a `kubectl port-forward` of the sink.")] = None,
) -> None:
    """What a revision's index changes against another's: rows only in one, rows whose
    values differ (per column), a few keys of each; judged by spec.cutover.checks.diff if set.

    Connects to the sink with the view's sink Secret (read-only, as the cutover check runs).
    Exit 0: compared (and within the thresholds); 2: over the thresholds; 1: not compared."""
    target: ClusterTarget = ctx.obj
    with clear_errors():
        views, namespace = target.views(), target.resolved_namespace()
        obj = views.get(namespace, view)
        spec = DerivedViewSpec.model_validate(obj.get("spec") or {})
        compared = diff_request(f"{namespace}/{view}", spec, rows.parse_status(obj), revision,
                                against)
        secret = views.secret_data(namespace, spec.sink.secret_ref.name)
        try:
            measured, seconds = diff_indexes(spec.sink.kind, secret, compared.request,
                                             sink_address)
        except SinkUnavailable as exc:
            fail(f"{exc}; from outside the cluster, forward a port to the sink (kubectl "
                 "port-forward) and pass --sink-address HOST:PORT")
    if isinstance(measured, CouldNotRun):
        fail(f"the comparison could not run: {measured.cause}")
    if not isinstance(measured, DiffFound):
        fail(f"the sink answered {type(measured).__name__}, not a diff")
    render = diff_json if output is DiffOutput.json else diff_table
    out.file.write(render(compared, measured, seconds))
    out.file.flush()
    over = compared.judged is not None and judge_diff(compared.judged, measured)[0] in (
        CheckOutcome.Failed, CheckOutcome.Error)
    raise typer.Exit(2 if over else 0)


class PlanOutput(enum.StrEnum):
    text = "text"
    markdown = "markdown"
    json = "json"


RENDERERS = {PlanOutput.text: render_text, PlanOutput.markdown: render_markdown,
             PlanOutput.json: render_json}


@app.command(name="plan")
def plan_command(
    ctx: typer.Context,
    filenames: Annotated[list[str], typer.Option(
        "-f", "--filename", metavar="FILE|DIR|-", help="A manifest file, a folder of them, or - for stdin (YAML "
                                 "streams as helm template or kustomize print them); repeatable.")],
    output: Annotated[PlanOutput, typer.Option(
        "-o", "--output", help="text, markdown (a pull-request comment) or json.")
    ] = PlanOutput.text,
    server_dry_run: Annotated[bool, typer.Option(
        "--server-dry-run/--no-server-dry-run",
        help="Ask the API server whether it accepts each view (CRD schema, CEL, admission "
             "policy); nothing is stored. Needs create/update on derivedviews.")] = True,
    operator_namespace: Annotated[str, typer.Option(
        help="Namespace of the operator's StatefulSet (its tenancy policy and settings).")
    ] = OPERATOR_NAMESPACE,
    operator_name: Annotated[str, typer.Option(
        help="Name of the operator's StatefulSet.")] = OPERATOR_NAME,
    read_sources: Annotated[bool, typer.Option(
        "--read-sources/--no-read-sources",
        help="Read, as the operator does before a job, each view's Secrets (present and "
             "labelled), its schema registry, and for a replay its topics' offsets. Needs get "
             "on secrets in the views' namespaces and a route to Kafka and the registry.")
    ] = True,
) -> None:
    """What applying the manifests would do to each DerivedView, before it is applied.

    Exit 0: nothing replays and nothing is refused; 2: a replay or another change is
    planned; 1: something would be refused, or the cluster could not be read."""
    target: ClusterTarget = ctx.obj
    with clear_errors():
        manifests = read_manifests(filenames)
        api = target.api_client()
        views = Views(api)
        report = PlanReport([], skipped=manifests.skipped)
        settings = _installed_settings(api, operator_namespace, operator_name, report)
        settings = _with_shipped_template(settings, report)
        if not server_dry_run:
            report.warnings.append("no server-side dry run (--no-server-dry-run): the CRD "
                                   "schema, CEL rules and admission policies were not asked")
        sources = SourceReader(api, settings.tenancy) if read_sources else None
        if sources is None:
            report.warnings.append("no sources read (--no-read-sources): Secrets (present and "
                                   "labelled), schema registries and the logs' offsets were "
                                   "not asked; a new view's records are unknown")
        now = _now()
        for document in manifests.views:
            preview = _preview(document, target, views, settings, now,
                               server_dry_run=server_dry_run, sources=sources)
            report.previews.append(_read_sink_size(preview, views, settings,
                                                   read=sources is not None))
    out.file.write(RENDERERS[output](report))
    out.file.flush()
    raise typer.Exit(report.exit_code)


def _installed_settings(api: Any, namespace: str, name: str, report: PlanReport) -> Settings:
    """The operator's settings as its StatefulSet has them, else the chart's defaults (said)."""
    try:
        settings = from_env(operator_env(api, namespace, name))
    except (ViewsError, SettingsError) as exc:
        report.warnings.append(f"the installed tenancy policy was not read ({exc}): views are "
                               "judged by the chart's default policy")
        return Settings()
    return dataclasses.replace(settings, in_cluster=True)  # the operator runs in a pod


SINK_READ_TIMEOUT_SECONDS = 5
"""What reading an index's size may take at each step (connecting, the query): a sink that
does not answer leaves the size unknown, not the plan waiting."""


def _with_shipped_template(settings: Settings, report: PlanReport) -> Settings:
    """The settings with the SparkApplication template dv ships, which the jobs' resources
    are rendered from: the installation's is a file in the operator's pod, not read here."""
    if settings.spark.template:
        return settings
    try:
        template = load_template()
    except OSError as exc:
        report.warnings.append(f"the SparkApplication template was not read ({exc}): the "
                               "jobs' resources are not shown")
        return settings
    return dataclasses.replace(settings, spark=dataclasses.replace(
        settings.spark, template=template, template_path=None))


def _read_sink_size(preview: Preview, views: Views, settings: Settings, *, read: bool
                    ) -> Preview:
    """The preview with its active index's size read from the sink, read-only, with the
    view's sink Secret as the operator connects with it (its labels judged by the tenancy
    policy first); when it cannot be read (or `read` is off: --no-read-sources), why.
    Nothing is read for a refused view."""
    footprint = preview.footprint
    space = footprint.sink if footprint is not None else None
    if footprint is None or space is None or space.active_index is None or space.not_read:
        return preview
    measured = (space.with_size(*_index_size(preview.namespace, space, views, settings))
                if read else space.with_size(None, "not read (--no-read-sources)"))
    return dataclasses.replace(preview, footprint=dataclasses.replace(footprint, sink=measured))


def _index_size(namespace: str, space: SinkSpace, views: Views, settings: Settings
                ) -> tuple[int | None, str]:
    assert space.active_index is not None
    try:
        found = views.labelled_secret(namespace, space.secret)
    except ViewsError as exc:
        return None, str(exc)
    refusal = secret_refusal(namespace, space.secret, None if found is None else found[1],
                             settings.tenancy)
    if found is None or refusal is not None:
        return None, refusal.message if refusal is not None else "no sink Secret"
    try:
        size = index_bytes(space.kind, found[0], space.schema, space.active_index,
                           SINK_READ_TIMEOUT_SECONDS)
    except (SinkSecretInvalid, SinkUnavailable) as exc:
        return None, str(exc)
    if size is None:
        return None, f"the sink has no index {space.active_index}"
    return size, ""


def _preview(document: dict[str, Any], target: ClusterTarget, views: Views,
             settings: Settings, now: dt.datetime, *, server_dry_run: bool,
             sources: SourceReader | None) -> Preview:
    metadata = document.get("metadata") or {}
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        fail("a DerivedView in the manifests has no metadata.name")
    namespace = metadata.get("namespace") or target.resolved_namespace()
    found = views.find(namespace, name)
    live = None
    if found is not None:
        try:
            spec: DerivedViewSpec | None = DerivedViewSpec.model_validate(found.get("spec") or {})
        except pydantic.ValidationError:
            spec = None  # compared by its status's revision only
        live = LiveView(spec, rows.parse_status(found))
    refusal = None
    if server_dry_run:
        body = {**document, "metadata": {**metadata, "namespace": namespace}}
        said = views.dry_run(namespace, body, None if found is None
                             else found["metadata"].get("resourceVersion"))
        refusal = None if said is None else Refusal(*said)
    reads = None
    if sources is not None:
        try:
            planned = DerivedViewSpec.model_validate(document.get("spec") or {})
        except pydantic.ValidationError:
            planned = None  # refused as InvalidSpec: nothing to read for it
        if planned is not None:
            replays = change_of(planned, live, settings, now).kind is ChangeKind.REPLAY
            reads = sources.read(planned, namespace, name, live.status if live else None,
                                 replays=replays)
    return preview_of(document.get("spec") or {}, namespace, name, live, settings, now,
                      server_refusal=refusal, reads=reads)


# Options of the `dv` group that kubectl users type after the command (`dv status -n shop`).
_GLOBAL_WITH_VALUE = ("-n", "--namespace", "--context", "--kubeconfig")


def hoist_global_options(argv: list[str]) -> list[str]:
    """Move group options given after the command to before it, where typer expects them."""
    commands = set(app_commands())
    at = next((i for i, a in enumerate(argv) if a in commands), None)
    if at is None:
        return argv
    head, tail, moved = argv[:at], [argv[at]], []
    rest = argv[at + 1:]
    i = 0
    while i < len(rest):
        arg = rest[i]
        if arg == "--":
            tail.extend(rest[i:])
            break
        name, eq, _ = arg.partition("=")
        if name in _GLOBAL_WITH_VALUE and eq:
            moved.append(arg)
        elif arg in _GLOBAL_WITH_VALUE and i + 1 < len(rest):
            moved.extend(rest[i:i + 2])
            i += 1
        else:
            tail.append(arg)
        i += 1
    return [*head, *moved, *tail]


def app_commands() -> list[str]:
    return [c.name or (c.callback.__name__ if c.callback else "") for c in app.registered_commands]


def run_dv() -> None:
    app(args=hoist_global_options(sys.argv[1:]), prog_name="dv")
