"""The SparkApplication of one revision: a reviewed snapshot plus the contract, field by field.

Regenerate the snapshot after a deliberate change with
`DV_UPDATE_SNAPSHOTS=1 pytest tests/unit/core/test_sparkapplication.py` and review the diff.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
from pathlib import Path

import pytest
import yaml

from derived_views.api.spec import DerivedViewSpec
from derived_views.api.status import JobStage
from derived_views.core.job.sparkapplication import load_template, render_spark_application
from derived_views.core.job.stages import STEADY, JobSize
from derived_views.core.settings import CheckpointSettings
from dvjob.config import parse_config
from support.rendering import BODY, REVISION, SETTINGS, render

SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
def test_matches_the_reviewed_snapshot() -> None:
    text = yaml.safe_dump(render(), sort_keys=True, width=10_000)
    snapshot = SNAPSHOTS / "sparkapplication.yaml"
    if os.environ.get("DV_UPDATE_SNAPSHOTS") == "1":
        snapshot.write_text(text)
    assert text == snapshot.read_text()


def test_contract_fields() -> None:
    manifest = render()
    assert manifest["apiVersion"] == "sparkoperator.k8s.io/v1beta2"
    assert manifest["kind"] == "SparkApplication"
    meta, spec = manifest["metadata"], manifest["spec"]
    assert meta["name"] == "orders-by-customer-71250ff800"
    assert meta["namespace"] == "shop"
    assert meta["labels"]["derivedviews.io/view"] == "orders-by-customer"
    assert meta["labels"]["derivedviews.io/revision"] == REVISION
    assert meta["ownerReferences"] == [{
        "apiVersion": "derivedviews.io/v1alpha1", "kind": "DerivedView",
        "name": "orders-by-customer", "uid": "0d4b7c1e-5f2a-4c8e-9a71-3f9c2b6d8e10",
        "controller": True, "blockOwnerDeletion": True}]
    assert (spec["type"], spec["mode"], spec["pythonVersion"]) == ("Python", "cluster", "3")
    assert spec["mainApplicationFile"] == \
        "local:///opt/derived-views/spark_templates/derived_view_job.py"
    assert spec["sparkVersion"] == "4.0.0"
    assert spec["image"] == "registry.example/dv-job:1.0"
    assert spec["restartPolicy"] == {"type": "OnFailure", "onFailureRetries": 3,
                                     "onFailureRetryInterval": 10}
    assert spec["deps"] == {"jars": ["local:///opt/spark/jars/spark-sql-kafka.jar"]}
    assert spec["driver"]["serviceAccount"] == "spark"
    assert (spec["executor"]["instances"], spec["executor"]["memory"]) == (2, "2g")


def test_user_spark_conf_is_merged_over_the_template_defaults() -> None:
    conf = render()["spec"]["sparkConf"]
    assert conf == {"spark.sql.shuffle.partitions": "8", "spark.sql.session.timeZone": "UTC",
                    "spark.ui.enabled": "false", "spark.sql.variable.substitute": "false",
                    "spark.executor.heartbeatInterval": "3s",
                    # the steady stage's (core.job.stages)
                    "spark.python.use.daemon": "false", "spark.buffer.pageSize": "1m",
                    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
                    "spark.ui.retainedJobs": "50",
                    "spark.ui.retainedStages": "50", "spark.ui.retainedTasks": "500",
                    "spark.sql.ui.retainedExecutions": "50",
                    "spark.sql.streaming.checkpointFileManagerClass":  # s3a:// (checkpoints)
                    "org.apache.spark.internal.io.cloud.AbortableStreamBasedCheckpointFileManager",
                    "spark.derivedviews.tasksInDriver": "false"}  # BODY has executors


def test_state_partitions_are_the_jobs_task_slots_unless_template_or_view_say() -> None:
    """Written by hand: a job in its driver has its driver's cores, one on executors their
    cores in all, a replay its own executors'; the template, then the view, override."""
    def partitions(spark: dict[str, object], size: JobSize = STEADY,
                   template: str | None = None) -> str:
        body = copy.deepcopy(BODY)
        body["spark"] = spark
        return str(render(body, size=size, template=template)["spec"]["sparkConf"][
            "spark.sql.shuffle.partitions"])

    assert partitions({}) == "1"
    assert partitions({"driver": {"cores": 3}}) == "3"
    assert partitions({"executor": {"instances": 2, "cores": 3}}) == "6"
    assert partitions({"driver": {"cores": 3}},
                      JobSize(JobStage.Replay, executors=5)) == "5"
    assert partitions({"sparkConf": {"spark.sql.shuffle.partitions": "12"}}) == "12"
    template = load_template().replace(
        "spark.sql.session.timeZone: UTC", "spark.sql.session.timeZone: UTC\n    "
        "spark.sql.shuffle.partitions: \"7\"")
    assert partitions({}, template=template) == "7"
    assert partitions({"sparkConf": {"spark.sql.shuffle.partitions": "12"}},
                      template=template) == "12"


def test_a_job_of_no_executors_runs_its_tasks_in_the_driver() -> None:
    """The default steady job asks the Spark Operator for no executor count (spark-submit
    refuses 0) and tells the job to run its tasks in the driver, whatever the author says."""
    body = copy.deepcopy(BODY)
    body["spark"]["executor"] = {"memory": "2g"}  # instances: the default
    body["spark"]["sparkConf"] = {"spark.derivedviews.tasksInDriver": "false"}
    spec = render(body)["spec"]
    assert spec["sparkConf"]["spark.derivedviews.tasksInDriver"] == "true"
    assert "instances" not in spec["executor"]
    assert (spec["executor"]["cores"], spec["executor"]["memory"]) == (1, "2g")
    body["spark"]["executor"] = {"instances": 1}
    body["spark"]["sparkConf"] = {"spark.derivedviews.tasksInDriver": "true"}
    spec = render(body)["spec"]
    assert spec["sparkConf"]["spark.derivedviews.tasksInDriver"] == "false"
    assert spec["executor"]["instances"] == 1


def test_variable_substitution_is_off_whatever_the_author_or_template_says() -> None:
    """`${env:PGPASSWORD}` in SQL stays text: the platform's setting is rendered last."""
    body = copy.deepcopy(BODY)
    body["spark"]["sparkConf"] = {"spark.sql.variable.substitute": "true"}
    assert render(body)["spec"]["sparkConf"]["spark.sql.variable.substitute"] == "false"
    template = load_template().replace(
        "spark.sql.session.timeZone: UTC", "spark.sql.session.timeZone: UTC\n    "
        "spark.sql.variable.substitute: \"true\"")
    assert "substitute" in template
    manifest = render_spark_application(
        template, settings=SETTINGS, namespace="shop", view="v", uid="u",
        spec=DerivedViewSpec.model_validate(BODY), revision=REVISION,
        checkpoint_location="s3a://checkpoints/dv/x")
    assert manifest["spec"]["sparkConf"]["spark.sql.variable.substitute"] == "false"


def test_arguments_carry_the_job_config_the_job_accepts() -> None:
    args = render()["spec"]["arguments"]
    assert args[0] == "--config-json" and len(args) == 2
    config = json.loads(args[1])
    assert config["view"] == "shop/orders-by-customer"
    assert config["checkpointLocation"] == f"s3a://checkpoints/dv/shop/orders-by-customer/{REVISION}"
    assert parse_config(args[1]).revision == REVISION


def mounts(*names: str) -> list[dict[str, str]]:
    """Spark Operator v2.5.2's SecretInfo: each Secret mounted as files at a fixed path."""
    return [{"name": n, "path": f"/var/run/secrets/derived-views/{n}", "secretType": "Generic"}
            for n in names]


def test_credentials_are_mounted_secrets_on_driver_and_executor_never_env() -> None:
    spec = render()["spec"]
    for role in ("driver", "executor"):
        assert spec[role]["secrets"] == mounts("kafka-creds", "views-db")
        assert "env" not in spec[role]  # nothing for `${env:}` or a child process to read
    config = json.loads(spec["arguments"][1])
    assert config["secrets"] == {"sink": "views-db", "kafka": "kafka-creds"}
    assert parse_config(spec["arguments"][1]).secrets is not None


def test_no_kafka_credentials_without_a_kafka_secret() -> None:
    body = copy.deepcopy(BODY)
    del body["source"]["kafka"]["secretRef"]
    spec = render(body)["spec"]
    assert spec["driver"]["secrets"] == mounts("views-db")
    assert json.loads(spec["arguments"][1])["secrets"] == {"sink": "views-db"}


def test_one_secret_for_two_roles_is_mounted_once() -> None:
    body = copy.deepcopy(BODY)
    body["source"]["kafka"]["secretRef"]["name"] = "views-db"
    spec = render(body)["spec"]
    assert spec["executor"]["secrets"] == mounts("views-db")
    assert json.loads(spec["arguments"][1])["secrets"] == {"sink": "views-db", "kafka": "views-db"}


def test_python_transform_ships_its_files_and_spec_overrides_apply() -> None:
    body = copy.deepcopy(BODY)
    body["transform"] = {"python": {"function": "views.orders:by_customer",
                                    "pyFiles": ["s3a://code/views.zip"]}}
    body["spark"] = {"image": "custom:2", "mainApplicationFile": "local:///app/job.py",
                     "serviceAccount": "view-sa", "restartPolicy": {"type": "Never"}}
    from derived_views.core.revision import revision_of
    revision = revision_of(DerivedViewSpec.model_validate(body))
    spec = render(body, revision=revision)["spec"]
    assert spec["deps"]["pyFiles"] == ["s3a://code/views.zip"]
    assert spec["image"] == "custom:2"
    assert spec["mainApplicationFile"] == "local:///app/job.py"
    assert spec["driver"]["serviceAccount"] == "view-sa"
    assert spec["restartPolicy"] == {"type": "Never"}
    assert json.loads(spec["arguments"][1])["transform"] == {"python": "views.orders:by_customer"}


def test_rendering_is_pure() -> None:
    assert render() == render()
    template = SETTINGS.spark.template
    render()
    assert SETTINGS.spark.template == template


def test_a_template_of_another_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="SparkApplication"):
        render(template="apiVersion: v1\nkind: Pod\n")


S3 = CheckpointSettings(base="s3a://checkpoints/dv", secret="dv-checkpoints",
                        s3_endpoint="http://minio:9000", s3_region="eu-central-1")


def test_s3a_checkpoints_get_their_secret_mounted_and_s3a_settings() -> None:
    spec = render(checkpoints=S3)["spec"]
    for role in ("driver", "executor"):
        assert spec[role]["secrets"] == mounts("dv-checkpoints", "kafka-creds", "views-db")
        assert "env" not in spec[role]
    assert json.loads(spec["arguments"][1])["secrets"]["checkpoint"] == "dv-checkpoints"
    assert spec["hadoopConf"] == {"fs.s3a.endpoint": "http://minio:9000",
                                  "fs.s3a.path.style.access": "true",
                                  "fs.s3a.endpoint.region": "eu-central-1"}
    # The rest of the manifest is what it is without a checkpoint store.
    plain = render()["spec"]
    assert plain["driver"]["secrets"] == mounts("kafka-creds", "views-db")
    assert "hadoopConf" not in plain


MANAGER = "spark.sql.streaming.checkpointFileManagerClass"


def test_s3a_checkpoints_are_written_once_not_renamed() -> None:
    """On S3 a rename is a copy and a delete: an s3a:// checkpoint gets Spark's abortable
    stream manager (spark-hadoop-cloud), after the author's keys; other stores keep Spark's."""
    body = copy.deepcopy(BODY)
    body["spark"]["sparkConf"] = {MANAGER: "org.example.Mine"}
    for spec_body in (BODY, body):
        conf = render(spec_body, checkpoints=S3)["spec"]["sparkConf"]
        assert conf[MANAGER] == \
            "org.apache.spark.internal.io.cloud.AbortableStreamBasedCheckpointFileManager"


def test_on_aws_only_the_credentials_are_added() -> None:
    spec = render(checkpoints=CheckpointSettings(base="s3a://checkpoints/dv", secret="dv-checkpoints"))["spec"]
    assert "hadoopConf" not in spec
    assert spec["executor"]["secrets"] == mounts("dv-checkpoints", "kafka-creds", "views-db")


def test_a_non_s3a_checkpoint_gets_no_s3_settings() -> None:
    cfg = dataclasses.replace(SETTINGS, checkpoints=S3)
    manifest = render_spark_application(
        cfg.spark.template, settings=cfg, namespace="shop", view="orders-by-customer",
        uid="0d4b7c1e-5f2a-4c8e-9a71-3f9c2b6d8e10", spec=DerivedViewSpec.model_validate(BODY),
        revision=REVISION,
        checkpoint_location=f"hdfs://nn:8020/ck/shop/orders-by-customer/{REVISION}")
    spec = manifest["spec"]
    assert "hadoopConf" not in spec
    assert spec["driver"]["secrets"] == mounts("kafka-creds", "views-db")
    assert "checkpoint" not in json.loads(spec["arguments"][1])["secrets"]
    assert MANAGER not in spec["sparkConf"]


def test_template_hadoop_conf_is_kept_and_ours_wins() -> None:
    body = yaml.safe_load(SETTINGS.spark.template)
    body.setdefault("spec", {})["hadoopConf"] = {"fs.s3a.connection.maximum": "50",
                                                 "fs.s3a.endpoint": "http://stale:1"}
    template = yaml.safe_dump(body)
    spec = render(template=template, checkpoints=S3)["spec"]
    assert spec["hadoopConf"]["fs.s3a.connection.maximum"] == "50"
    assert spec["hadoopConf"]["fs.s3a.endpoint"] == "http://minio:9000"
