"""A reader schema pinned in the registry (`subject` and `version`): its spec, its revision,
its stored content, the job it renders and the checks before any job.

The revision is known from the spec alone (subject and version are hashed, not the text),
the status keeps the fetched text so an older revision renders whatever the registry holds
later, and views with an inline reader schema keep the revisions they had."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from pydantic import ValidationError

from derived_views.api.spec import MAX_SCHEMA, DerivedViewSpec
from derived_views.api.status import DerivedViewStatus, RevisionStatus, SubjectVersion
from derived_views.cli.rollback import spec_patch
from derived_views.core import reasons
from derived_views.core.job.job_config import job_config
from derived_views.core.judges.source_schema import ReaderSchemaUnknown, pinned_reader
from derived_views.core.judges.transform import check_spec
from derived_views.core.judges.unjudged import deletion_spec
from derived_views.core.observed import reader_to_fetch
from derived_views.core.patch import apply_merge_patch
from derived_views.core.revision import (
    content_of,
    job_settings_of,
    reader_schemas_of,
    revision_of,
    with_content,
)
from dvjob.config import parse_config
from support.rendering import READER, avro_body, avro_spec, debezium_avro_body

PIN = SubjectVersion(subject="orders-value", version=3)
TEXT = json.dumps(READER)
KNOWN = {PIN: TEXT}


def pinned_body(subject: str = "orders-value", version: Any = 3,
                registry: str = "registry") -> dict[str, Any]:
    body = avro_body(registry=registry)
    body["source"]["avro"]["readerSchema"] = {"subject": subject, "version": version}
    return body


def pinned_spec(**changes: Any) -> DerivedViewSpec:
    return DerivedViewSpec.model_validate(pinned_body(**changes))


# the spec ------------------------------------------------------------------------------------

def test_a_reader_schema_is_inline_or_a_subject_version() -> None:
    assert pinned_reader(pinned_spec().source) == PIN
    assert pinned_reader(avro_spec().source) is None


@pytest.mark.parametrize("reader", [
    {"schema": TEXT, "subject": "orders-value", "version": 3},  # both forms
    {},  # neither
    {"subject": "orders-value"},  # a subject without its version
    {"version": 3},  # a version of no subject
    {"schema": TEXT, "version": 3},
])
def test_exactly_one_form_is_accepted(reader: dict[str, Any]) -> None:
    body = avro_body()
    body["source"]["avro"]["readerSchema"] = reader
    with pytest.raises(ValidationError, match="takes exactly one of schema"):
        DerivedViewSpec.model_validate(body)


@pytest.mark.parametrize("version", ["latest", 0, -1, 2**31])
def test_the_version_is_a_registered_number_never_latest(version: Any) -> None:
    with pytest.raises(ValidationError, match="version"):
        pinned_spec(version=version)


def test_a_subject_is_one_word() -> None:
    with pytest.raises(ValidationError, match="subject"):
        pinned_spec(subject="orders value")


# the revision -----------------------------------------------------------------------------

def test_views_with_an_inline_reader_schema_keep_their_revisions() -> None:
    """Computed before pinned reader schemas existed: an upgrade restarts nothing."""
    assert revision_of(avro_spec()) == "226bf965fe"
    assert revision_of(DerivedViewSpec.model_validate(debezium_avro_body())) == "dcd8199d8f"
    assert job_settings_of(avro_spec()) == "1fe9d5fb30"


def test_subject_and_version_pin_the_revision_and_the_registry_does_not() -> None:
    base = pinned_spec()
    assert revision_of(pinned_spec(version=4)) != revision_of(base)
    assert revision_of(pinned_spec(subject="orders-v2-value")) != revision_of(base)
    assert revision_of(pinned_spec(registry="other")) == revision_of(base)
    # the same text inline is another form: a new revision, never a silent swap
    assert revision_of(avro_spec()) != revision_of(base)


def test_the_content_keeps_the_fetched_text_and_where_it_came_from() -> None:
    content = content_of(pinned_spec(), KNOWN)
    assert (content.value_schema, content.reader_schema) == (TEXT, PIN)
    assert reader_schemas_of(content) == KNOWN
    assert content_of(avro_spec()).reader_schema is None  # inline: as before
    with pytest.raises(ReaderSchemaUnknown, match="subject orders-value version 3"):
        content_of(pinned_spec())


def test_an_older_pinned_revision_renders_from_its_stored_text_whatever_the_spec_says() -> None:
    older = pinned_spec()
    content = content_of(older, KNOWN)
    for newer in (avro_spec(reader={**READER, "fields": READER["fields"][:3]}),
                  pinned_spec(version=4)):
        rendered = with_content(newer, content)
        assert revision_of(rendered) == revision_of(older)
        config = job_config(uid="u-1", namespace="shop", view="orders", spec=rendered,
                            revision=revision_of(older), checkpoint_location="s3a://c/x",
                            reader_schemas=reader_schemas_of(content))
        assert json.loads(config["source"]["avro"]["readerSchema"]) == READER
    # and an inline revision renders back from a pinned spec
    inline = content_of(avro_spec())
    assert revision_of(with_content(pinned_spec(), inline)) == revision_of(avro_spec())


def test_the_job_is_told_the_fetched_text_and_its_ddl() -> None:
    spec = pinned_spec()
    config = job_config(uid="u-1", namespace="shop", view="orders", spec=spec,
                        revision=revision_of(spec), checkpoint_location="s3a://c/x",
                        secrets={"sink": "views-db", "registry": "registry"},
                        reader_schemas=KNOWN)
    assert config["source"]["schema"] == (
        "`order_id` STRING, `customer_id` STRING, `amount` BIGINT, `channel` STRING")
    assert json.loads(config["source"]["avro"]["readerSchema"]) == READER
    parse_config(json.dumps(config))  # the job's own validator accepts it
    with pytest.raises(ReaderSchemaUnknown):
        job_config(uid="u-1", namespace="shop", view="orders", spec=spec,
                   revision=revision_of(spec), checkpoint_location="s3a://c/x")


@pytest.mark.parametrize("current, target", [
    (avro_body(), pinned_body()),
    (pinned_body(), avro_body()),
    (pinned_body(version=4), pinned_body()),
])
def test_dv_rollback_moves_between_the_forms(current: dict[str, Any],
                                             target: dict[str, Any]) -> None:
    content = content_of(DerivedViewSpec.model_validate(target), KNOWN)
    rolled = apply_merge_patch(current, spec_patch(current, content))
    spec = DerivedViewSpec.model_validate(rolled)  # one form, never both
    assert revision_of(spec) == revision_of(DerivedViewSpec.model_validate(target))


def test_dv_rollback_moves_between_json_and_avro() -> None:
    json_body = copy.deepcopy(avro_body())
    json_body["source"].pop("avro")
    json_body["source"].update(format="json", schema="order_id STRING, customer_id STRING")
    json_spec = DerivedViewSpec.model_validate(json_body)
    rolled = apply_merge_patch(pinned_body(), spec_patch(pinned_body(), content_of(json_spec)))
    assert revision_of(DerivedViewSpec.model_validate(rolled)) == revision_of(json_spec)


# what the shell fetches and the checks before any job -----------------------------------

def test_the_shell_fetches_a_pinned_schema_until_its_revision_keeps_it() -> None:
    spec = pinned_spec()
    assert reader_to_fetch(spec, DerivedViewStatus()) == PIN
    assert reader_to_fetch(avro_spec(), DerivedViewStatus()) is None
    record = RevisionStatus.model_validate({
        "revision": revision_of(spec), "index": "t", "phase": "Active",
        "since": "2026-03-01T12:00:00Z", "startedAt": "2026-03-01T12:00:00Z",
        "sparkApplication": "a",
        "checkpointLocation": "s3a://c/x",
        "content": content_of(spec, KNOWN).model_dump(mode="json", by_alias=True)})
    assert reader_to_fetch(spec, DerivedViewStatus(revisions=[record])) is None
    assert reader_to_fetch(pinned_spec(version=4), DerivedViewStatus(revisions=[record])) == (
        SubjectVersion(subject="orders-value", version=4))


def test_an_unknown_pinned_schema_is_not_judged_and_cannot_start() -> None:
    refusal = check_spec(pinned_spec())
    assert refusal is not None and refusal.reason == reasons.READER_SCHEMA_NOT_FOUND
    assert "subject orders-value version 3" in refusal.message
    assert check_spec(pinned_spec(), KNOWN) is None


def test_the_transform_is_checked_against_the_fetched_columns() -> None:
    body = pinned_body()
    body["transform"] = {"sql": "SELECT customer_id, max(coupon) AS c FROM events "
                                "GROUP BY customer_id"}
    refused = check_spec(DerivedViewSpec.model_validate(body), KNOWN)
    assert refused is not None and refused.reason == reasons.INVALID_TRANSFORM
    assert "coupon" in refused.message


def test_a_fetched_schema_spark_cannot_read_is_refused_naming_the_version() -> None:
    bad = json.dumps({"type": "record", "name": "R", "fields": [
        {"name": "_kafka_key", "type": "string"}]})
    refused = check_spec(pinned_spec(), {PIN: bad})
    assert refused is not None and refused.reason == reasons.INVALID_SCHEMA
    assert refused.message.startswith(
        "source.avro.readerSchema (subject orders-value version 3 in the registry): _kafka_key")


def test_a_fetched_schema_too_large_for_the_status_is_refused() -> None:
    fields = [{"name": f"f{i}", "type": "string"} for i in range(2000)]
    big = json.dumps({"type": "record", "name": "Wide", "fields": fields})
    assert len(big) > MAX_SCHEMA
    refused = check_spec(pinned_spec(), {PIN: big})
    assert refused is not None and refused.reason == reasons.INVALID_SCHEMA
    assert f"more than {MAX_SCHEMA}" in refused.message


def test_an_avro_view_whose_spec_cannot_be_judged_is_still_deleted_by_the_planner() -> None:
    """unjudged.deletion_spec sets the judged parts aside; the Avro block goes with them."""
    stand_in = deletion_spec(pinned_body())
    assert stand_in is not None and stand_in.source.avro is None
