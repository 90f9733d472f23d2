"""Every judge of a spec's schema over the hostile-schema corpus (tests/hostile_specs_corpus.py):
each hostile schema is refused with its reason and words, each of the largest legitimate ones
is accepted, and the time each judge takes on its worst case goes to
`<state dir>/results/schema_judging.json` (times are recorded, never asserted: the judges'
bounds are counted work, held by test_avro_schema.py and test_spark_ddl.py).

The judges, in the order a pass meets them: reading the spec (the CRD's bounds, pydantic),
the Avro reader schema's translation (core.judges.avro_schema), the DDL check (core.judges.spark_ddl, also
over the DDL an accepted reader schema becomes), the spec's whole check (core.judges.transform,
which the planner runs), and a planner pass of the tests' world (core.plan: judging, and
rendering the job of an accepted spec).
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import ValidationError

from derived_views.api.spec import DerivedViewSpec
from derived_views.core import reasons
from derived_views.core.judges import transform as sql_check
from derived_views.core.judges.avro_schema import MAX_SCHEMA_DEPTH, AvroSchemaError, spark_ddl
from derived_views.core.judges.spark_ddl import MAX_DDL_CHARS, MAX_NESTING, DdlError, parse_schema
from derived_views.core.observed import RegistryObserved
from support.corpora.hostile_specs import HOSTILE, KEY, LEGITIMATE, SchemaCase
from support.results import results_dir
from support.world.samples import spec_body
from support.world.world import World

REGISTRY = RegistryObserved(where="registry.example:8081")
RUNS = 3
"""Runs per judge and schema: the median is recorded."""
ACCEPTED = "accepted"


def body(case: SchemaCase) -> dict[str, Any]:
    """The samples' view around the case's schema, keyed by its `id` column."""
    spec = spec_body(case.sql, sink={"primaryKey": [KEY]})
    if case.fmt == "avro":
        spec["source"].pop("schema")
        spec["source"].update(format="avro", avro={
            "registry": {"secretRef": {"name": "registry"}},
            "readerSchema": {"schema": case.text}})
    else:
        spec["source"]["schema"] = case.text
    return spec


def read_spec(case: SchemaCase) -> str:
    try:
        DerivedViewSpec.model_validate(body(case))
    except ValidationError as exc:
        return f"{reasons.INVALID_SPEC}: {exc.errors()[0]['msg']}"
    return ACCEPTED


def translate(case: SchemaCase) -> str:
    try:
        spark_ddl(case.text)
    except AvroSchemaError as exc:
        return f"{reasons.INVALID_SCHEMA}: {exc}"
    return ACCEPTED


def ddl_check(case: SchemaCase) -> str:
    try:
        parse_schema(spark_ddl(case.text) if case.fmt == "avro" else case.text)
    except (DdlError, AvroSchemaError) as exc:
        return f"{reasons.INVALID_SCHEMA}: {exc}"
    return ACCEPTED


def spec_check(case: SchemaCase) -> str:
    refusal = sql_check.check_spec(DerivedViewSpec.model_validate(body(case)))
    return ACCEPTED if refusal is None else f"{refusal.reason}: {refusal.message}"


def planner_pass(case: SchemaCase) -> str:
    world = World(body(case), registry=REGISTRY if case.fmt == "avro" else None)
    world.reconcile()
    stalled = world.parsed_status().condition("Stalled")
    if stalled is None or stalled.status != "True":
        return ACCEPTED
    return f"{stalled.reason}: {stalled.message}"


SCHEMA_JUDGES = ("core.judges.avro_schema.spark_ddl", "core.judges.spark_ddl.parse_schema")
JUDGES: dict[str, tuple[Callable[[SchemaCase], str], Callable[[SchemaCase], bool]]] = {
    "reading the spec (CRD bounds, pydantic)": (read_spec, lambda c: True),
    "core.judges.avro_schema.spark_ddl": (translate, lambda c: c.fmt == "avro"),
    "core.judges.spark_ddl.parse_schema": (ddl_check, lambda c: c.fmt == "json" or (
        c.reason == reasons.INVALID_TRANSFORM or not c.says)),
    "core.judges.transform.check_spec": (spec_check, lambda c: c.layer == "operator"),
    "core.plan (a planner pass)": (planner_pass, lambda c: c.layer == "operator"),
}
"""Each judge, and the cases it is given: a spec the CRD refuses reaches no later judge."""


def expected(judge: str, case: SchemaCase) -> tuple[str, str]:
    """The reason and the words a judge's verdict on the case must hold."""
    if not case.says or (judge in SCHEMA_JUDGES and case.reason == reasons.INVALID_TRANSFORM):
        return ACCEPTED, ""
    if judge.startswith("reading the spec"):
        return (reasons.INVALID_SPEC, "at most") if case.layer == "admission" else (ACCEPTED, "")
    return case.reason, case.says


def verdict_is_right(judge: str, case: SchemaCase, verdict: str) -> bool:
    reason, words = expected(judge, case)
    return verdict == ACCEPTED if reason == ACCEPTED else (
        verdict.startswith(f"{reason}: ") and words in verdict)


@pytest.mark.parametrize("case", HOSTILE, ids=[c.what for c in HOSTILE])
def test_every_judge_refuses_each_hostile_schema(case: SchemaCase) -> None:
    for judge, (run, given) in JUDGES.items():
        if given(case):
            verdict = run(case)
            assert verdict_is_right(judge, case, verdict), (judge, verdict[:400])


@pytest.mark.parametrize("case", LEGITIMATE, ids=[c.what for c in LEGITIMATE])
def test_every_judge_accepts_the_largest_legitimate_schemas(case: SchemaCase) -> None:
    for judge, (run, given) in JUDGES.items():
        if given(case):
            assert run(case) == ACCEPTED, judge


def timed(run: Callable[[SchemaCase], str], case: SchemaCase) -> tuple[str, float, float]:
    """The verdict, and the median wall and CPU milliseconds of RUNS runs."""
    walls, cpus, verdict = [], [], ""
    for _ in range(RUNS):
        sql_check._check.cache_clear()  # each run judges afresh, as a new spec is
        wall, cpu = time.perf_counter(), time.process_time()
        verdict = run(case)
        cpus.append((time.process_time() - cpu) * 1000)
        walls.append((time.perf_counter() - wall) * 1000)
    return verdict, statistics.median(walls), statistics.median(cpus)


def test_the_worst_case_of_each_judge_is_recorded() -> None:
    cases: list[dict[str, Any]] = []
    worst: dict[str, dict[str, Any]] = {}
    wrong = []
    for case in [*HOSTILE, *LEGITIMATE]:
        row: dict[str, Any] = {"class": case.cls, "what": case.what, "format": case.fmt,
                               "characters": len(case.text), "hostile": bool(case.says),
                               "verdicts": {}, "wall_ms": {}, "cpu_ms": {}}
        for judge, (run, given) in JUDGES.items():
            if not given(case):
                continue
            verdict, wall, cpu = timed(run, case)
            if not verdict_is_right(judge, case, verdict):
                wrong.append((judge, case.what, verdict[:200]))
            row["verdicts"][judge] = verdict[:300]
            row["wall_ms"][judge], row["cpu_ms"][judge] = round(wall, 2), round(cpu, 2)
            if cpu >= worst.get(judge, {}).get("cpu_ms", -1.0):
                worst[judge] = {"what": case.what, "hostile": bool(case.says),
                                "wall_ms": round(wall, 2), "cpu_ms": round(cpu, 2)}
        cases.append(row)
    assert wrong == []
    results = results_dir()
    (results / "schema_judging.json").write_text(json.dumps({
        "runs": RUNS, "note": "median of the runs; worst: the schema each judge took longest on",
        "limits": {"characters": MAX_DDL_CHARS, "nesting": MAX_NESTING, "avro_depth": MAX_SCHEMA_DEPTH},
        "worst": worst, "cases": cases}, indent=2))
