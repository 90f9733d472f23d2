"""Sample specs and settings for the core's unit tests (values written by hand)."""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
from typing import Any

from derived_views.api.spec import DerivedViewSpec
from derived_views.core.job.sparkapplication import load_template
from derived_views.core.judges.tenancy import SECRET_LABEL, KafkaClusters, TenancyPolicy
from derived_views.core.settings import CheckpointSettings, Settings, SparkSettings

T0 = dt.datetime(2026, 3, 1, 12, 0, 0, tzinfo=dt.UTC)
NAMESPACE = "shop"
VIEW = "orders-by-customer"
UID = "0d4b7c1e-5f2a-4c8e-9a71-3f9c2b6d8e10"

SQL_V1 = "SELECT customer_id, count(*) AS orders FROM events GROUP BY customer_id"
SQL_V2 = "SELECT customer_id, sum(amount) AS revenue FROM events GROUP BY customer_id"
SQL_V3 = "SELECT customer_id, max(amount) AS biggest FROM events GROUP BY customer_id"
SQLS = (SQL_V1, SQL_V2, SQL_V3)

# Revisions of spec_body(SQL_V1 / SQL_V2 / SQL_V3), checked in test_revision.
R1, R2, R3 = "71250ff800", "5d31ce3608", "1146c643c6"
I1, I2, I3 = (f"orders_by_customer__{r}" for r in (R1, R2, R3))

BASE: dict[str, Any] = {
    "source": {
        "kafka": {"bootstrapServers": "kafka:9092", "secretRef": {"name": "kafka-creds"}},
        "topics": ["orders"],
        "format": "json",
        "schema": "order_id STRING, customer_id STRING, amount DOUBLE",
    },
    "transform": {"sql": SQL_V1},
    "sink": {"postgres": {"secretRef": {"name": "views-db"}, "table": "orders_by_customer"},
             "primaryKey": ["customer_id"]},
    # Gate on messages alone (maxLagSeconds 0): the hand-worked scenarios count ticks to an
    # exact lag of 0; the gate in time has scenarios of its own.
    "cutover": {"maxLagMessages": 0, "maxLagSeconds": 0, "stableForSeconds": 10,
                "deadlineSeconds": 600, "retainPreviousSeconds": 60},
}


def spec_body(sql: str = SQL_V1, **overrides: Any) -> dict[str, Any]:
    """A spec document; `overrides` replace top-level sections (merged one level deep)."""
    body = copy.deepcopy(BASE)
    body["transform"] = {"sql": sql}
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(body.get(key), dict):
            body[key] = {**body[key], **value}
        else:
            body[key] = value
    return body


def make_spec(sql: str = SQL_V1, **overrides: Any) -> DerivedViewSpec:
    return DerivedViewSpec.model_validate(spec_body(sql, **overrides))


SAMPLE_TENANCY = TenancyPolicy(kafka_clusters=(KafkaClusters(("*",), ("kafka:9092",)),))
"""The default policy, with the samples' cluster listed (the default allows loopback only)."""
SECRET_LABELS = {name: {SECRET_LABEL: "true"} for name in ("views-db", "kafka-creds")}
"""The samples' Secrets exist and are labelled for views (Observed.secret_labels)."""


def make_settings(**changes: Any) -> Settings:
    """The samples' installation; `changes` replace whole sections (`checkpoints=...`), and a
    section given without a field it had keeps the samples' (the template, the image)."""
    base = Settings(spark=SparkSettings(template=load_template(),
                                        image="registry.example/dv-job:1.0",
                                        jars=("local:///opt/jars/kafka.jar",)),
                    checkpoints=CheckpointSettings(base="s3a://checkpoints/dv"),
                    tenancy=SAMPLE_TENANCY)
    merged: dict[str, Any] = {}
    for name, value in changes.items():
        current = getattr(base, name)
        if dataclasses.is_dataclass(value) and dataclasses.is_dataclass(current):
            defaults = type(value)()
            kept = {f.name: getattr(current, f.name) for f in dataclasses.fields(value)
                    if getattr(value, f.name) == getattr(defaults, f.name)}
            value = dataclasses.replace(value, **kept)
        merged[name] = value
    return dataclasses.replace(base, **merged)
