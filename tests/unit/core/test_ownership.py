"""Ownership, not names: a view never resumes into, switches to or drops another view's index.

Two views of the same content and sink table in two namespaces name the same index
(`<table>__<revision>`). In the simulated world they share one database: tables, ledger,
checkpoints, the owner each index records and the alias. Before owners were recorded, the
second view resumed into the first's index and, deleted with deletionPolicy Delete,
dropped it while the first was still building (no alias yet claimed the table).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from derived_views.api.status import DerivedViewStatus
from derived_views.core import actions as A
from derived_views.core import reasons
from derived_views.core.observed import (
    IndexOwner,
    LedgerPosition,
    Observed,
    SinkObserved,
    SparkApplicationObserved,
    ViewObserved,
)
from derived_views.core.plan import plan
from support.world.samples import (
    I2,
    NAMESPACE,
    SQL_V1,
    SQL_V2,
    T0,
    UID,
    VIEW,
    make_settings,
    make_spec,
    spec_body,
)
from support.world.world import World

R1 = "71250ff800"
I1 = f"orders_by_customer__{R1}"
OTHER_UID = "7c1d2e3f-0000-4000-8000-00000000b111"
ENDS = {("orders", 0): 120, ("orders", 1): 80}


def twin(first: World, *, namespace: str = "billing", uid: str = OTHER_UID,
         body: dict[str, Any] | None = None) -> World:
    """A second view sharing the first's database and Kafka (same objects, not copies)."""
    return World(body or spec_body(SQL_V1, deletionPolicy="Delete"), now=first.now,
                 ends=first.ends, tables=first.tables, ledger=first.ledger,
                 ledger_history=first.ledger_history, checkpoints=first.checkpoints,
                 spent_checkpoints=first.spent_checkpoints, owners=first.owners,
                 namespace=namespace, uid=uid)


def step(worlds: list[World], ticks: int = 1) -> None:
    """Each view reconciles in turn (the alias is one object in the database), then time
    passes for all."""
    for _ in range(ticks):
        for i, world in enumerate(worlds):
            world.reconcile()
            for other in worlds[i + 1:] + worlds[:i]:
                other.alias, other.alias_owner = world.alias, world.alias_owner
        for world in worlds:
            world.tick()


def sink_effects(world: World) -> list[A.Action]:
    return [a for actions in world.plans for a in actions
            if isinstance(a, (A.SwitchAlias, A.DropAlias, A.DropIndex))]


def test_a_second_namespace_with_the_same_content_never_resumes_into_the_first_s_index(
        ) -> None:
    first = World(spec_body(SQL_V1))
    step([first], ticks=2)  # its job has started: the index exists and records its owner
    assert I1 in first.tables and first.owners[I1].uid == UID and first.alias is None
    second = twin(first)
    step([first, second], ticks=12)
    created = [a for plan_ in second.plans for a in plan_
               if isinstance(a, A.CreateSparkApplication)]
    assert created == []
    assert second.apps == {}
    assert second.condition("Stalled") in (("True", reasons.INDEX_OWNED_BY_ANOTHER_VIEW),
                                           ("True", "SinkTableClaimed"))
    assert sink_effects(second) == []
    assert first.alias == I1 and first.phases() == {R1: "Active"}
    assert first.violations == [] and second.violations == []


def test_the_refusal_names_both_views_and_the_index() -> None:
    first = World(spec_body(SQL_V1))
    step([first], ticks=2)
    second = twin(first)
    second.reconcile()
    stalled = second.parsed_status().condition("Stalled")
    assert stalled is not None and stalled.reason == reasons.INDEX_OWNED_BY_ANOTHER_VIEW
    assert I1 in stalled.message
    assert f"{NAMESPACE}/{VIEW}" in stalled.message and UID in stalled.message
    assert f"billing/{VIEW}" in stalled.message and OTHER_UID in stalled.message
    assert "spec.sink.postgres.table" in stalled.message


def test_deleting_the_second_view_while_the_first_builds_drops_nothing_of_the_first() -> None:
    """Both were created at once: both jobs were submitted, the first started first and owns
    the index; the second's job refused it. Deleted with deletionPolicy Delete before the
    first served (no alias claims the table), the second drops nothing."""
    first = World(spec_body(SQL_V1))
    second = twin(first)
    step([first, second], ticks=2)  # both jobs start; the first's, started first, owns I1
    assert first.owners[I1].uid == UID
    step([first, second], ticks=2)
    assert second.condition("Stalled") == ("True", reasons.INDEX_OWNED_BY_ANOTHER_VIEW)
    assert second.apps == {}  # its refused job was deleted, not restarted for good
    assert first.alias is None  # still building: no alias protects the table
    tables, ledger = set(first.tables), dict(first.ledger)
    second.deletion_timestamp = second.now
    step([second], ticks=3)
    assert second.gone
    assert sink_effects(second) == []
    assert first.tables == tables and first.ledger == ledger
    assert not any(loc.startswith(f"s3a://checkpoints/dv/{NAMESPACE}/")
                   for loc in first.spent_checkpoints)
    step([first], ticks=10)
    assert first.alias == I1 and first.violations == []
    deleted = next(e for e in second.events if e.reason == "Deleted")
    assert I1 in deleted.message and "0 index(es)" in deleted.message


def test_a_view_re_created_under_the_same_name_does_not_take_the_old_one_s_index() -> None:
    """Same namespace and name, another UID (deleted with Retain, then applied again)."""
    first = World(spec_body(SQL_V1))
    step([first], ticks=2)
    again = twin(first, namespace=NAMESPACE, uid=OTHER_UID)
    again.reconcile()
    assert again.condition("Stalled") == ("True", reasons.INDEX_OWNED_BY_ANOTHER_VIEW)
    assert again.apps == {}


def retained_and_re_created(alias_owner: IndexOwner | str | None = None,
                             deletion_policy: str = "Retain") -> tuple[World, World]:
    """The first view served SQL_V1, was deleted with Retain (its alias and index stay), and a
    view of the same namespace and name (another UID) is applied with other SQL."""
    first = World(spec_body(SQL_V1))
    step([first], ticks=8)
    assert first.alias == I1 and first.alias_owner == IndexOwner(NAMESPACE, VIEW, UID)
    if alias_owner is not None:
        first.alias_owner = alias_owner
    again = twin(first, namespace=NAMESPACE, uid=OTHER_UID,
                 body=spec_body(SQL_V2, deletionPolicy=deletion_policy))
    again.alias, again.alias_owner = first.alias, first.alias_owner
    return first, again


def test_a_view_re_created_with_other_sql_does_not_take_over_the_retained_alias() -> None:
    """Its index has another name (other content): only the alias's recorded UID refuses it."""
    _, again = retained_and_re_created()
    step([again], ticks=6)
    assert again.condition("Stalled") == ("True", reasons.SINK_TABLE_CLAIMED)
    assert again.apps == {} and sink_effects(again) == []
    assert not any(isinstance(a, A.CreateSparkApplication) for p in again.plans for a in p)
    assert I2 not in again.tables
    assert again.alias == I1 and again.alias_owner == IndexOwner(NAMESPACE, VIEW, UID)
    assert again.violations == []


def test_the_claim_names_the_old_view_its_uid_and_what_to_do() -> None:
    _, again = retained_and_re_created()
    again.reconcile()
    stalled = again.parsed_status().condition("Stalled")
    assert stalled is not None and stalled.reason == reasons.SINK_TABLE_CLAIMED
    message = stalled.message
    assert f"public.orders_by_customer belongs to DerivedView {NAMESPACE}/{VIEW} (uid {UID})" \
        in message
    assert OTHER_UID in message and "deletionPolicy Retain" in message
    assert "drop public.orders_by_customer and its indexes (public.orders_by_customer__*)" \
        in message
    assert "choose another spec.sink.postgres.table" in message


def test_deleting_the_re_created_view_leaves_the_retained_alias_and_index() -> None:
    """Even with deletionPolicy Delete: the alias and its index are the old view's (it never
    held a finalizer: nothing of it waits for the operator)."""
    _, again = retained_and_re_created(deletion_policy="Delete")
    step([again], ticks=2)
    tables, ledger = set(again.tables), dict(again.ledger)
    again.deletion_timestamp = again.now
    step([again], ticks=3)
    assert (again.gone or not again.finalizers) and sink_effects(again) == []
    assert again.alias == I1 and again.tables == tables and again.ledger == ledger
    assert again.violations == []


def test_an_alias_recorded_by_name_only_is_judged_by_name_and_gets_the_uid() -> None:
    """From before UIDs were recorded: the view of its name owns it (as before the upgrade),
    and its next switch records the UID, so no later view of the name takes it over."""
    _, again = retained_and_re_created(alias_owner=f"{NAMESPACE}/{VIEW}")
    step([again], ticks=12)
    assert again.alias == I2 and again.alias_owner == IndexOwner(NAMESPACE, VIEW, OTHER_UID)
    assert again.violations == []
    later = twin(again, namespace=NAMESPACE, uid="uid-of-a-third-view",
                 body=spec_body(SQL_V1))
    later.alias, later.alias_owner = again.alias, again.alias_owner
    later.reconcile()
    assert later.condition("Stalled") == ("True", reasons.SINK_TABLE_CLAIMED)


def test_an_alias_recorded_by_name_only_for_another_view_is_refused() -> None:
    _, again = retained_and_re_created(alias_owner=f"billing/{VIEW}")
    again.reconcile()
    assert again.condition("Stalled") == ("True", reasons.SINK_TABLE_CLAIMED)
    stalled = again.parsed_status().condition("Stalled")
    assert stalled is not None and f"DerivedView billing/{VIEW};" in stalled.message
    assert "two views cannot share an alias" in stalled.message


# Hand-built observations --------------------------------------------------------------------


def observed(*, owners: dict[str, IndexOwner], status: dict[str, Any] | None = None,
             alias: str | None = None, apps: dict[str, str] | None = None,
             deletion: dt.datetime | None = None) -> Observed:
    return Observed(
        view=ViewObserved(NAMESPACE, VIEW, UID, 1, {}, ("derivedviews.io/cleanup",), deletion),
        status=DerivedViewStatus.model_validate(status or {}), settings=make_settings(),
        spark_applications={r: SparkApplicationObserved(f"{VIEW}-{r}", r, s)
                            for r, s in (apps or {}).items()},
        sink=SinkObserved(frozenset({I1}), alias, {R1: LedgerPosition(ENDS, T0)},
                          index_owners=owners),
        end_offsets=ENDS)


def record(phase: str) -> dict[str, Any]:
    return {"revision": R1, "index": I1, "phase": phase, "since": "2026-03-01T11:58:00Z",
            "sparkApplication": f"{VIEW}-{R1}",
            "checkpointLocation": f"s3a://checkpoints/dv/{NAMESPACE}/{VIEW}/{R1}",
            "startedAt": "2026-03-01T11:58:00Z", "generation": 1,
            "caughtUpSince": "2026-03-01T11:59:00Z",
            "content": {"topics": ["orders"], "format": "json",
                        "schema": "order_id STRING, customer_id STRING, amount DOUBLE",
                        "sql": SQL_V1, "primaryKey": ["customer_id"]}}


def effects_of(actions: list[A.Action]) -> list[A.Action]:
    return [a for a in actions if isinstance(a, A.EFFECTS)]


def test_a_caught_up_candidate_whose_index_another_view_owns_is_never_switched_to() -> None:
    """Its status says CaughtUp (the ledger rows are the other view's), its job runs: the job
    is stopped and nothing is switched or dropped."""
    other = IndexOwner("billing", VIEW, OTHER_UID)
    actions = plan(make_spec(SQL_V1), observed(
        owners={I1: other}, status={"revisions": [record("CaughtUp")]},
        apps={R1: "RUNNING"}), T0)
    assert effects_of(actions) == [A.DeleteSparkApplication(R1, f"{VIEW}-{R1}")]


def test_an_index_recorded_with_this_view_s_uid_is_its_own() -> None:
    mine = IndexOwner(NAMESPACE, VIEW, UID)
    actions = plan(make_spec(SQL_V1), observed(
        owners={I1: mine}, status={"revisions": [record("CaughtUp")]},
        apps={R1: "RUNNING"}), T0)
    assert A.SwitchAlias("public", "orders_by_customer", I1, None) in actions


def test_an_owner_recorded_without_a_uid_is_judged_by_name() -> None:
    """OpenSearch indexes from before UIDs were recorded name only the view."""
    by_name = IndexOwner(NAMESPACE, VIEW, "")
    actions = plan(make_spec(SQL_V1), observed(
        owners={I1: by_name}, status={"revisions": [record("CaughtUp")]},
        apps={R1: "RUNNING"}), T0)
    assert A.SwitchAlias("public", "orders_by_customer", I1, None) in actions
    someone_else = IndexOwner("billing", VIEW, "")
    refused = plan(make_spec(SQL_V1), observed(
        owners={I1: someone_else}, status={"revisions": [record("CaughtUp")]},
        apps={R1: "RUNNING"}), T0)
    assert not any(isinstance(a, A.SwitchAlias) for a in refused)


def test_deletion_with_delete_drops_its_own_indexes_but_not_another_view_s() -> None:
    other = IndexOwner("billing", VIEW, OTHER_UID)
    spec = make_spec(SQL_V1, deletionPolicy="Delete")
    actions = plan(spec, observed(owners={I1: other}, deletion=T0), T0)
    assert not any(isinstance(a, (A.DropIndex, A.DropAlias)) for a in actions)
    assert any(isinstance(a, A.RemoveFinalizer) for a in actions)
    mine = plan(spec, observed(owners={I1: IndexOwner(NAMESPACE, VIEW, UID)}, deletion=T0), T0)
    drops = [a for a in mine if isinstance(a, A.DropIndex)]
    assert drops == [A.DropIndex("public", I1, R1)] and drops[0].owner_uid == UID


def test_an_index_with_no_recorded_owner_is_judged_by_name_as_before() -> None:
    """Indexes from before owners were recorded keep working after the upgrade."""
    actions = plan(make_spec(SQL_V1), observed(
        owners={}, status={"revisions": [record("CaughtUp")]}, apps={R1: "RUNNING"}), T0)
    assert A.SwitchAlias("public", "orders_by_customer", I1, None) in actions
