"""Which edits make a new revision, and the names derived from one."""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

import pytest
from tests_support_spec import BASE  # type: ignore[import-not-found]

from derived_views import naming
from derived_views.resource.spec import DerivedViewSpec
from derived_views.revision import revision_of


def _rev(mutate: Any = None) -> str:
    body = copy.deepcopy(BASE)
    if mutate:
        mutate(body)
    return revision_of(DerivedViewSpec.model_validate(body))


def test_revision_is_the_hash_of_the_documented_content() -> None:
    content = {"topics": ["orders"], "format": "json", "schema": "order_id STRING, amount DOUBLE",
               "transform": {"sql": "SELECT * FROM events"},
               "sink": {"table": "orders", "schema": "public", "primaryKey": ["order_id"]}}
    digest = hashlib.sha256(json.dumps(content, sort_keys=True, separators=(",", ":")).encode())
    assert _rev() == digest.hexdigest()[:10]


@pytest.mark.parametrize("mutate", [
    lambda b: b["transform"].update(sql="SELECT order_id FROM events"),
    lambda b: b["source"].update(topics=["orders", "refunds"]),
    lambda b: b["source"].update(schema="order_id STRING"),
    lambda b: b["source"].update(format="debezium"),
    lambda b: b["sink"].update(primaryKey=["amount"]),
    lambda b: b["sink"]["postgres"].update(table="orders2"),
])
def test_content_edits_change_the_revision(mutate: Any) -> None:
    assert _rev(mutate) != _rev()


@pytest.mark.parametrize("mutate", [
    lambda b: b.update(cutover={"maxLagMessages": 100, "mode": "manual"}),
    lambda b: b.update(spark={"executor": {"instances": 4}, "sparkConf": {"a": "b"}}),
    lambda b: b.update(deletionPolicy="Delete"),
    lambda b: b["source"]["kafka"].update(bootstrapServers="other:9092", secretRef={"name": "k"}),
    lambda b: b["sink"]["postgres"].update(secretRef={"name": "other-db"}),
    lambda b: b["source"].update(schema="order_id   STRING,\n amount DOUBLE"),
])
def test_other_edits_keep_the_revision(mutate: Any) -> None:
    assert _rev(mutate) == _rev()


def test_names_fit_their_limits() -> None:
    assert naming.index_table("orders", "0123456789") == "orders__0123456789"
    long_table = "t" * 40
    assert len(naming.index_table(long_table, "0123456789")) == 52
    long_view = "v" * 63
    name = naming.spark_application(long_view, "0123456789")
    assert len(name) == 63 and name.endswith("-0123456789")
    assert naming.spark_application("orders", "0123456789") == "orders-0123456789"
    assert naming.checkpoint("s3a://b/dv/", "shop", "orders", "r1") == "s3a://b/dv/shop/orders/r1"
