"""The planner and the schema registry of an Avro view, scenario by scenario (core_world).

What the registry told the pass is on the observation (core.observed.RegistryObserved):
a pinned reader schema fetched or not found, a registry that cannot be asked, topics with
nothing under their value subject. No job starts without its reader schema or while the
registry cannot be asked; what serves keeps serving; what a revision started with is kept
in its status and renders its job again whatever the registry holds later.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from derived_views.api.status import SubjectVersion
from derived_views.core import actions as A
from derived_views.core import reasons
from derived_views.core.observed import RegistryObserved
from derived_views.core.revision import revision_of
from support.world.samples import SQL_V1, SQL_V2, spec_body
from support.world.world import World, run_until

WHERE = "registry.example:8081"
READER = {"type": "record", "name": "Order", "fields": [
    {"name": "order_id", "type": "string"}, {"name": "customer_id", "type": "string"},
    {"name": "amount", "type": "long"}]}
V3 = SubjectVersion(subject="orders-value", version=3)
V4 = SubjectVersion(subject="orders-value", version=4)
TEXT_V3 = json.dumps(READER)
TEXT_V4 = json.dumps({**READER, "fields": [*READER["fields"], {
    "name": "channel", "type": "string", "default": "web"}]})
NOT_FOUND = (reasons.READER_SCHEMA_NOT_FOUND,
             f"source.avro.readerSchema: subject orders-value has no version 3 in the schema "
             f"registry at {WHERE}: register it, or pin a version the subject has")
UNREACHABLE = (reasons.SCHEMA_REGISTRY_UNREACHABLE,
               f"schema registry at {WHERE} cannot be reached ([Errno 111] Connection "
               "refused): check that it runs and the Secret's url (secret shop/registry)")
ANSWERS = RegistryObserved(where=WHERE)
"""A registry that answers, with every value subject, asked for no reader schema."""


def avro(sql: str = SQL_V1, reader: dict[str, Any] | None = None,
         **cutover: Any) -> dict[str, Any]:
    """The samples' view over Avro values: pinned at `reader` (subject, version), else
    inline."""
    body = spec_body(sql, cutover=cutover) if cutover else spec_body(sql)
    source = body["source"]
    source.pop("schema")
    source.update(format="avro", avro={
        "registry": {"secretRef": {"name": "registry"}},
        "readerSchema": copy.deepcopy(reader) if reader else {"schema": TEXT_V3}})
    return body


def pinned(version: int = 3, sql: str = SQL_V1, **cutover: Any) -> dict[str, Any]:
    return avro(sql, {"subject": "orders-value", "version": version}, **cutover)


def creates(actions: list[A.Action]) -> list[A.CreateSparkApplication]:
    return [a for a in actions if isinstance(a, A.CreateSparkApplication)]


def reader_of(create: A.CreateSparkApplication) -> Any:
    config = json.loads(create.manifest["spec"]["arguments"][1])
    return json.loads(config["source"]["avro"]["readerSchema"])


def message(world: World, type_: str) -> str:
    condition = world.parsed_status().condition(type_)
    assert condition is not None
    return condition.message


def test_a_pinned_reader_schema_the_registry_lacks_starts_no_job_until_registered() -> None:
    world = World(pinned(), registry=RegistryObserved(where=WHERE, reader_problem=NOT_FOUND))
    revision = revision_of(world.spec)
    for _ in range(3):
        assert creates(world.reconcile()) == []
        world.tick()
    assert world.condition("Stalled") == ("True", "ReaderSchemaNotFound")
    assert message(world, "Stalled") == (
        f"{NOT_FOUND[1]}; no job is started for revision {revision} until its reader schema "
        "is read")
    assert world.condition("Reconciling") == ("False", "ReaderSchemaNotFound")
    assert message(world, "Reconciling") == f"revision {revision} waits for the schema registry"
    assert world.parsed_status().revisions == []
    # registered: the next pass starts the job with the fetched text, and the status keeps it
    world.registry = RegistryObserved(where=WHERE, reader_schemas={V3: TEXT_V3})
    (create,) = creates(world.reconcile())
    assert reader_of(create) == READER
    record = world.parsed_status().record(revision)
    assert record is not None and record.content is not None
    assert (record.content.reader_schema, record.content.value_schema) == (V3, TEXT_V3)
    assert world.condition("Stalled") == ("False", "AsExpected")


def test_a_started_pinned_revision_renders_from_its_status_whatever_the_registry_says() -> None:
    world = World(pinned(), registry=RegistryObserved(where=WHERE, reader_schemas={V3: TEXT_V3}))
    run_until(world, lambda w: w.alias is not None)
    # the version is deleted from the registry (the shell would not even ask: it is kept)
    world.registry = RegistryObserved(where=WHERE, reader_problem=NOT_FOUND)
    app = next(iter(world.apps))
    del world.apps[app]  # the job object is lost
    (create,) = creates(world.reconcile())
    assert create.name == app and reader_of(create) == READER
    world.settle(ticks=4)
    assert world.condition("Ready") == ("True", "Serving")
    assert world.condition("Stalled") == ("False", "AsExpected")


def test_an_unreachable_registry_holds_new_jobs_and_the_active_keeps_serving() -> None:
    world = World(avro(), registry=ANSWERS)
    run_until(world, lambda w: w.alias is not None)
    served, active_app = world.alias, next(iter(world.apps))
    world.registry = RegistryObserved(where=WHERE, problem=UNREACHABLE)
    world.edit(avro(SQL_V2))
    candidate = revision_of(world.spec)
    for _ in range(4):
        actions = world.reconcile()
        assert creates(actions) == []
        assert not any(isinstance(a, A.DeleteSparkApplication) for a in actions)
        world.tick()
    assert world.alias == served and list(world.apps) == [active_app]
    active = world.parsed_status().active
    assert active is not None
    assert world.condition("Stalled") == ("True", "SchemaRegistryUnreachable")
    assert message(world, "Stalled") == (
        f"{UNREACHABLE[1]}; no job of this view is started until the registry can be asked "
        f"(running jobs are left alone), revision {active.revision} keeps serving")
    assert message(world, "Reconciling") == (
        f"revision {candidate} waits for the schema registry")
    # it answers again: the candidate starts
    world.registry = ANSWERS
    (create,) = creates(world.reconcile())
    assert create.revision == candidate


def test_an_unreachable_registry_defers_a_restart_for_new_job_settings() -> None:
    world = World(avro(), registry=ANSWERS)
    run_until(world, lambda w: w.alias is not None)
    world.registry = RegistryObserved(where=WHERE, problem=UNREACHABLE)
    body = avro()
    body["spark"] = {"executor": {"instances": 3}}
    world.edit(body)
    actions = world.reconcile()
    assert not any(isinstance(a, A.DeleteSparkApplication) for a in actions)
    world.registry = ANSWERS
    actions = world.reconcile()
    assert any(isinstance(a, A.DeleteSparkApplication) for a in actions)


def test_a_topic_without_a_value_subject_warns_once_and_holds_nothing() -> None:
    world = World(avro(), registry=RegistryObserved(where=WHERE,
                                                    unregistered=frozenset({"orders-value"})))
    assert len(creates(world.reconcile())) == 1
    warnings = [e for e in world.events if e.reason == reasons.SUBJECT_NOT_FOUND]
    assert [e.type for e in warnings] == ["Warning"]
    assert warnings[0].message.startswith(
        f"No schema is registered under orders-value in the schema registry at {WHERE}: "
        f"revision {revision_of(world.spec)} starts anyway")
    world.tick()
    world.reconcile()
    assert message(world, "Reconciling").endswith(
        "; no schema is registered under orders-value (records are read by their writers' "
        "schema ids)")
    assert world.condition("Stalled") == ("False", "AsExpected")
    world.settle(ticks=6)
    assert world.event_reasons().count(reasons.SUBJECT_NOT_FOUND) == 1
    assert world.alias is not None


def test_a_rollback_to_a_retained_pinned_revision_needs_no_registry() -> None:
    world = World(pinned(keepPreviousRunningSeconds=0),
                  registry=RegistryObserved(where=WHERE, reader_schemas={V3: TEXT_V3}))
    run_until(world, lambda w: w.alias is not None)
    first = revision_of(world.spec)
    world.registry = RegistryObserved(where=WHERE, reader_schemas={V4: TEXT_V4})
    world.edit(pinned(4, keepPreviousRunningSeconds=0))
    second = revision_of(world.spec)
    assert second != first
    run_until(world, lambda w: w.parsed_status().active is not None
              and w.parsed_status().active.revision == second)  # type: ignore[union-attr]
    assert world.phases()[first] == "Retiring"
    # version 3 is gone from the registry; going back to it resumes from the kept text
    world.registry = RegistryObserved(where=WHERE, reader_problem=NOT_FOUND)
    world.tick()
    world.edit(pinned(3, keepPreviousRunningSeconds=0))
    (create,) = creates(world.reconcile())
    assert create.revision == first and reader_of(create) == READER
    assert "RollbackStarted" in world.event_reasons()
    assert world.violations == []
