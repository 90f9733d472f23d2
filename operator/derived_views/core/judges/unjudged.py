"""A spec the operator could not judge: a Stalled status, never an escaped exception.

Judging a spec runs its author's text through parsers (pydantic, the SQL and schema check,
the tenancy policy, the job's rendering). Each judge bounds its own work (counted: the core
reads no clock) and refuses what is beyond it with a reason of its own (InvalidSchema,
PolicyViolation): the schema judges refuse past their limits of characters, nesting and
DDL produced (core.judges.spark_ddl, core.judges.avro_schema). One that raises all the same (sqlglot's
RecursionError on a few hundred nested parentheses, anything unforeseen) would raise again
on every retry: the view could then be neither updated nor deleted. The shell catches it,
and this module says which step failed in a bounded message, builds the Stalled status
(kept as is while nothing changed, so an unjudged view costs no status write per poll), and
gives the deletion plan a spec it can run on whatever the author wrote.
"""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

from pydantic import ValidationError

from derived_views.api.spec import DerivedViewSpec
from derived_views.api.status import Condition
from derived_views.core import conditions as cond
from derived_views.core.times import utc

FIRST_LINE_LIMIT = 240
"""Characters of the exception's first line quoted: it may hold the author's input."""

STEPS: tuple[tuple[str, str], ...] = (
    ("derived_views.core.job.sparkapplication", "rendering the job"),
    ("derived_views.core.judges.transform_policy", "the tenancy policy's SQL check"),
    ("derived_views.core.judges.tenancy", "the tenancy policy"),
    ("derived_views.core.judges.assertion_sql", "the cutover checks' SQL check"),
    ("derived_views.core.cutover.checks", "the cutover checks' SQL check"),
    ("derived_views.core.judges.spark_ddl", "reading spec.source.schema"),
    ("derived_views.core.judges.avro_schema", "reading spec.source.avro.readerSchema"),
    ("derived_views.core.judges.source_schema", "reading the events' schema"),
    ("derived_views.core.judges.transform", "the SQL check"),
    ("derived_views.api", "reading the spec"),
)
"""Module prefix of the innermost operator frame -> the step people are told failed."""
PLANNING = "planning"
SCHEMA_STEPS = frozenset({"reading spec.source.schema", "reading spec.source.avro.readerSchema",
                          "reading the events' schema"})
"""Steps whose fix is a smaller schema, said so in the message."""

NEUTRAL_SCHEMA = "dv_unjudged STRING"
NEUTRAL_SQL = "SELECT * FROM events"


def failed_step(exc: BaseException) -> str:
    """The judging step that raised: named by the innermost frame of the operator's own code
    (frames below it are the parser's)."""
    module = ""
    tb: TracebackType | None = exc.__traceback__
    while tb is not None:
        name = str(tb.tb_frame.f_globals.get("__name__", ""))
        if name.startswith("derived_views."):
            module = name
        tb = tb.tb_next
    return next((step for prefix, step in STEPS
                 if module == prefix or module.startswith(prefix + ".")), PLANNING)


def first_line(exc: BaseException) -> str:
    """`Type: first line of its message`, cut to FIRST_LINE_LIMIT characters."""
    lines = str(exc).strip().splitlines()
    text = lines[0].strip() if lines else ""
    if len(text) > FIRST_LINE_LIMIT:
        text = text[:FIRST_LINE_LIMIT - 3] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def not_judged_message(exc: BaseException, serving: str | None) -> str:
    """What the author reads: which step failed, on what, and what to do."""
    step = failed_step(exc)
    example = ("a smaller, less nested schema" if step in SCHEMA_STEPS
               else "less deeply nested SQL")
    keeps = f"revision {serving} keeps serving, " if serving else ""
    return (f"{step} failed on this spec ({first_line(exc)}): fix the spec (for example, "
            f"{example}) or report this to the platform team; until then nothing changes for "
            f"this view ({keeps}no job is started or stopped) and deleting it still works")


def invalid_spec_message(exc: ValidationError) -> str:
    """Every field pydantic refused, by its path in the spec (cut by the condition)."""
    return "; ".join(f"spec.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
                     for e in exc.errors(include_url=False, include_input=False))


def previous_conditions(status: Mapping[str, Any] | None) -> list[Condition]:
    """The stored conditions that still read; one that does not is rebuilt."""
    found = []
    for raw in (status or {}).get("conditions") or []:
        try:
            found.append(Condition.model_validate(raw))
        except ValidationError:
            continue
    return found


def stalled_conditions(reason: str, message: str, previous: Sequence[Condition],
                       now: dt.datetime, generation: int) -> list[Condition]:
    """All five conditions for a spec that cannot run: Stalled and Degraded with the reason,
    not Ready, not Reconciling; CaughtUp as it was (the lag is not measured meanwhile)."""
    V = cond.Verdict
    before = {c.type: c for c in previous}
    caught_up = before.get(cond.CAUGHT_UP)
    verdicts = {
        cond.READY: V("False", reason, message),
        cond.RECONCILING: V("False", reason, "the spec cannot be judged: nothing is done"),
        cond.STALLED: V("True", reason, message),
        cond.CAUGHT_UP: (V(caught_up.status, caught_up.reason, caught_up.message)
                         if caught_up is not None else V("Unknown", reason, "lag not measured")),
        cond.DEGRADED: V("True", reason, message),
    }
    return cond.build_conditions(verdicts, previous, utc(now), generation)


def stalled_status(body: Mapping[str, Any], reason: str, message: str, now: dt.datetime
                   ) -> dict[str, Any] | None:
    """The status patch for a spec that cannot run; None when the stored status already says
    exactly this (same conditions, same generation): no write, no watch event, per poll."""
    generation = int(body["metadata"].get("generation", 0))
    stored = body.get("status") or {}
    previous = previous_conditions(stored)
    built = stalled_conditions(reason, message, previous, now, generation)
    if previous == built and stored.get("observedGeneration") == generation:
        return None
    return {"observedGeneration": generation,
            "conditions": [c.model_dump(mode="json", by_alias=True, exclude_none=True)
                           for c in built]}


def deletion_spec(raw: Mapping[str, Any]) -> DerivedViewSpec | None:
    """The spec with what is judged (transform, source.schema and format, cutover) replaced
    by neutral values, for the deletion plan: it reads the sink, the deletion policy and the
    view's jobs, never those. None when the rest does not read either."""
    spec = copy.deepcopy(dict(raw))
    source = spec.get("source")
    if not isinstance(source, dict):
        return None
    source.update({"schema": NEUTRAL_SCHEMA, "format": "json"})
    source.pop("avro", None)  # json takes a DDL and no Avro
    spec["transform"] = {"sql": NEUTRAL_SQL}
    spec.pop("cutover", None)
    try:
        return DerivedViewSpec.model_validate(spec)
    except ValidationError:
        return None
