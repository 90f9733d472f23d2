"""Format avro's contract and the driver's pure decisions: the configuration it needs, the
registry Secret's keys, the ids a stopped query names, the field a resolution error names,
and how learnt ids are sorted into decoded, unresolvable and missing."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from dvjob.config import parse_config
from dvjob.errors import ConfigError
from dvjob.source.avro_decoding import (
    UNKNOWN_ID_MARK,
    Decoding,
    field_at,
    resolution_cause,
    unknown_ids,
)
from dvjob.source.schema_registry import (
    MAX_ANSWER_BYTES,
    Registry,
    SchemaNotFound,
    parsed_answer,
    registry_from,
)
from support.spark_job.configs import VALID

READER = json.dumps({"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "string"},
    {"name": "ship", "type": {"type": "record", "name": "Ship", "fields": [
        {"name": "city", "type": "string"}, {"name": "zip", "type": "int"}]}}]})


def avro_config(**changes: Any) -> str:
    doc = copy.deepcopy(VALID)
    doc["source"].update({"format": "avro", "avro": {"readerSchema": READER}})
    doc["secrets"] = {"sink": "views-db", "registry": "registry"}
    for key, value in changes.items():
        target, leaf = (doc["source"], key[7:]) if key.startswith("source_") else (doc, key)
        if value is ...:
            del target[leaf]
        else:
            target[leaf] = value
    return json.dumps(doc)


def test_avro_needs_its_reader_schema_and_the_registry_secret() -> None:
    config = parse_config(avro_config())
    assert config.source.avro is not None and config.source.avro.reader_schema == READER
    assert config.secrets is not None and config.secrets.registry == "registry"
    with pytest.raises(ConfigError, match=r"avro \(the reader schema\) is required"):
        parse_config(avro_config(source_avro=...))
    with pytest.raises(ConfigError, match=r"secrets\.registry is required"):
        parse_config(avro_config(secrets={"sink": "views-db"}))
    with pytest.raises(ConfigError, match="not with json"):
        parse_config(avro_config(source_format="json"))
    assert parse_config(avro_config(source_format="debezium")).source.avro is not None


def test_the_registry_secret_needs_an_http_url_and_both_credentials_or_none() -> None:
    assert registry_from({"url": "http://r:8080/apis/ccompat/v7"}, "reg").username is None
    with pytest.raises(ConfigError, match="has no key 'url'"):
        registry_from({}, "reg")
    with pytest.raises(ConfigError, match="is not http"):
        registry_from({"url": "file:///etc/passwd"}, "reg")
    with pytest.raises(ConfigError, match="both username and password"):
        registry_from({"url": "https://r", "username": "u"}, "reg")


def test_the_ids_a_stopped_query_names_are_read_from_its_error() -> None:
    error = RuntimeError(f"[USER_RAISED_EXCEPTION] {UNKNOWN_ID_MARK}value 17 SQLSTATE: "
                         f"P0001\ncaused by ... {UNKNOWN_ID_MARK}key 4 ... {UNKNOWN_ID_MARK}9")
    assert unknown_ids(error) == {("value", 17), ("key", 4), ("value", 9)}
    assert unknown_ids(RuntimeError("refused record t/0@3: schema id 17 ...")) == set()


def test_a_resolution_error_names_the_reader_field_its_pointer_points_at() -> None:
    schema = json.loads(READER)
    assert field_at(schema, "/fields/1/type/fields/1/type") == "ship.zip"
    assert field_at(schema, "/fields/0") == "id"
    assert field_at(schema, "/") == ""


class Answers(Registry):
    """A registry answering from a table (the decision under test is the sorting)."""

    def __init__(self, schemas: dict[int, str]) -> None:
        super().__init__(url="http://unused")
        object.__setattr__(self, "schemas", schemas)

    def schema(self, schema_id: int) -> str:
        found: dict[int, str] = self.schemas  # type: ignore[attr-defined]
        if schema_id not in found:
            raise SchemaNotFound(str(schema_id))
        return found[schema_id]


def test_learnt_ids_are_decoded_counted_unresolvable_or_missing() -> None:
    registry = Answers({5: "good", 6: "bad"})
    decoding = Decoding(reader=READER, writers={1: "w1"}).learn(
        {1, 5, 6, 7}, registry, lambda reader, writer: None if writer == "good" else
        "field 'zip': reader type: INT not compatible with writer type: STRING")
    assert dict(decoding.writers) == {1: "w1", 5: "good"}
    assert dict(decoding.unresolvable) == {6: "writer schema id 6 cannot be resolved to the "
                                              "reader schema: field 'zip': reader type: INT "
                                              "not compatible with writer type: STRING"}
    assert decoding.missing == frozenset({7})
    assert decoding.known() == frozenset({1, 5, 6, 7})


def test_a_registry_answer_too_large_or_not_json_is_a_clear_error() -> None:
    url = "http://r:8080/apis/ccompat/v7"
    assert parsed_answer(b'{"schema": "\\"long\\""}', url, "/schemas/ids/1") == {
        "schema": '"long"'}
    with pytest.raises(ConfigError, match="more than 8388608 bytes for /schemas/ids/1"):
        parsed_answer(b" " * (MAX_ANSWER_BYTES + 1), url, "/schemas/ids/1")
    with pytest.raises(ConfigError, match="not JSON for /x: is url the Confluent-compatible"):
        parsed_answer(b"<html>login</html>", url, "/x")


class Serves(Registry):
    """A server at the registry's URL that answers `answer` to every path."""

    def __init__(self, answer: Any) -> None:
        super().__init__(url="http://r:8080")
        object.__setattr__(self, "answer", answer)

    def _get(self, path: str) -> Any:
        return self.answer  # type: ignore[attr-defined]


@pytest.mark.parametrize("answer", [[1, 2], {"id": 3}, "text", None])
def test_an_answer_that_is_no_schema_is_a_clear_error_not_a_crash(answer: Any) -> None:
    with pytest.raises(ConfigError, match="answered no schema for /schemas/ids/3"):
        Serves(answer).schema(3)


@pytest.mark.parametrize("answer", [{"versions": [1]}, ["1"], [True]])
def test_a_version_list_that_is_no_list_of_numbers_is_a_clear_error(answer: Any) -> None:
    with pytest.raises(ConfigError, match="answered no list of versions for subject 'o-value'"):
        Serves(answer).subject_schemas("o-value")


def test_messages_name_the_registry_by_host_and_port_never_its_path_or_query() -> None:
    registry = Serves([1])
    object.__setattr__(registry, "url", "https://r.example/apis/ccompat/v7?token=abc")
    with pytest.raises(ConfigError) as caught:
        registry.schema(3)
    assert str(caught.value).startswith("schema registry r.example:443 answered no schema")
    assert "abc" not in str(caught.value)


def test_a_writer_schema_avro_cannot_parse_is_a_cause_not_a_crash(spark: Any) -> None:
    check = resolution_cause(spark)
    assert check(READER, READER) is None
    cause = check(READER, json.dumps({"type": "record", "name": "Order", "fields": [
        {"name": "order_id", "type": "nope"}]}))
    assert cause is not None and cause.startswith("not a schema Avro can parse ("), cause
    assert check(READER, "[" * 5000 + "]" * 5000) is not None
