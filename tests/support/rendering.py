"""Sample specs rendered into SparkApplications, for the renderer's and the Avro views'
tests (values written by hand)."""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any

from derived_views.api.spec import DerivedViewSpec
from derived_views.core.job.sparkapplication import load_template, render_spark_application
from derived_views.core.job.stages import STEADY, JobSize
from derived_views.core.settings import CheckpointSettings, Settings, SparkSettings

REVISION = "71250ff800"
SQL = "SELECT customer_id, count(*) AS orders FROM events GROUP BY customer_id"
BODY: dict[str, Any] = {
    "source": {"kafka": {"bootstrapServers": "kafka:9092", "secretRef": {"name": "kafka-creds"}},
               "topics": ["orders"], "schema": "order_id STRING, customer_id STRING, amount DOUBLE"},
    "transform": {"sql": SQL},
    "sink": {"postgres": {"secretRef": {"name": "views-db"}, "table": "orders_by_customer"},
             "primaryKey": ["customer_id"]},
    "spark": {"executor": {"instances": 2, "memory": "2g"},
              "sparkConf": {"spark.sql.shuffle.partitions": "8", "spark.ui.enabled": "false"}},
}
SETTINGS = Settings(
    spark=SparkSettings(template=load_template(), image="registry.example/dv-job:1.0",
                        jars=("local:///opt/spark/jars/spark-sql-kafka.jar",),
                        service_account="spark"),
    checkpoints=CheckpointSettings(base="s3a://checkpoints/dv"))


def render(body: dict[str, Any] = BODY, revision: str = REVISION, *,
           template: str | None = None, checkpoints: CheckpointSettings | None = None,
           size: JobSize = STEADY) -> dict[str, Any]:
    """The sample's SparkApplication; `template` and `checkpoints` replace the samples';
    `size` is the job's stage (core.job.stages)."""
    settings = SETTINGS
    if template is not None:
        settings = dataclasses.replace(
            settings, spark=dataclasses.replace(settings.spark, template=template))
    if checkpoints is not None:
        settings = dataclasses.replace(settings, checkpoints=checkpoints)
    return render_spark_application(
        settings.spark.template, settings=settings, namespace="shop", view="orders-by-customer",
        uid="0d4b7c1e-5f2a-4c8e-9a71-3f9c2b6d8e10", spec=DerivedViewSpec.model_validate(body),
        revision=revision,
        checkpoint_location=f"s3a://checkpoints/dv/shop/orders-by-customer/{revision}",
        size=size)


READER = {"type": "record", "name": "Order", "fields": [
    {"name": "order_id", "type": "string"}, {"name": "customer_id", "type": "string"},
    {"name": "amount", "type": "long"}, {"name": "channel", "type": "string", "default": "web"}]}


def avro_body(reader: dict[str, Any] = READER, registry: str = "registry") -> dict[str, Any]:
    body = copy.deepcopy(BODY)
    del body["source"]["schema"]
    body["source"].update(format="avro", avro={
        "registry": {"secretRef": {"name": registry}},
        "readerSchema": {"schema": json.dumps(reader)}})
    return body


def avro_spec(**changes: Any) -> DerivedViewSpec:
    return DerivedViewSpec.model_validate(avro_body(**changes))


def debezium_avro_body(reader: dict[str, Any] = READER) -> dict[str, Any]:
    body = avro_body(reader)
    body["source"]["format"] = "debezium"
    return body
