"""What a preview makes of what the shell read of a view's sources, as the pass judges it: its
Secrets present and labelled, its registry's answers and pinned reader schema, its topics'
offsets; and what it says when they were not read. Expected values are worked out by hand."""

from __future__ import annotations

import json
from typing import Any

from derived_views.api.status import DerivedViewStatus, SubjectVersion
from derived_views.core.judges.tenancy import SECRET_LABEL
from derived_views.core.log.kafka_connection import SourceOffsets
from derived_views.core.observed import RegistryObserved
from derived_views.core.preview.change import LiveView
from derived_views.core.preview.previews import Preview, preview_of
from derived_views.core.preview.reads import SourceReads
from support.world.hand_observed import CONTENT_V1, I1, R1, record
from support.world.samples import (
    NAMESPACE,
    R2,
    SQL_V2,
    T0,
    VIEW,
    make_settings,
    make_spec,
    spec_body,
)

SETTINGS = make_settings()
LABELLED = {SECRET_LABEL: "true"}
ALL_LABELLED = {"views-db": LABELLED, "kafka-creds": LABELLED}
PIN = SubjectVersion(subject="orders-value", version=3)
READER = json.dumps({"type": "record", "name": "Order", "fields": [
    {"name": "order_id", "type": "string"}, {"name": "customer_id", "type": "string"},
    {"name": "amount", "type": "double"}]})


def new(body: dict[str, Any], reads: SourceReads) -> Preview:
    return preview_of(body, NAMESPACE, VIEW, None, SETTINGS, T0, reads=reads)


def avro(sql: str = "SELECT customer_id, count(*) AS orders FROM events GROUP BY customer_id"
         ) -> dict[str, Any]:
    body = spec_body(sql, source={"format": "avro", "avro": {
        "registry": {"secretRef": {"name": "registry"}},
        "readerSchema": {"subject": "orders-value", "version": 3}}})
    body["source"].pop("schema")
    return body


AVRO_LABELLED = {**ALL_LABELLED, "registry": LABELLED}


# --- Secrets --------------------------------------------------------------------------------

def test_a_missing_secret_is_refused_in_the_operators_words() -> None:
    preview = new(spec_body(), SourceReads({"views-db": None, "kafka-creds": LABELLED}))
    assert [(r.reason, r.message) for r in preview.refusals] == [(
        "SecretMissing",
        "secret shop/views-db not found: a view's jobs use only Secrets that exist (and are "
        "labelled for views) when the job is created; create it in namespace shop or fix the "
        "view's secretRef; no job of this view starts until then")]


def test_an_unlabelled_secret_is_refused_with_the_label_to_set() -> None:
    preview = new(spec_body(), SourceReads({"views-db": LABELLED, "kafka-creds": {}}))
    [refusal] = preview.refusals
    assert refusal.reason == "SecretNotLabelled"
    assert refusal.message.startswith(
        "secret shop/kafka-creds is not labelled derivedviews.io/view-secret=true, so views "
        "may not use it: its owner labels it (kubectl label secret -n shop kafka-creds "
        "derivedviews.io/view-secret=true)")


def test_secrets_not_read_are_said_and_judge_nothing() -> None:
    said = "its Secrets (present and labelled for views): not read: reading secret ... is forbidden"
    preview = new(spec_body(), SourceReads(None, not_read=(said,)))
    assert preview.refusals == ()
    assert preview.not_judged == (said,)


# --- the schema registry --------------------------------------------------------------------

def test_a_registry_that_does_not_answer_is_refused() -> None:
    registry = RegistryObserved("registry:8081", problem=(
        "SchemaRegistryUnreachable", "schema registry at registry:8081 cannot be reached "
                                     "(refused)"))
    preview = new(avro(), SourceReads(AVRO_LABELLED, registry))
    assert [(r.reason, r.message) for r in preview.refusals] == [(
        "SchemaRegistryUnreachable",
        "schema registry at registry:8081 cannot be reached (refused); no job of this view is "
        "started until the registry can be asked (running jobs are left alone)")]
    assert preview.not_judged == (
        "the transform against the reader schema pinned in the registry (subject orders-value "
        "version 3): the registry could not be asked (see the refusal)",)


def test_the_transform_is_judged_against_the_pinned_reader_schema() -> None:
    fetched = RegistryObserved("registry:8081", reader_schemas={PIN: READER})
    assert new(avro(), SourceReads(AVRO_LABELLED, fetched)).refusals == ()
    preview = new(avro("SELECT customer_id, colour FROM events"),
                  SourceReads(AVRO_LABELLED, fetched))
    [refusal] = preview.refusals
    assert refusal.reason == "InvalidTransform"
    assert "`colour` cannot be resolved" in refusal.message
    assert preview.not_judged == ()


def test_a_pinned_version_the_registry_lacks_is_refused() -> None:
    lacking = RegistryObserved("registry:8081", reader_problem=(
        "ReaderSchemaNotFound", "source.avro.readerSchema: subject orders-value has no "
                                "version 3 in the schema registry at registry:8081"))
    preview = new(avro(), SourceReads(AVRO_LABELLED, lacking))
    assert preview.change is not None
    [refusal] = preview.refusals
    assert (refusal.reason, refusal.message) == (
        "ReaderSchemaNotFound",
        "source.avro.readerSchema: subject orders-value has no version 3 in the schema "
        f"registry at registry:8081; no job is started for revision {preview.change.revision} "
        "until its reader schema is read")


# --- the log ----------------------------------------------------------------------------------

def offsets(ends: dict[tuple[str, int], int], starts: dict[tuple[str, int], int],
            missing: frozenset[str] = frozenset()) -> SourceOffsets:
    return SourceOffsets(ends, missing, starts=starts)


def test_a_new_views_replay_reads_each_partition_from_its_log_start() -> None:
    log = offsets({("orders", 0): 700, ("orders", 1): 300}, {("orders", 0): 0, ("orders", 1): 0})
    cost = new(spec_body(), SourceReads(ALL_LABELLED, log=log)).cost
    assert cost is not None and cost.from_log
    assert [(p.partition, p.first_offset, p.end_offset, p.records, p.holds_beginning)
            for p in cost.partitions] == [("orders/0", 0, 700, 700, True),
                                          ("orders/1", 0, 300, 300, True)]
    assert (cost.records, cost.unmeasured_topics, cost.held) == (1000, (), "")


def test_a_log_that_lost_its_beginning_holds_a_complete_view() -> None:
    log = offsets({("orders", 0): 700, ("orders", 1): 300}, {("orders", 0): 250, ("orders", 1): 0})
    preview = new(spec_body(), SourceReads(ALL_LABELLED, log=log))
    cost = preview.cost
    assert cost is not None
    assert [(p.first_offset, p.records, p.holds_beginning) for p in cost.partitions] == [
        (250, 450, False), (0, 300, True)]
    assert cost.lost_beginning == ("orders/0",)
    assert preview.change is not None
    revision = preview.change.revision
    assert cost.held == (
        "the log no longer holds offset 0: at least orders/0 (250 records) were deleted before "
        f"revision {revision}'s replay could read them (retention: orders: retention not "
        "read); nothing is served, because spec.source.history is complete; set "
        "spec.source.history: fromLogStart to accept it (no replay), or restore the records "
        "to the topic and change the view's content to rebuild")
    accepting = new(spec_body(source={"history": "fromLogStart"}), SourceReads(ALL_LABELLED,
                                                                              log=log)).cost
    assert accepting is not None and accepting.held == ""


LIVE = LiveView(make_spec(), DerivedViewStatus.model_validate({
    "revision": R1, "active": {"revision": R1, "index": I1, "since": "2026-03-01T11:00:00Z",
                               "lag": {"messages": 0, "endOffsets": {"orders/0": 120}}},
    "revisions": [record(R1, "Active", content=CONTENT_V1, historyStart={"orders/0": 20})]}))


def test_a_new_revision_starting_later_than_the_actives_history_is_held() -> None:
    later = offsets({("orders", 0): 500}, {("orders", 0): 90})
    preview = preview_of(spec_body(SQL_V2), NAMESPACE, VIEW, LIVE, SETTINGS, T0,
                         reads=SourceReads(ALL_LABELLED, log=later))
    cost = preview.cost
    assert cost is not None
    assert [(p.first_offset, p.end_offset, p.holds_beginning) for p in cost.partitions] == [
        (90, 500, False)]
    assert cost.held.startswith(f"revision {R2}'s history starts later than that of revision "
                                f"{R1}, which serves: its index would lack at least orders/0 "
                                "(70 records)")
    same = offsets({("orders", 0): 500}, {("orders", 0): 20})
    cost = preview_of(spec_body(SQL_V2), NAMESPACE, VIEW, LIVE, SETTINGS, T0,
                      reads=SourceReads(ALL_LABELLED, log=same)).cost
    assert cost is not None and cost.held == "" and cost.records == 480


def test_an_unreachable_cluster_falls_back_to_the_status_and_says_why() -> None:
    down = SourceOffsets(None, reason="KafkaUnavailable",
                         message="kafka:9092: Connection refused")
    preview = preview_of(spec_body(SQL_V2), NAMESPACE, VIEW, LIVE, SETTINGS, T0,
                         reads=SourceReads(ALL_LABELLED, log=down))
    assert preview.refusals == ()
    cost = preview.cost
    assert cost is not None and not cost.from_log
    assert [(p.partition, p.first_offset, p.end_offset) for p in cost.partitions] == [
        ("orders/0", 20, 120)]
    assert preview.not_judged == (
        "the source log (records per partition, whether it holds its beginning): not read "
        "(kafka:9092: Connection refused); the cost is from the live view's status",)
    fresh = new(spec_body(), SourceReads(ALL_LABELLED, log=down))
    assert fresh.not_judged[0].endswith("; the records are unknown")


def test_a_topic_the_cluster_lacks_is_refused() -> None:
    log = offsets({}, {}, frozenset({"orders"}))
    preview = new(spec_body(), SourceReads(ALL_LABELLED, log=log))
    assert [(r.reason, r.message) for r in preview.refusals] == [(
        "TopicMissing", "topic(s) orders not found on kafka:9092: create them or fix "
                        "spec.source.topics; no job reads a topic that does not exist")]


def test_a_missing_registry_secret_is_refused_once() -> None:
    registry = RegistryObserved("secret shop/registry", problem=(
        "SecretMissing", "schema registry secret shop/registry not found: create it"))
    preview = new(avro(), SourceReads({**ALL_LABELLED, "registry": None}, registry))
    assert [r.reason for r in preview.refusals] == ["SecretMissing"]
    assert preview.refusals[0].message.startswith("secret shop/registry not found: a view's "
                                                  "jobs use only Secrets that exist")
