"""Render one immutable SparkApplication per revision: template text in, manifest out.

Credentials only appear as Secrets mounted into the job's pods (by name): the
manifest, the job's arguments and hence the API server never hold a secret value. The only
I/O is `load_template`, which the shell calls once at start-up.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import yaml

from derived_views.api.constants import (
    API_VERSION,
    JOB_SETTINGS_ANNOTATION,
    JOB_STAGE_LABEL,
    KIND,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    REVISION_LABEL,
    VIEW_LABEL,
    VIEW_NAMESPACE_LABEL,
)
from derived_views.api.spec import DerivedViewSpec
from derived_views.core import naming
from derived_views.core.actions import SecretCopy
from derived_views.core.job import checkpoints
from derived_views.core.job.job_config import job_config, job_config_json
from derived_views.core.job.stages import IN_DRIVER_CONF, STEADY, JobSize
from derived_views.core.judges.source_schema import NONE_KNOWN, ReaderSchemas
from derived_views.core.revision import job_settings_of
from derived_views.core.settings import Settings

TEMPLATE_PATH = Path(__file__).resolve().parents[4] / "spark_templates" / "sparkapplication.yaml"
SPARK_API_VERSION = "sparkoperator.k8s.io/v1beta2"
SPARK_KIND = "SparkApplication"

SECRETS_MOUNT_ROOT = "/var/run/secrets/derived-views"
"""Where the job's pods mount each Secret, at `<root>/<secret name>`, one file per key."""
PLATFORM_SPARK_CONF = {"spark.sql.variable.substitute": "false"}
"""Set after the template's and the author's keys, so neither can undo them: with substitution
on, Spark replaces `${env:PGPASSWORD}` (or `${system:..}`, `${spark.x}`) in the SQL text with
its value before any parser or guard sees the query."""


def load_template(path: Path = TEMPLATE_PATH) -> str:
    """Read the template (the shell's job, once); `render` itself never touches a file."""
    return path.read_text(encoding="utf-8")


DRIVER_ONLY_ROLES = frozenset({"registry"})
"""Secrets only the driver reads: not mounted into executors."""


def job_secrets(spec: DerivedViewSpec, settings: Settings,
                checkpoint_location: str) -> dict[str, str | None]:
    """The Secrets a revision's job reads, by role (the job configuration's `secrets`): the
    sink's, the Kafka cluster's (if any), the checkpoint store's (s3a:// only) and the schema
    registry's (format avro)."""
    kafka = spec.source.kafka.secret_ref
    store = (settings.checkpoints.secret if checkpoints.is_s3a(checkpoint_location) else None)
    avro = spec.source.avro
    return {"sink": spec.sink.secret_ref.name, "kafka": kafka.name if kafka else None,
            "checkpoint": store or None,
            "registry": avro.registry.secret_ref.name if avro else None}


def secret_mounts(secrets: dict[str, str | None]) -> list[dict[str, str]]:
    """`driver.secrets` / `executor.secrets`: each Secret mounted once, as files.

    Not environment variables: those are readable by any child process of the driver and
    by Spark's `${env:X}` substitution in SQL text, so one guard's failure would put a
    password in an index. Upstream turns each entry into spark-submit's
    `spark.kubernetes.{driver,executor}.secrets.<name>=<path>` (v2.5.2 submission.go
    driverSecretOption/executorSecretOption), Spark mounts the Secret there
    (MountSecretsFeatureStep), and the job finds it under that same key. A mount is never
    optional: without the Secret the pod waits, as it must."""
    names = sorted({name for name in secrets.values() if name})
    return [{"name": name, "path": f"{SECRETS_MOUNT_ROOT}/{name}", "secretType": "Generic"}
            for name in names]


def checkpoint_hadoop_conf(settings: Settings, checkpoint_location: str) -> dict[str, str]:
    """`spec.hadoopConf` entries that let S3A reach an s3a:// checkpoint."""
    if not checkpoints.is_s3a(checkpoint_location):
        return {}
    return checkpoints.s3a_hadoop_conf(settings.checkpoints.s3_endpoint, settings.checkpoints.s3_region)


def restart_policy(spec: DerivedViewSpec) -> dict[str, Any]:
    """Only the fields the policy type uses, so the manifest says what it means."""
    policy = spec.spark.restart_policy
    if policy.type == "Never":
        return {"type": "Never"}
    if policy.type == "Always":
        return {"type": "Always", "onFailureRetryInterval": policy.on_failure_retry_interval}
    return {"type": "OnFailure", "onFailureRetries": policy.on_failure_retries,
            "onFailureRetryInterval": policy.on_failure_retry_interval}


@functools.lru_cache(maxsize=8)
def _parsed(template: str) -> Any:
    """The template's YAML, parsed once: an operator renders one manifest per revision from
    the same few templates, and parsing was most of a render's time. Callers copy it."""
    return yaml.safe_load(template)


def mounted_names(secrets: dict[str, str | None], *, view: str, copied: bool
                  ) -> dict[str, str | None]:
    """The names the job mounts its Secrets by: their own in the view's namespace; in a job
    namespace the view's copies (core.naming.secret_copy_name), and the checkpoint Secret
    by its name (the platform's, or the operator's copy of it)."""
    if not copied:
        return dict(secrets)
    return {role: (name if role == "checkpoint" or name is None
                   else naming.secret_copy_name(view, name)) for role, name in secrets.items()}


def secret_copies(secrets: dict[str, str | None], *, view: str, namespace: str,
                  settings: Settings) -> tuple[SecretCopy, ...]:
    """What a job in a job namespace needs copied there before its pods can start."""
    copies = []
    for role, name in sorted(secrets.items()):
        if name is None:
            continue
        if role == "checkpoint":
            copies.append(SecretCopy(settings.jobs.operator_namespace, name, name, platform=True))
        else:
            copies.append(SecretCopy(namespace, name, naming.secret_copy_name(view, name)))
    return tuple(copies)


def render_spark_application(template: str, *, settings: Settings, namespace: str,
                             view: str, uid: str, spec: DerivedViewSpec, revision: str,
                             checkpoint_location: str,
                             reader_schemas: ReaderSchemas = NONE_KNOWN,
                             size: JobSize = STEADY) -> dict[str, Any]:
    """The SparkApplication of `revision`; `spec` must carry that revision's content (and
    `reader_schemas` the text of a reader schema it pins in the registry), `size` its stage
    (core.job.stages: a replay's executors; the steady stage's own Spark settings, under the
    view's, labelled `derivedviews.io/job-stage`). It runs in the
    view's job namespace (Settings.jobs): there it carries the view's
    namespace as a label and no owner reference (those cannot cross namespaces), and mounts
    the view's Secrets by their copies' names."""
    manifest = copy.deepcopy(_parsed(template))
    if (not isinstance(manifest, dict) or manifest.get("apiVersion") != SPARK_API_VERSION
            or manifest.get("kind") != SPARK_KIND):
        raise ValueError(f"the template must be a {SPARK_API_VERSION} {SPARK_KIND}")
    meta: dict[str, Any] = manifest.setdefault("metadata", {}) or {}
    body: dict[str, Any] = manifest.setdefault("spec", {}) or {}
    manifest["metadata"], manifest["spec"] = meta, body

    jobs = settings.jobs_of(namespace)
    copied = jobs != namespace
    trigger_seconds = settings.spark.trigger_of(spec.cutover)
    labels = {VIEW_LABEL: view, REVISION_LABEL: revision}
    if copied:
        labels[VIEW_NAMESPACE_LABEL] = namespace
    meta["name"] = naming.spark_application_name(view, revision)
    meta["namespace"] = jobs
    meta["labels"] = {**(meta.get("labels") or {}), MANAGED_BY_LABEL: MANAGED_BY, **labels,
                      JOB_STAGE_LABEL: size.stage.value}
    meta["annotations"] = {**(meta.get("annotations") or {}),
                           JOB_SETTINGS_ANNOTATION: job_settings_of(spec, trigger_seconds,
                                                                    size.executors)}
    if not copied:
        meta["ownerReferences"] = [{"apiVersion": API_VERSION, "kind": KIND, "name": view,
                                    "uid": uid, "controller": True,
                                    "blockOwnerDeletion": True}]

    secrets = mounted_names(job_secrets(spec, settings, checkpoint_location), view=view,
                            copied=copied)
    config_doc = job_config(namespace=namespace, view=view, spec=spec, revision=revision,
                            checkpoint_location=checkpoint_location,
                            ledger_table=settings.sinks.ledger_table, uid=uid, secrets=secrets,
                            trigger_seconds=trigger_seconds,
                            reader_schemas=reader_schemas)
    spark = spec.spark
    executors = size.executors_of(spec)
    body.update({
        "type": "Python",
        "pythonVersion": "3",
        "mode": "cluster",
        "image": spark.image or settings.spark.image,
        "sparkVersion": spark.spark_version,
        "mainApplicationFile": spark.main_application_file or settings.spark.main_application_file,
        "arguments": ["--config-json", job_config_json(config_doc)],
        "sparkConf": {**size.state_partitions_conf(spec), **(body.get("sparkConf") or {}),
                      **size.spark_conf,
                      **spark.spark_conf,
                      **checkpoints.checkpoint_spark_conf(checkpoint_location),
                      IN_DRIVER_CONF: "true" if executors == 0 else "false",
                      **PLATFORM_SPARK_CONF},
        "restartPolicy": restart_policy(spec),
    })
    deps: dict[str, Any] = dict(body.get("deps") or {})
    deps["jars"] = [*(deps.get("jars") or []), *settings.spark.jars]
    if spec.transform.python is not None and spec.transform.python.py_files:
        deps["pyFiles"] = [*(deps.get("pyFiles") or []), *spec.transform.python.py_files]
    body["deps"] = deps

    mounts = secret_mounts(secrets)
    driver: dict[str, Any] = dict(body.get("driver") or {})
    driver.update(cores=spark.driver.cores, memory=spark.driver.memory,
                  secrets=[*(driver.get("secrets") or []), *copy.deepcopy(mounts)],
                  labels={**(driver.get("labels") or {}), **labels})
    service_account = spark.service_account or settings.spark.service_account
    if service_account:
        driver["serviceAccount"] = service_account
    executor: dict[str, Any] = dict(body.get("executor") or {})
    # The registry is read by the driver alone (it plans the decoding): not the executors.
    executor_mounts = secret_mounts({r: n for r, n in secrets.items()
                                     if r not in DRIVER_ONLY_ROLES})
    # No executors: the job runs its tasks in the driver (IN_DRIVER_CONF), and the Spark
    # Operator is given no count, as spark-submit refuses 0.
    executor.pop("instances", None)
    if executors:
        executor["instances"] = executors
    executor.update(cores=spark.executor.cores,
                    memory=spark.executor.memory,
                    secrets=[*(executor.get("secrets") or []), *executor_mounts],
                    labels={**(executor.get("labels") or {}), **labels})
    if service_account:  # the executors too: the platform's account, not the pod default
        executor["serviceAccount"] = service_account
    for role in (driver, executor):
        java_options = size.java_options(role.get("javaOptions"))
        if java_options:
            role["javaOptions"] = java_options
    body["driver"], body["executor"] = driver, executor

    # Checkpoint store: credentials mounted above, endpoint and region as Hadoop settings.
    hadoop_conf = checkpoint_hadoop_conf(settings, checkpoint_location)
    if hadoop_conf:
        body["hadoopConf"] = {**(body.get("hadoopConf") or {}), **hadoop_conf}
    return dict(manifest)
