"""The job's --config-json, written out by hand, and accepted by the job's own validator."""

from __future__ import annotations

import json

import pytest

from derived_views.api.spec import DerivedViewSpec
from derived_views.core.job.job_config import job_config, job_config_json
from dvjob.config import parse_config
from support.world.samples import SQL_V1, SQL_V2, make_spec, spec_body

R1 = "71250ff800"


def test_sql_view_config() -> None:
    config = job_config(uid="u-1", namespace="shop", view="orders-by-customer",
                        spec=make_spec(SQL_V1), revision=R1, checkpoint_location=f"s3a://c/shop/orders-by-customer/{R1}")
    assert config == {
        "view": "shop/orders-by-customer",
        "owner": {"namespace": "shop", "name": "orders-by-customer", "uid": "u-1"},
        "revision": R1,
        "source": {"bootstrapServers": "kafka:9092", "topics": ["orders"], "format": "json",
                   "schema": "order_id STRING, customer_id STRING, amount DOUBLE",
                   "maxOffsetsPerTrigger": 1_000_000, "kafkaOptions": {},
                   "badRecords": {"policy": "fail"}},
        "transform": {"sql": SQL_V1},
        "sink": {"kind": "postgres", "table": f"orders_by_customer__{R1}", "schema": "public",
                 "primaryKey": ["customer_id"], "ledgerTable": "dv_ledger"},
        "checkpointLocation": f"s3a://c/shop/orders-by-customer/{R1}",
        "trigger": {"processingTimeSeconds": 1},
    }
    text = job_config_json(config)
    assert " " not in text.replace(SQL_V1, "").replace(
        "order_id STRING, customer_id STRING, amount DOUBLE", "")
    parsed = parse_config(text)  # the job's own, strict validation
    assert parsed.sink.table == f"orders_by_customer__{R1}"
    assert parsed.trigger.processing_time_seconds == 1
    assert parsed.owner is not None and parsed.owner.uid == "u-1"


def test_python_view_config_passes_the_function_reference() -> None:
    body = spec_body(source={"maxOffsetsPerTrigger": 5000})
    body["transform"] = {"python": {"function": "views.orders:by_customer",
                                    "pyFiles": ["s3a://code/views.zip"]}}
    spec = DerivedViewSpec.model_validate(body)
    from derived_views.core.revision import revision_of
    revision = revision_of(spec)
    config = job_config(uid="u-1", namespace="shop", view="v", spec=spec, revision=revision,
                        checkpoint_location="/ckpt")
    assert config["transform"] == {"python": "views.orders:by_customer"}
    assert config["source"]["maxOffsetsPerTrigger"] == 5000
    parse_config(json.dumps(config))


def test_a_config_for_the_wrong_revision_is_refused() -> None:
    with pytest.raises(ValueError, match="not 71250ff800"):
        job_config(uid="u-1", namespace="shop", view="v", spec=make_spec(SQL_V2), revision=R1,
                   checkpoint_location="/ckpt")


def test_a_config_without_the_views_uid_is_refused() -> None:
    """The job records the UID as the index's owner: a config without one could not."""
    with pytest.raises(ValueError, match="uid"):
        job_config(uid="", namespace="shop", view="v", spec=make_spec(SQL_V1), revision=R1,
                   checkpoint_location="/ckpt")
