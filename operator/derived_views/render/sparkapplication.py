"""Render one immutable SparkApplication per revision: template text in, manifest out.

Credentials only appear as `secretKeyRef` env entries: the manifest, the
job's arguments and hence the API server never hold a secret value. The only
I/O is `load_template`, which the shell calls once at start-up.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from derived_views.api.constants import (
    API_VERSION,
    JOB_SETTINGS_ANNOTATION,
    KIND,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    REVISION_LABEL,
    VIEW_LABEL,
)
from derived_views.api.spec import DerivedViewSpec
from derived_views.core import checkpoints, naming
from derived_views.core.config import OperatorConfig
from derived_views.core.job_config import job_config, job_config_json
from derived_views.core.revision import job_settings_of

TEMPLATE_PATH = Path(__file__).resolve().parents[3] / "spark_templates" / "sparkapplication.yaml"
SPARK_API_VERSION = "sparkoperator.k8s.io/v1beta2"
SPARK_KIND = "SparkApplication"

POSTGRES_ENV = (("PGHOST", "host"), ("PGPORT", "port"), ("PGDATABASE", "database"),
                ("PGUSER", "user"), ("PGPASSWORD", "password"))
"""libpq's variables, from the sink Secret's keys; PGSSLMODE is added from the optional key
`sslmode`, matching what the operator's own PostgreSQL adapter reads."""
OPENSEARCH_ENV = (("DV_OPENSEARCH_URL", "url", False), ("DV_OPENSEARCH_USERNAME", "username", True),
                  ("DV_OPENSEARCH_PASSWORD", "password", True))
"""The OpenSearch sink's variables (dvjob.sink), from the sink Secret's keys: (var, key,
optional); the operator's own adapter reads the same keys."""
KAFKA_ENV = (("DV_KAFKA_SASL_USERNAME", "username"), ("DV_KAFKA_SASL_PASSWORD", "password"),
             ("DV_KAFKA_SASL_MECHANISM", "mechanism"),
             ("DV_KAFKA_SECURITY_PROTOCOL", "securityProtocol"), ("DV_KAFKA_SSL_CA_PEM", "ca.crt"))
"""The job's variables from the Kafka Secret's keys (the contract of `core.kafka_client`, by
which the operator reads the same Secret). All optional: `securityProtocol: SSL` needs no
credentials, and the operator reports a Secret lacking what its protocol needs."""
PLATFORM_SPARK_CONF = {"spark.sql.variable.substitute": "false"}
"""Set after the template's and the author's keys, so neither can undo them: with substitution
on, Spark replaces `${env:PGPASSWORD}` (or `${system:..}`, `${spark.x}`) in the SQL text with
its value before any parser or guard sees the query."""
KAFKA_SECRET_NAME_ENV = "DV_KAFKA_SECRET_NAME"
"""Tells the job a Secret is named, so it applies the same defaults (SASL_SSL) and names the
Secret when a key is missing."""


def load_template(path: Path = TEMPLATE_PATH) -> str:
    """Read the template (the shell's job, once); `render` itself never touches a file."""
    return path.read_text(encoding="utf-8")


def _secret_env(var: str, secret: str, key: str, *, optional: bool = False) -> dict[str, Any]:
    ref: dict[str, Any] = {"name": secret, "key": key}
    if optional:
        ref["optional"] = True
    return {"name": var, "valueFrom": {"secretKeyRef": ref}}


def job_env(spec: DerivedViewSpec) -> list[dict[str, Any]]:
    """Environment of the driver and the executors: references to Secrets, never values."""
    sink_secret = spec.sink.secret_ref.name
    if spec.sink.kind == "opensearch":
        env = [_secret_env(var, sink_secret, key, optional=optional)
               for var, key, optional in OPENSEARCH_ENV]
    else:
        env = [_secret_env(var, sink_secret, key) for var, key in POSTGRES_ENV]
        env.append(_secret_env("PGSSLMODE", sink_secret, "sslmode", optional=True))
    if spec.source.kafka.secret_ref is not None:
        kafka_secret = spec.source.kafka.secret_ref.name
        env += [_secret_env(var, kafka_secret, key, optional=True) for var, key in KAFKA_ENV]
        env.append({"name": KAFKA_SECRET_NAME_ENV, "value": kafka_secret})
    return env


def checkpoint_env(config: OperatorConfig, checkpoint_location: str) -> list[dict[str, Any]]:
    """S3 credentials of an s3a:// checkpoint, as references to the configured Secret."""
    if not checkpoints.is_s3a(checkpoint_location) or not config.checkpoint_secret:
        return []
    return [_secret_env(key, config.checkpoint_secret, key) for key in checkpoints.SECRET_KEYS]


def checkpoint_hadoop_conf(config: OperatorConfig, checkpoint_location: str) -> dict[str, str]:
    """`spec.hadoopConf` entries that let S3A reach an s3a:// checkpoint."""
    if not checkpoints.is_s3a(checkpoint_location):
        return {}
    return checkpoints.s3a_hadoop_conf(config.checkpoint_s3_endpoint, config.checkpoint_s3_region)


def restart_policy(spec: DerivedViewSpec) -> dict[str, Any]:
    """Only the fields the policy type uses, so the manifest says what it means."""
    policy = spec.spark.restart_policy
    if policy.type == "Never":
        return {"type": "Never"}
    if policy.type == "Always":
        return {"type": "Always", "onFailureRetryInterval": policy.on_failure_retry_interval}
    return {"type": "OnFailure", "onFailureRetries": policy.on_failure_retries,
            "onFailureRetryInterval": policy.on_failure_retry_interval}


def render_spark_application(template: str, *, config: OperatorConfig, namespace: str,
                             view: str, uid: str, spec: DerivedViewSpec, revision: str,
                             checkpoint_location: str) -> dict[str, Any]:
    """The SparkApplication of `revision`; `spec` must carry that revision's content."""
    manifest = yaml.safe_load(template)
    if (not isinstance(manifest, dict) or manifest.get("apiVersion") != SPARK_API_VERSION
            or manifest.get("kind") != SPARK_KIND):
        raise ValueError(f"the template must be a {SPARK_API_VERSION} {SPARK_KIND}")
    meta: dict[str, Any] = manifest.setdefault("metadata", {}) or {}
    body: dict[str, Any] = manifest.setdefault("spec", {}) or {}
    manifest["metadata"], manifest["spec"] = meta, body

    labels = {VIEW_LABEL: view, REVISION_LABEL: revision}
    meta["name"] = naming.spark_application_name(view, revision)
    meta["namespace"] = namespace
    meta["labels"] = {**(meta.get("labels") or {}), MANAGED_BY_LABEL: MANAGED_BY, **labels}
    meta["annotations"] = {**(meta.get("annotations") or {}),
                           JOB_SETTINGS_ANNOTATION: job_settings_of(spec)}
    meta["ownerReferences"] = [{"apiVersion": API_VERSION, "kind": KIND, "name": view,
                                "uid": uid, "controller": True, "blockOwnerDeletion": True}]

    config_doc = job_config(namespace=namespace, view=view, spec=spec, revision=revision,
                            checkpoint_location=checkpoint_location,
                            ledger_table=config.ledger_table, uid=uid)
    spark = spec.spark
    body.update({
        "type": "Python",
        "pythonVersion": "3",
        "mode": "cluster",
        "image": spark.image or config.spark_image,
        "sparkVersion": spark.spark_version,
        "mainApplicationFile": spark.main_application_file or config.main_application_file,
        "arguments": ["--config-json", job_config_json(config_doc)],
        "sparkConf": {**(body.get("sparkConf") or {}), **spark.spark_conf,
                      **PLATFORM_SPARK_CONF},
        "restartPolicy": restart_policy(spec),
    })
    deps: dict[str, Any] = dict(body.get("deps") or {})
    deps["jars"] = [*(deps.get("jars") or []), *config.spark_jars]
    if spec.transform.python is not None and spec.transform.python.py_files:
        deps["pyFiles"] = [*(deps.get("pyFiles") or []), *spec.transform.python.py_files]
    body["deps"] = deps

    env = job_env(spec)
    driver: dict[str, Any] = dict(body.get("driver") or {})
    driver.update(cores=spark.driver.cores, memory=spark.driver.memory,
                  env=[*(driver.get("env") or []), *copy.deepcopy(env)],
                  labels={**(driver.get("labels") or {}), **labels})
    service_account = spark.service_account or config.spark_service_account
    if service_account:
        driver["serviceAccount"] = service_account
    executor: dict[str, Any] = dict(body.get("executor") or {})
    executor.update(instances=spark.executor.instances, cores=spark.executor.cores,
                    memory=spark.executor.memory,
                    env=[*(executor.get("env") or []), *copy.deepcopy(env)],
                    labels={**(executor.get("labels") or {}), **labels})
    if service_account:  # the executors too: the platform's account, not the pod default
        executor["serviceAccount"] = service_account
    body["driver"], body["executor"] = driver, executor

    # Checkpoint store: credentials by reference, endpoint and region as Hadoop settings.
    store_env = checkpoint_env(config, checkpoint_location)
    for role in (driver, executor):
        role["env"] = [*role["env"], *copy.deepcopy(store_env)]
    hadoop_conf = checkpoint_hadoop_conf(config, checkpoint_location)
    if hadoop_conf:
        body["hadoopConf"] = {**(body.get("hadoopConf") or {}), **hadoop_conf}
    return dict(manifest)
