"""A spec the operator cannot judge ends Stalled with a bounded message naming the step, its
status is not rewritten while nothing changed, and its deletion plans as the real spec's."""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

import pytest
import sqlglot
from pydantic import ValidationError

from derived_views.api.spec import DerivedViewSpec
from derived_views.api.status import CONDITION_MESSAGE_LIMIT, Condition
from derived_views.core import actions as A
from derived_views.core import reasons
from derived_views.core.judges import unjudged
from support.world.samples import SQL_V1, SQL_V2, spec_body
from support.world.world import World, served_world

NOW = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
DEEP_SQL = "SELECT " + "(" * 400 + "1" + ")" * 400 + " AS x FROM events"


def raised_in(module: str, exc: Exception) -> Exception:
    """`exc` as raised by a function of `module` (a judge handed in as code, not a mock)."""
    namespace: dict[str, Any] = {"__name__": module}
    exec("def judge(exc):\n    raise exc\n", namespace)
    try:
        namespace["judge"](exc)
    except Exception as caught:
        return caught
    raise AssertionError("the judge did not raise")


@pytest.mark.parametrize(("module", "step"), [
    ("derived_views.core.judges.transform", "the SQL check"),
    ("derived_views.core.judges.spark_ddl", "reading spec.source.schema"),
    ("derived_views.core.judges.avro_schema", "reading spec.source.avro.readerSchema"),
    ("derived_views.core.judges.source_schema", "reading the events' schema"),
    ("derived_views.core.judges.tenancy", "the tenancy policy"),
    ("derived_views.core.judges.transform_policy", "the tenancy policy's SQL check"),
    ("derived_views.core.job.sparkapplication", "rendering the job"),
    ("derived_views.core.plan", "planning"),
    ("somewhere.else", "planning"),
])
def test_the_failed_step_is_named_by_the_innermost_operator_frame(module: str, step: str
                                                                  ) -> None:
    assert unjudged.failed_step(raised_in(module, ValueError("no"))) == step


def test_a_real_recursion_error_gives_a_bounded_message_with_type_and_first_line() -> None:
    try:
        sqlglot.parse(DEEP_SQL * 4, read="spark")
    except RecursionError as exc:
        caught: Exception = exc
    else:
        pytest.skip("this sqlglot parses 400 nested parentheses")
    message = unjudged.not_judged_message(caught, serving="abc123")
    assert "RecursionError: maximum recursion depth exceeded" in message
    assert "fix the spec" in message and "report this" in message
    assert "revision abc123 keeps serving" in message
    assert "Traceback" not in message and "\n" not in message


def test_a_schema_step_that_failed_suggests_a_smaller_schema() -> None:
    exc = raised_in("derived_views.core.judges.avro_schema", MemoryError())
    message = unjudged.not_judged_message(exc, serving=None)
    assert message.startswith("reading spec.source.avro.readerSchema failed on this spec "
                              "(MemoryError): fix the spec (for example, a smaller, less "
                              "nested schema)")
    sql = unjudged.not_judged_message(raised_in("derived_views.core.judges.transform", MemoryError()),
                                      serving=None)
    assert "(for example, less deeply nested SQL)" in sql


def test_a_huge_exception_message_is_cut_to_its_first_line_and_the_limit() -> None:
    exc = raised_in("derived_views.core.judges.transform",
                    ValueError("unknown column " + "x" * 32768 + "\nsecond line"))
    message = unjudged.not_judged_message(exc, serving=None)
    assert message.startswith("the SQL check failed on this spec (ValueError: unknown column x")
    assert "second line" not in message
    assert len(message) < 700


def stalled_body(conditions: list[dict[str, Any]] | None = None, generation: int = 3
                 ) -> dict[str, Any]:
    body: dict[str, Any] = {"metadata": {"name": "v", "namespace": "ns",
                                         "generation": generation}}
    if conditions is not None:
        body["status"] = {"observedGeneration": generation, "conditions": conditions}
    return body


def test_the_stalled_status_has_all_five_conditions_with_a_bounded_message() -> None:
    patch = unjudged.stalled_status(stalled_body(), reasons.SPEC_NOT_JUDGED, "m" * 40000, NOW)
    assert patch is not None and patch["observedGeneration"] == 3
    conditions = {c["type"]: c for c in patch["conditions"]}
    assert set(conditions) == {"Ready", "Reconciling", "Stalled", "CaughtUp", "Degraded"}
    assert conditions["Stalled"]["status"] == "True"
    assert conditions["Stalled"]["reason"] == "SpecNotJudged"
    assert conditions["Ready"]["status"] == "False"
    assert len(conditions["Stalled"]["message"]) == CONDITION_MESSAGE_LIMIT
    assert conditions["Stalled"]["message"].endswith("...")
    assert conditions["Stalled"]["lastTransitionTime"] == "2026-03-01T12:00:00Z"


def test_an_unchanged_stalled_status_is_not_written_again() -> None:
    first = unjudged.stalled_status(stalled_body(), reasons.INVALID_SPEC, "spec.x: bad", NOW)
    assert first is not None
    stored = stalled_body(first["conditions"])
    later = NOW + dt.timedelta(minutes=5)
    assert unjudged.stalled_status(stored, reasons.INVALID_SPEC, "spec.x: bad", later) is None
    # another message: written, but the time of the transition stays
    changed = unjudged.stalled_status(stored, reasons.INVALID_SPEC, "spec.y: bad", later)
    assert changed is not None
    stalled = next(c for c in changed["conditions"] if c["type"] == "Stalled")
    assert stalled["message"] == "spec.y: bad"
    assert stalled["lastTransitionTime"] == "2026-03-01T12:00:00Z"
    # a new generation: written
    assert unjudged.stalled_status(stalled_body(first["conditions"], generation=4),
                                   reasons.INVALID_SPEC, "spec.x: bad", later) is not None


def test_caught_up_is_kept_and_unreadable_stored_conditions_are_rebuilt() -> None:
    caught_up = {"type": "CaughtUp", "status": "True", "reason": "LagWithinGate",
                 "message": "lag 0", "lastTransitionTime": "2026-02-01T00:00:00Z"}
    broken = {"type": "Ready", "status": "Maybe"}
    patch = unjudged.stalled_status(stalled_body([caught_up, broken]), reasons.INVALID_SPEC,
                                    "spec.x: bad", NOW)
    assert patch is not None
    parsed = {c["type"]: Condition.model_validate(c) for c in patch["conditions"]}
    assert (parsed["CaughtUp"].status, parsed["CaughtUp"].reason) == ("True", "LagWithinGate")
    assert parsed["Ready"].status == "False"


def test_the_invalid_spec_message_names_each_field() -> None:
    body = spec_body(SQL_V1)
    body["transform"]["sql"] = "x" * 70000
    with pytest.raises(ValidationError) as info:
        DerivedViewSpec.model_validate(body)
    message = unjudged.invalid_spec_message(info.value)
    assert message.startswith("spec.transform.sql: String should have at most 65536 characters")
    assert "xxxx" not in message  # the author's input is not quoted back


def _delete(world: World) -> list[A.Action]:
    world.deletion_timestamp = world.now
    world.tick()
    return world.reconcile()


@pytest.mark.parametrize("policy", ["Retain", "Delete"])
def test_the_stand_in_spec_plans_the_same_deletion_as_the_real_one(policy: str) -> None:
    world = served_world(delete_lingers=True)
    world.edit(spec_body(SQL_V1, deletionPolicy=policy))
    world.reconcile()
    world.edit(spec_body(SQL_V2, deletionPolicy=policy))  # a candidate beside the active
    for _ in range(3):
        world.reconcile()
        world.tick()
    stand_in_world = copy.deepcopy(world)
    stand_in = unjudged.deletion_spec(stand_in_world.spec_body)
    assert stand_in is not None
    stand_in_world.spec_body = stand_in.model_dump(mode="json", by_alias=True,
                                                   exclude_none=True)
    for _ in range(3):  # jobs stop first, then the sink is cleaned and the view released
        real, neutral = _delete(world), _delete(stand_in_world)
        assert [a for a in neutral if not isinstance(a, (A.RecordIntent, A.UpdateStatus))] \
            == [a for a in real if not isinstance(a, (A.RecordIntent, A.UpdateStatus))]
    assert world.gone and stand_in_world.gone
    assert stand_in_world.tables == world.tables and stand_in_world.alias == world.alias


def test_the_stand_in_sets_aside_what_cannot_be_judged() -> None:
    body = spec_body(DEEP_SQL, deletionPolicy="Delete")
    body["source"]["schema"] = "a STRUCT<" * 300 + "b INT" + ">" * 300
    body["cutover"] = {"checks": {"assertions": [{"name": "c", "sql": "SELECT 1 FROM {index}"
                                                  + " WHERE ((((1))))" * 100}]}}
    stand_in = unjudged.deletion_spec(body)
    assert stand_in is not None
    assert stand_in.transform.sql == unjudged.NEUTRAL_SQL
    assert stand_in.cutover.checks is None
    assert stand_in.sink.model_dump() == DerivedViewSpec.model_validate(body).sink.model_dump()
    assert stand_in.deletion_policy == "Delete"


def test_no_stand_in_when_the_sink_itself_does_not_read() -> None:
    body = spec_body(SQL_V1)
    body["sink"] = {"postgres": {"table": "Not A Table"}}
    assert unjudged.deletion_spec(body) is None
    assert unjudged.deletion_spec({"source": "nonsense"}) is None
