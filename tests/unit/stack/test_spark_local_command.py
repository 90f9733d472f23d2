"""A SparkApplication spec as a local spark-submit line."""

from __future__ import annotations

import pytest

from dvstack.spark_local_command import LocalSpark, SubmissionError, command, spark_memory

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
