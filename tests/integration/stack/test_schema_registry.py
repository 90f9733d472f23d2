"""The stack's schema registry answers the Confluent API as Avro views need it: ids for a
subject's versions under BACKWARD compatibility, schemas by id, Confluent's refusals."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from dvstack.testing import schema_registry_client as registry
from dvstack.testing.schema_registry_client import RegistryError


def order(*fields: dict[str, Any]) -> str:
    return json.dumps({"type": "record", "name": "Order", "namespace": "shop",
                       "fields": list(fields)})


ID = {"name": "id", "type": "string"}
QTY_INT = {"name": "qty", "type": "int"}
QTY_LONG = {"name": "qty", "type": "long"}
NOTE = {"name": "note", "type": "string"}
CURRENCY = {"name": "currency", "type": "string", "default": "EUR"}

V1 = order(ID, QTY_INT, NOTE)
V2 = order(ID, QTY_INT, NOTE, CURRENCY)  # a field added with a default
V3 = order(ID, QTY_INT, CURRENCY)  # a field removed
V4 = order(ID, QTY_LONG, CURRENCY)  # int widened to long
VERSIONS = (V1, V2, V3, V4)


@pytest.fixture()
def url(stack: Any) -> str:
    assert stack.schema_registry_url, "stack.json has no schema registry: run `dvstack up` again"
    return str(stack.schema_registry_url)


@pytest.fixture()
def subject(url: str) -> str:
    """A subject of its own (the registry is shared by the whole run), BACKWARD."""
    name = f"t-{uuid.uuid4().hex[:10]}-value"
    registry.set_compatibility(url, name, "BACKWARD")
    return name


def test_backward_compatible_versions_get_ids_and_come_back_by_id(url: str,
                                                                   subject: str) -> None:
    assert registry.call(url, "GET", f"config/{subject}") == {"compatibilityLevel": "BACKWARD"}
    ids = [registry.register(url, subject, schema) for schema in VERSIONS]
    assert len(set(ids)) == len(VERSIONS), ids
    assert registry.register(url, subject, V1) == ids[0]  # a known schema keeps its id
    for schema_id, schema in zip(ids, VERSIONS, strict=True):
        assert json.loads(registry.schema_by_id(url, schema_id)) == json.loads(schema)
    assert registry.call(url, "GET", f"subjects/{subject}/versions") == [1, 2, 3, 4]
    latest = registry.call(url, "GET", f"subjects/{subject}/versions/latest")
    assert (latest["subject"], latest["version"], latest["id"]) == (subject, 4, ids[3])


@pytest.mark.parametrize("incompatible", [
    order(ID, QTY_LONG, CURRENCY, {"name": "must", "type": "string"}),  # no default
    order({"name": "id", "type": "int"}, QTY_LONG, CURRENCY),  # string read as int
], ids=["field-without-default", "type-changed"])
def test_an_incompatible_version_is_refused_as_confluent_does(url: str, subject: str,
                                                              incompatible: str) -> None:
    for schema in VERSIONS:
        registry.register(url, subject, schema)
    assert registry.is_compatible(url, subject, V4) is True
    assert registry.is_compatible(url, subject, incompatible) is False
    with pytest.raises(RegistryError) as refused:
        registry.register(url, subject, incompatible)
    assert (refused.value.status, refused.value.error_code) == (409, 409)
    assert refused.value.message
    assert registry.call(url, "GET", f"subjects/{subject}/versions") == [1, 2, 3, 4]


def test_unknown_schema_id_and_subject_answer_confluent_errors(url: str) -> None:
    with pytest.raises(RegistryError) as unknown_id:
        registry.schema_by_id(url, 2**31 - 1)
    assert (unknown_id.value.status, unknown_id.value.error_code) == (404, 40403)
    with pytest.raises(RegistryError) as unknown_subject:
        registry.call(url, "GET", f"subjects/t-{uuid.uuid4().hex[:10]}-none/versions/1")
    assert (unknown_subject.value.status, unknown_subject.value.error_code) == (404, 40401)
