"""What a preview refuses: pydantic's messages, the tenancy policy as installed, the SQL and
the checks' SQL, each with the reason the operator writes; and what it leaves unjudged."""

from __future__ import annotations

import dataclasses

from derived_views.core.judges.tenancy import TenancyPolicy
from derived_views.core.judges.transform import Refusal
from derived_views.core.preview.previews import preview_of
from support.world.samples import NAMESPACE, SQL_V1, T0, VIEW, make_settings, spec_body

SETTINGS = make_settings()


def test_a_spec_that_does_not_validate_is_refused_with_pydantics_words() -> None:
    body = spec_body(sink={"primaryKey": []})
    preview = preview_of(body, NAMESPACE, VIEW, None, SETTINGS, T0)
    assert preview.change is None
    [refusal] = preview.refusals
    assert refusal.reason == "InvalidSpec"
    assert refusal.message == ("spec.sink.primaryKey: List should have at least 1 item after "
                               "validation, not 0")


def test_the_installed_tenancy_policy_decides_the_kafka_cluster() -> None:
    assert preview_of(spec_body(), NAMESPACE, VIEW, None, SETTINGS, T0).refusals == ()
    preview = preview_of(spec_body(), NAMESPACE, VIEW, None,
                         dataclasses.replace(SETTINGS, tenancy=TenancyPolicy()), T0)
    [refusal] = preview.refusals
    assert refusal.reason == "PolicyViolation"
    assert refusal.message.startswith("spec.source.kafka.bootstrapServers kafka:9092 is not a "
                                      "Kafka cluster the platform lists for namespace shop")


def test_sql_naming_a_column_the_source_lacks_is_refused() -> None:
    preview = preview_of(spec_body("SELECT customer_id, colour FROM events"), NAMESPACE, VIEW,
                         None, SETTINGS, T0)
    [refusal] = preview.refusals
    assert refusal.reason == "InvalidTransform"
    assert refusal.message.startswith("transform.sql: [UNRESOLVED_COLUMN.WITH_SUGGESTION] A "
                                      "column, variable, or function parameter with name "
                                      "`colour` cannot be resolved.")


def test_a_check_reading_another_table_is_refused() -> None:
    body = spec_body(SQL_V1, cutover={"checks": {"assertions": [
        {"name": "peek", "sql": "SELECT * FROM {index} i JOIN pg_shadow s ON true",
         "expect": "noRows"}]}})
    preview = preview_of(body, NAMESPACE, VIEW, None, SETTINGS, T0)
    [refusal] = preview.refusals
    assert refusal.reason == "PolicyViolation"
    assert refusal.message.startswith("cutover.checks.assertions peek: table pg_shadow is "
                                      "not allowed")


def test_a_pinned_reader_schema_is_said_to_be_unjudged() -> None:
    body = spec_body(source={"format": "avro", "avro": {
        "registry": {"secretRef": {"name": "registry"}},
        "readerSchema": {"subject": "orders-value", "version": 3}}})
    body["source"].pop("schema")
    preview = preview_of(body, NAMESPACE, VIEW, None, SETTINGS, T0)
    assert preview.refusals == ()
    assert preview.not_judged == ("the transform against the reader schema pinned in the "
                                  "registry (subject orders-value version 3): the registry "
                                  "was not read",)


def test_the_api_servers_refusal_comes_first() -> None:
    said = Refusal("Invalid", 'DerivedView.derivedviews.io "orders" is invalid: spec: denied')
    preview = preview_of(spec_body(), NAMESPACE, VIEW, None, SETTINGS, T0, server_refusal=said)
    assert preview.refusals == (said,)
