"""Which edits make a new revision, and which do not; hashes computed independently."""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable
from typing import Any

import pytest

from derived_views.api.spec import DerivedViewSpec
from derived_views.core.revision import content_of, revision_of, with_content
from support.world.samples import SQL_V1, SQL_V2, SQL_V3, spec_body

Edit = Callable[[dict[str, Any]], None]


def rev(body: dict[str, Any]) -> str:
    return revision_of(DerivedViewSpec.model_validate(body))


def sha10(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:10]


def test_the_revision_is_the_hash_of_the_canonical_content_document() -> None:
    # Written by hand: sorted keys, no whitespace, only the content fields.
    canonical = ('{"scheme":1,"sink":{"primaryKey":["customer_id"],"schema":"public",'
                 '"table":"orders_by_customer"},"source":{"format":"json","schema":'
                 '"order_id STRING, customer_id STRING, amount DOUBLE","topics":["orders"]},'
                 '"transform":{"sql":"' + SQL_V1 + '"}}')
    assert sha10(canonical) == "71250ff800"
    assert rev(spec_body(SQL_V1)) == "71250ff800"
    assert rev(spec_body(SQL_V2)) == "5d31ce3608"
    assert rev(spec_body(SQL_V3)) == "1146c643c6"


def test_a_python_transform_hashes_function_and_files() -> None:
    body = spec_body()
    body["transform"] = {"python": {"function": "views.orders:by_customer",
                                    "pyFiles": ["s3a://code/views.zip"]}}
    canonical = ('{"scheme":1,"sink":{"primaryKey":["customer_id"],"schema":"public",'
                 '"table":"orders_by_customer"},"source":{"format":"json","schema":'
                 '"order_id STRING, customer_id STRING, amount DOUBLE","topics":["orders"]},'
                 '"transform":{"python":{"function":"views.orders:by_customer",'
                 '"pyFiles":["s3a://code/views.zip"]}}}')
    assert rev(body) == sha10(canonical)


def set_path(*path: str, value: Any) -> Edit:
    def edit(body: dict[str, Any]) -> None:
        node = body
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value
    return edit


CHANGES_CONTENT: list[tuple[str, Edit]] = [
    ("topics", set_path("source", "topics", value=["orders", "payments"])),
    ("format", set_path("source", "format", value="debezium")),
    ("value schema", set_path("source", "schema", value="order_id STRING, amount DECIMAL(10,2)")),
    ("sql", set_path("transform", "sql", value=SQL_V2)),
    ("sql inner whitespace", set_path("transform", "sql", value=SQL_V1.replace(" AS ", "  AS "))),
    ("transform kind", set_path("transform", value={"python": {"function": "m:f"}})),
    ("sink table", set_path("sink", "postgres", "table", value="orders_v2")),
    ("sink schema", set_path("sink", "postgres", "schema", value="views")),
    ("primary key", set_path("sink", "primaryKey", value=["customer_id", "order_id"])),
    ("primary key order", set_path("sink", "primaryKey", value=["b", "a"])),
]

KEEPS_CONTENT: list[tuple[str, Edit]] = [
    ("bootstrap servers", set_path("source", "kafka", "bootstrapServers", value="k2:9093")),
    ("kafka secret", set_path("source", "kafka", "secretRef", value={"name": "other"})),
    ("sink secret", set_path("sink", "postgres", "secretRef", value={"name": "other-db"})),
    ("max offsets", set_path("source", "maxOffsetsPerTrigger", value=10_000)),
    ("topic order", set_path("source", "topics", value=["orders"])),
    ("sql outer whitespace", set_path("transform", "sql", value=f"\n  {SQL_V1}\n")),
    ("schema outer whitespace", set_path("source", "schema",
                                         value="order_id STRING, customer_id STRING, amount DOUBLE\n")),
    ("explicit default schema", set_path("sink", "postgres", "schema", value="public")),
    ("cutover", set_path("cutover", value={"maxLagMessages": 100, "mode": "manual",
                                           "stableForSeconds": 1, "deadlineSeconds": 9})),
    ("spark", set_path("spark", value={"image": "x:1", "executor": {"instances": 9},
                                       "sparkConf": {"a": "b"}, "checkpointBase": "/var/lib/dv-checkpoints"})),
    ("deletion policy", set_path("deletionPolicy", value="Delete")),
]


@pytest.mark.parametrize(("name", "edit"), CHANGES_CONTENT, ids=[n for n, _ in CHANGES_CONTENT])
def test_content_edits_change_the_revision(name: str, edit: Edit) -> None:
    body = spec_body()
    if name == "primary key order":
        body["sink"]["primaryKey"] = ["a", "b"]
    before = rev(body)
    edited = copy.deepcopy(body)
    edit(edited)
    assert rev(edited) != before


@pytest.mark.parametrize(("name", "edit"), KEEPS_CONTENT, ids=[n for n, _ in KEEPS_CONTENT])
def test_other_edits_keep_the_revision(name: str, edit: Edit) -> None:
    body = spec_body()
    edited = copy.deepcopy(body)
    edit(edited)
    assert rev(edited) == rev(body)


def test_topics_are_a_set() -> None:
    a = spec_body(source={"topics": ["orders", "payments"]})
    b = spec_body(source={"topics": ["payments", "orders"]})
    assert rev(a) == rev(b)


@pytest.mark.parametrize("sql", [SQL_V1, SQL_V2])
def test_with_content_renders_an_older_revision_from_a_newer_spec(sql: str) -> None:
    old = DerivedViewSpec.model_validate(spec_body(sql, source={"topics": ["orders", "x"]}))
    newer = DerivedViewSpec.model_validate(spec_body(SQL_V3, spark={"image": "new:2"}))
    rebuilt = with_content(newer, content_of(old))
    assert revision_of(rebuilt) == revision_of(old)
    assert rebuilt.spark.image == "new:2"  # resources come from the current spec
    assert rebuilt.transform.sql == sql


def test_with_content_keeps_a_python_transform() -> None:
    body = spec_body()
    body["transform"] = {"python": {"function": "pkg.mod:fn", "pyFiles": ["a.zip"]}}
    old = DerivedViewSpec.model_validate(body)
    rebuilt = with_content(DerivedViewSpec.model_validate(spec_body(SQL_V2)), content_of(old))
    assert rebuilt.transform.python is not None
    assert (rebuilt.transform.python.function, rebuilt.transform.python.py_files) == \
        ("pkg.mod:fn", ["a.zip"])
    assert revision_of(rebuilt) == revision_of(old)


def test_job_settings_hash_of_the_defaults_is_sha256_of_the_written_out_document() -> None:
    import hashlib

    from derived_views.core.revision import job_settings_of
    from support.world.samples import make_spec
    written = ('{"kafka":{"bootstrapServers":"kafka:9092","secretRef":{"name":"kafka-creds"}},'
               '"maxOffsetsPerTrigger":1000000,"spark":{"driver":{"cores":1,"memory":"1g"},"executor":{"cores":1,"instances":0,'
               '"memory":"1g"},"image":null,"mainApplicationFile":null,"restartPolicy":'
               '{"onFailureRetries":3,"onFailureRetryInterval":10,"type":"OnFailure"},'
               '"serviceAccount":null,"sparkConf":{},"sparkVersion":"4.0.0"}}')
    assert job_settings_of(make_spec()) == hashlib.sha256(written.encode()).hexdigest()[:10]
    moved = make_spec(spark={"checkpointBase": "s3a://elsewhere"})
    assert job_settings_of(moved) == job_settings_of(make_spec())
    smaller_batches = make_spec(source={"maxOffsetsPerTrigger": 5000})
    assert job_settings_of(smaller_batches) != job_settings_of(make_spec())
