"""A SparkApplication spec as a local spark-submit line."""

from __future__ import annotations

from pathlib import Path

import pytest

from dvstack.spark.local_command import LocalSpark, SubmissionError, command, spark_memory
from dvstack.spark.secret_volumes import secret_dir

SPARK = LocalSpark(spark_submit="/venv/bin/spark-submit", work_dir="/state/spark", max_cores=2,
                   jars=("/cache/kafka.jar",), path_map={"/opt/derived-views": "/checkout"})
SPEC = {"type": "Python", "mainApplicationFile":
        "local:///opt/derived-views/spark_templates/derived_view_job.py",
        "arguments": ["--config-json", "{}"], "sparkConf": {"spark.sql.shuffle.partitions": "8"},
        "hadoopConf": {"fs.s3a.endpoint": "http://s3"},
        "deps": {"jars": ["local:///opt/spark/jars/x.jar"],
                 "pyFiles": ["local:///opt/derived-views/views.zip"]},
        "driver": {"memory": "1g"}, "executor": {"instances": 2, "cores": 2}}


def test_the_command_line() -> None:
    assert command("app", "shop", SPEC, app_id="spark-1", spark=SPARK) == [
        "/venv/bin/spark-submit", "--master", "local[2]", "--name", "app",
        "--driver-memory", "1g",
        "--jars", "/cache/kafka.jar,/opt/spark/jars/x.jar",
        "--py-files", "/checkout/views.zip",
        "--conf", "spark.ui.enabled=false",
        "--conf", "spark.local.dir=/state/spark/tmp",
        "--conf", "spark.kubernetes.namespace=shop",
        "--conf", "spark.hadoop.fs.s3a.endpoint=http://s3",
        "--conf", "spark.sql.shuffle.partitions=8",
        "--conf", "spark.app.id=spark-1",
        "/checkout/spark_templates/derived_view_job.py", "--config-json", "{}"]


def test_cores_default_to_one_and_are_capped() -> None:
    minimal = {"type": "Python", "mainApplicationFile": "/job.py"}
    assert command("a", "n", minimal, app_id="i", spark=SPARK)[:4] == \
        ["/venv/bin/spark-submit", "--master", "local[1]", "--name"]


def test_only_python_applications_run_here() -> None:
    with pytest.raises(SubmissionError, match="Python applications only, not type 'Scala'"):
        command("a", "n", {**SPEC, "type": "Scala"}, app_id="i", spark=SPARK)


@pytest.mark.parametrize(("given", "spark"), [("512Mi", "512m"), ("1Gi", "1g"), ("2g", "2g"),
                                              ("1024m", "1024m"), ("100", "100")])
def test_memory_quantities(given: str, spark: str) -> None:
    assert spark_memory(given) == spark


def test_a_bad_memory_quantity_is_refused() -> None:
    with pytest.raises(SubmissionError, match="1 GB"):
        spark_memory("1 GB")


def test_driver_java_options_win_over_the_same_spark_conf_key() -> None:
    """`driver.javaOptions` is how an application asks for other JVM options than the
    image's (the replay benchmark asks for both JIT tiers); upstream passes it after
    sparkConf, so it replaces a sparkConf key of the same name."""
    spec = {"type": "Python", "mainApplicationFile": "/job.py",
            "sparkConf": {"spark.driver.extraJavaOptions": "-Dfrom=conf"},
            "driver": {"javaOptions": "-XX:TieredStopAtLevel=4"}}
    argv = command("a", "n", spec, app_id="i", spark=SPARK)
    assert "spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=4" in argv
    assert "spark.driver.extraJavaOptions=-Dfrom=conf" not in argv


SECRETS = {"type": "Python", "mainApplicationFile": "/job.py",
           "sparkConf": {"spark.kubernetes.driver.secrets.views-db": "/from/spark-conf"},
           "driver": {"secrets": [{"name": "views-db", "path": "/mnt/secrets/views-db",
                                   "secretType": "Generic"}]},
           "executor": {"secrets": [{"name": "views-db", "path": "/mnt/secrets/views-db",
                                     "secretType": "Generic"},
                                    {"name": "kafka.creds", "path": "/mnt/kafka",
                                     "secretType": "Generic"}]}}


def conf_of(argv: list[str]) -> dict[str, str]:
    pairs = [argv[i + 1] for i, flag in enumerate(argv) if flag == "--conf"]
    return dict(p.split("=", 1) for p in pairs)


def test_mounted_secrets_are_named_by_their_local_directory() -> None:
    """The job reads a Secret's files from the directory its SparkConf key names; here that
    is where the stand-in kubelet writes this submission's copy, not the cluster's path.
    Executors are threads of the driver, so their key names the same directory.  Upstream
    passes these after sparkConf, so they win over a sparkConf key of the same name."""
    conf = conf_of(command("a", "shop", SECRETS, app_id="spark-1", spark=SPARK))
    here = "/state/spark/secret-volumes/shop/spark-1"
    assert {k: v for k, v in conf.items() if ".secrets." in k} == {
        "spark.kubernetes.driver.secrets.views-db": f"{here}/views-db",
        "spark.kubernetes.executor.secrets.views-db": f"{here}/views-db",
        "spark.kubernetes.executor.secrets.kafka.creds": f"{here}/kafka.creds"}
    assert conf["spark.kubernetes.driver.secrets.views-db"] == \
        str(secret_dir(SPARK.work_dir, "shop", "spark-1", "views-db"))
    other = conf_of(command("a", "shop", SECRETS, app_id="spark-2", spark=SPARK))
    assert other["spark.kubernetes.driver.secrets.views-db"] == \
        "/state/spark/secret-volumes/shop/spark-2/views-db"


@pytest.mark.parametrize(("entry", "message"), [
    ({"name": "Views_DB", "path": "/mnt/x", "secretType": "Generic"},
     r"spec.driver.secrets\[0\].name 'Views_DB' is not a valid Secret name"),
    ({"name": "", "path": "/mnt/x", "secretType": "Generic"},
     r"spec.driver.secrets\[0\].name '' is not a valid Secret name"),
    ({"name": "db", "path": "mnt/x", "secretType": "Generic"},
     r"spec.driver.secrets\[0\].path 'mnt/x' must be an absolute path"),
    ({"name": "db", "path": "/mnt/x", "secretType": "GCPServiceAccount"},
     "Generic Secrets only, without upstream's GOOGLE_APPLICATION_CREDENTIALS"),
    ("db", r"spec.driver.secrets\[0\] must be an object"),
])
def test_a_secret_entry_spark_submit_cannot_mount_is_refused(entry: object, message: str) -> None:
    spec = {"type": "Python", "mainApplicationFile": "/job.py", "driver": {"secrets": [entry]}}
    with pytest.raises(SubmissionError, match=message):
        command("a", "shop", spec, app_id="i", spark=SPARK)


def test_the_secret_directory_is_per_namespace_submission_and_secret() -> None:
    assert secret_dir("/w", "shop", "spark-1", "db.creds") == \
        Path("/w/secret-volumes/shop/spark-1/db.creds")
    for bad in (("shop", "spark-1", "../x"), ("shop", "..", "db"), ("a/b", "spark-1", "db"),
                ("shop", "", "db")):
        with pytest.raises(ValueError, match=r"cannot name|not a Secret name"):
            secret_dir("/w", *bad)
