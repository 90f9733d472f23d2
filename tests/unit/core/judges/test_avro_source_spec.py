"""A view of Avro records: its spec, revision, job configuration, Secrets and checks.

The reader schema pins the revision (a change of it is a replay); the registry is a
connection detail (a change restarts the jobs from their checkpoints); the job is told the
reader schema and its DDL, and the registry Secret is mounted into the driver alone."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from derived_views.api.spec import DerivedViewSpec
from derived_views.core import reasons
from derived_views.core.job.job_config import job_config
from derived_views.core.judges.tenancy import secrets_of
from derived_views.core.judges.transform import check_spec
from derived_views.core.revision import content_of, job_settings_of, revision_of, with_content
from dvjob.config import parse_config
from support.rendering import BODY, READER, avro_body, avro_spec, debezium_avro_body, render


@pytest.mark.parametrize("edit", [
    lambda s: s.pop("avro"),  # avro without the registry and reader
    lambda s: s.update(schema="order_id STRING"),  # avro with a DDL besides
    lambda s: s.update(format="json"),  # json with avro, no DDL
])
def test_avro_takes_its_block_and_no_ddl_and_the_others_the_reverse(edit: Any) -> None:
    body = avro_body()
    edit(body["source"])
    with pytest.raises(ValidationError, match="format avro takes avro"):
        DerivedViewSpec.model_validate(body)


def test_the_reader_schema_pins_the_revision_and_the_registry_does_not() -> None:
    base = avro_spec()
    wider = avro_spec(reader={**READER, "fields": [*READER["fields"], {
        "name": "gift", "type": "boolean", "default": False}]})
    moved = avro_spec(registry="other-registry")
    assert revision_of(wider) != revision_of(base)
    assert revision_of(moved) == revision_of(base)
    assert job_settings_of(moved) != job_settings_of(base)  # the jobs restart, no replay
    json_view = DerivedViewSpec.model_validate(BODY)
    assert "registry" not in json.dumps(job_settings_of(json_view))


def test_an_older_avro_revision_renders_from_a_newer_spec_and_back() -> None:
    older = avro_spec()
    newer = avro_spec(reader={**READER, "fields": READER["fields"][:3]})
    rendered = with_content(newer, content_of(older))
    assert revision_of(rendered) == revision_of(older)
    assert rendered.source.avro is not None
    assert rendered.source.avro.registry.secret_ref.name == "registry"
    json_view = DerivedViewSpec.model_validate(BODY)
    assert revision_of(with_content(older, content_of(json_view))) == revision_of(json_view)


def test_the_job_is_told_the_reader_schema_its_ddl_and_the_registry_secret() -> None:
    spec = avro_spec()
    config = job_config(uid="u-1", namespace="shop", view="orders", spec=spec,
                        revision=revision_of(spec), checkpoint_location="s3a://c/x",
                        secrets={"sink": "views-db", "registry": "registry"})
    assert config["source"]["format"] == "avro"
    assert config["source"]["schema"] == (
        "`order_id` STRING, `customer_id` STRING, `amount` BIGINT, `channel` STRING")
    assert json.loads(config["source"]["avro"]["readerSchema"]) == READER
    assert config["secrets"] == {"sink": "views-db", "registry": "registry"}
    parse_config(json.dumps(config))  # the job's own validator accepts it


def test_the_registry_secret_is_checked_like_the_others_and_mounted_in_the_driver_only() -> None:
    assert secrets_of(avro_spec()) == ("views-db", "kafka-creds", "registry")
    manifest = render(avro_body(), revision=revision_of(avro_spec()))
    driver = {s["name"] for s in manifest["spec"]["driver"]["secrets"]}
    executor = {s["name"] for s in manifest["spec"]["executor"]["secrets"]}
    assert "registry" in driver and "registry" not in executor
    assert {"views-db", "kafka-creds"} <= executor


def test_a_reader_schema_the_job_cannot_read_is_refused_before_any_job() -> None:
    refusal = check_spec(avro_spec(reader={"type": "record", "name": "R", "fields": [
        {"name": "_kafka_key", "type": "string"}]}))
    assert refusal is not None and refusal.reason == reasons.INVALID_SCHEMA
    assert refusal.message.startswith("source.avro.readerSchema: _kafka_key: names starting")
    # the transform is checked against the reader's columns
    good = avro_body()
    good["transform"] = {"sql": "SELECT customer_id, max(channel) AS c FROM events "
                                "GROUP BY customer_id"}
    assert check_spec(DerivedViewSpec.model_validate(good)) is None
    bad = avro_body()
    bad["transform"] = {"sql": "SELECT customer_id, max(coupon) AS c FROM events "
                               "GROUP BY customer_id"}
    refused = check_spec(DerivedViewSpec.model_validate(bad))
    assert refused is not None and "coupon" in refused.message


@pytest.mark.parametrize("edit, valid", [
    (lambda s: None, True),  # Debezium's Avro converter: the row's reader schema
    (lambda s: s.update(schema="order_id STRING"), False),  # both encodings at once
    (lambda s: s.pop("avro"), False),  # neither
])
def test_debezium_takes_either_a_ddl_or_avro(edit: Any, valid: bool) -> None:
    body = debezium_avro_body()
    edit(body["source"])
    if valid:
        assert DerivedViewSpec.model_validate(body).source.avro is not None
    else:
        with pytest.raises(ValidationError, match="debezium takes either schema"):
            DerivedViewSpec.model_validate(body)


def test_debezium_in_avro_is_its_own_revision_renders_back_and_tells_the_job() -> None:
    spec = DerivedViewSpec.model_validate(debezium_avro_body())
    assert revision_of(spec) != revision_of(avro_spec())  # the envelope is content
    content = content_of(spec)
    assert (content.format, content.encoding) == ("debezium", "avro")
    newer = avro_spec(reader={**READER, "fields": READER["fields"][:3]})
    rendered = with_content(newer, content)
    assert revision_of(rendered) == revision_of(spec)
    assert rendered.source.format == "debezium" and rendered.source.value_schema is None
    config = job_config(uid="u-1", namespace="shop", view="orders", spec=spec,
                        revision=revision_of(spec), checkpoint_location="s3a://c/x",
                        secrets={"sink": "views-db", "registry": "registry"})
    assert config["source"]["format"] == "debezium"
    assert json.loads(config["source"]["avro"]["readerSchema"]) == READER
    assert parse_config(json.dumps(config)).source.avro is not None


def test_a_debezium_avro_transform_reads_the_change_columns() -> None:
    body = debezium_avro_body()
    body["transform"] = {"sql": "SELECT order_id, amount, _debezium_deleted AS _dv_deleted "
                                "FROM events"}
    body["sink"]["primaryKey"] = ["order_id"]
    assert check_spec(DerivedViewSpec.model_validate(body)) is None
