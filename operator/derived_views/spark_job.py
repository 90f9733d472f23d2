"""Render one immutable SparkApplication per revision (pure: template text in, dict out).

Credentials only ever appear as `secretKeyRef` env entries: the manifest, the
job's arguments and therefore the API server never hold a secret value.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from derived_views import naming
from derived_views.resource.spec import GROUP, KIND, VERSION, DerivedViewSpec
from derived_views.settings import Settings

TEMPLATE = Path(__file__).resolve().parents[2] / "spark_templates" / "spark-application.yaml"
LEDGER_TABLE = "dv_ledger"


@dataclass(frozen=True)
class ViewRef:
    namespace: str
    name: str
    uid: str


def load_template(path: Path = TEMPLATE) -> str:
    return path.read_text()


def job_config(view: ViewRef, spec: DerivedViewSpec, revision: str, settings: Settings) -> dict[str, Any]:
    """The replay job's --config-json (contract: spark_templates/README.md)."""
    transform: dict[str, Any] = (
        {"sql": spec.transform.sql} if spec.transform.sql is not None
        else {"python": spec.transform.python.function if spec.transform.python else None})
    return {
        "view": f"{view.namespace}/{view.name}",
        "revision": revision,
        "source": {"bootstrapServers": spec.source.kafka.bootstrapServers,
                   "topics": list(spec.source.topics), "format": spec.source.format.value,
                   "schema": spec.source.schema_,
                   "maxOffsetsPerTrigger": spec.source.maxOffsetsPerTrigger, "kafkaOptions": {}},
        "transform": transform,
        "sink": {"table": naming.index_table(spec.sink.postgres.table, revision),
                 "schema": spec.sink.postgres.schema_, "primaryKey": list(spec.sink.primaryKey),
                 "ledgerTable": LEDGER_TABLE},
        "checkpointLocation": naming.checkpoint(settings.checkpoint_base, view.namespace,
                                                view.name, revision),
        "trigger": {"processingTimeSeconds": 1},
    }


def _env(spec: DerivedViewSpec) -> list[dict[str, Any]]:
    sink_secret = spec.sink.postgres.secretRef.name
    env = [{"name": var, "valueFrom": {"secretKeyRef": {"name": sink_secret, "key": key}}}
           for var, key in (("PGHOST", "host"), ("PGPORT", "port"), ("PGDATABASE", "database"),
                            ("PGUSER", "user"), ("PGPASSWORD", "password"))]
    if spec.source.kafka.secretRef is not None:
        kafka_secret = spec.source.kafka.secretRef.name
        env += [{"name": var, "valueFrom": {"secretKeyRef": {"name": kafka_secret, "key": key}}}
                for var, key in (("DV_KAFKA_SASL_USERNAME", "username"),
                                 ("DV_KAFKA_SASL_PASSWORD", "password"))]
    return env


def render(template: str, view: ViewRef, spec: DerivedViewSpec, revision: str,
           settings: Settings) -> dict[str, Any]:
    manifest: dict[str, Any] = copy.deepcopy(yaml.safe_load(template))
    meta, body = manifest["metadata"], manifest["spec"]
    meta["name"] = naming.spark_application(view.name, revision)
    meta["namespace"] = view.namespace
    meta["labels"].update({"derivedviews.io/view": view.name, "derivedviews.io/revision": revision})
    meta["ownerReferences"] = [{"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "name": view.name,
                                "uid": view.uid, "controller": True, "blockOwnerDeletion": True}]
    body["image"] = spec.spark.image or settings.spark_image
    body["sparkVersion"] = spec.spark.sparkVersion
    body["mainApplicationFile"] = settings.main_application_file
    body["arguments"] = ["--config-json",
                         json.dumps(job_config(view, spec, revision, settings), sort_keys=True)]
    body["sparkConf"] = {**body.get("sparkConf", {}), **spec.spark.sparkConf}
    body["deps"] = {"jars": list(settings.spark_jars),
                    "pyFiles": list(spec.transform.python.pyFiles) if spec.transform.python else []}
    rp = spec.spark.restartPolicy
    body["restartPolicy"] = {"type": rp.type.value, "onFailureRetries": rp.onFailureRetries,
                             "onFailureRetryInterval": rp.onFailureRetryInterval}
    env = _env(spec)
    body["driver"].update(cores=spec.spark.driver.cores, memory=spec.spark.driver.memory, env=env)
    if spec.spark.serviceAccount or settings.spark_service_account:
        body["driver"]["serviceAccount"] = spec.spark.serviceAccount or settings.spark_service_account
    body["executor"].update(instances=spec.spark.executor.instances, cores=spec.spark.executor.cores,
                            memory=spec.spark.executor.memory, env=copy.deepcopy(env))
    return manifest
