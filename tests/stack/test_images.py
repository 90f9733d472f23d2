"""The image builder's pure parts (mirror, COPY sources, cache keys, mounts, storage driver)
and the Spark image's entry point, run by bash against stand-in `java` and `spark-submit`."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from dvstack.images.build import (
    BASES,
    RECIPES,
    base_key,
    content_key,
    context_files,
    copied_sources,
    debian_mirror,
    mounts_under,
    storage_driver,
)
from dvstack.settings import REPO_ROOT

DEB822 = """\
Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main
"""


def test_the_mirror_of_a_deb822_source_despite_its_comment_lines() -> None:
    assert debian_mirror(DEB822, "bookworm") == (
        "http://mirror.example/debian", "/usr/share/keyrings/debian-archive-keyring.gpg")


def test_the_mirror_of_the_stanza_serving_the_suite() -> None:
    assert debian_mirror(DEB822, "bookworm-security") == (
        "http://mirror.example/debian-security", None)
    assert debian_mirror(DEB822, "trixie") is None


def test_source_packages_and_inline_keys_are_not_mirrors_to_bootstrap_from() -> None:
    text = ("Types: deb-src\nURIs: http://src.example/debian\nSuites: bookworm\n\n"
            "Types: deb\nURIs: http://bin.example/debian\nSuites: bookworm\n"
            "Signed-By: -----BEGIN PGP PUBLIC KEY BLOCK-----\n")
    assert debian_mirror(text, "bookworm") == ("http://bin.example/debian", None)


def test_the_mirror_of_a_one_line_source() -> None:
    text = ("# deb http://old.example/debian bookworm main\n"
            "deb-src http://src.example/debian bookworm main\n"
            "deb [arch=amd64 signed-by=/etc/apt/keyrings/k.gpg] http://one.example/debian "
            "bookworm main contrib\n")
    assert debian_mirror(text, "bookworm") == ("http://one.example/debian",
                                               "/etc/apt/keyrings/k.gpg")


def test_the_project_dockerfiles_copy_sources() -> None:
    operator = copied_sources((REPO_ROOT / "Dockerfile").read_text())
    spark = copied_sources((REPO_ROOT / "spark_templates" / "Dockerfile").read_text())
    assert operator == ["pyproject.toml", "README.md", "operator/",
                        "spark_templates/sparkapplication.yaml"]
    assert spark == ["stack/jars/spark-kafka/pom.xml", "stack/jars/spark-s3/pom.xml",
                     "stack/jars/spark-avro/pom.xml",
                     "spark_templates/derived_view_job.py", "spark_templates/dvjob/"]


def test_copy_sources_skip_stages_flags_and_urls_and_follow_continuations() -> None:
    dockerfile = """\
FROM x AS build
# COPY commented/ out/
COPY --chown=1:1 a.txt \\
     b/ /dst/
copy --from=build /install /usr/local
ADD https://example.com/f.tgz local.tgz /opt/
COPY ["with space.txt", "/dst/"]
COPY a.txt /again/
"""
    assert copied_sources(dockerfile) == ["a.txt", "b/", "local.tgz", "with space.txt"]


FILES = [("a.py", False, "1" * 64), ("bin/run", True, "2" * 64)]


def test_the_content_key_is_stable_and_ignores_listing_order() -> None:
    key = content_key("FROM x\n", {"PYTHON_IMAGE": "abc"}, FILES)
    assert len(key) == 12
    assert content_key("FROM x\n", {"PYTHON_IMAGE": "abc"}, list(reversed(FILES))) == key


@pytest.mark.parametrize(("dockerfile", "bases", "files"), [
    ("FROM y\n", {"PYTHON_IMAGE": "abc"}, FILES),
    ("FROM x\n", {"PYTHON_IMAGE": "abd"}, FILES),
    ("FROM x\n", {"OTHER_IMAGE": "abc"}, FILES),
    ("FROM x\n", {"PYTHON_IMAGE": "abc"}, [FILES[0], ("bin/run", False, "2" * 64)]),
    ("FROM x\n", {"PYTHON_IMAGE": "abc"}, [FILES[0], ("bin/run", True, "3" * 64)]),
    ("FROM x\n", {"PYTHON_IMAGE": "abc"}, [FILES[0], ("bin/Run", True, "2" * 64)]),
    ("FROM x\n", {"PYTHON_IMAGE": "abc"}, FILES[:1]),
])
def test_the_content_key_changes_with_any_input(
        dockerfile: str, bases: dict[str, str], files: list[tuple[str, bool, str]]) -> None:
    assert content_key(dockerfile, bases, files) != content_key(
        "FROM x\n", {"PYTHON_IMAGE": "abc"}, FILES)


def test_the_base_key_follows_the_recipe_not_the_package_order() -> None:
    spark = BASES["spark"]
    recipe = (RECIPES / "spark.Containerfile").read_text()
    extras = {"spark-entrypoint.sh": b"#!/bin/bash\n"}
    key = base_key(spark, recipe, extras)
    reordered = type(spark)(spark.name, tuple(reversed(spark.packages)), spark.extra_files,
                            spark.build_args)
    assert base_key(reordered, recipe, extras) == key
    assert base_key(spark, recipe + "\n", extras) != key
    assert base_key(spark, recipe, {"spark-entrypoint.sh": b"#!/bin/sh\n"}) != key
    other_version = type(spark)(spark.name, spark.packages, spark.extra_files,
                                (("SPARK_VERSION", "9.9.9"),))
    assert base_key(other_version, recipe, extras) != key
    assert base_key(spark, recipe, extras, suite="trixie") != key


def test_every_base_has_its_recipe() -> None:
    for base in BASES.values():
        assert base.containerfile.is_file(), base.containerfile
        for name in base.extra_files:
            assert (RECIPES / name).is_file(), name


MOUNTS = """\
/dev/vda / ext4 rw,relatime 0 0
overlay /c/images/storage-overlay/overlay/abc/merged overlay rw 0 0
proc /c/images/work/base-x/rootfs/proc proc rw 0 0
tmpfs /c/images-other tmpfs rw 0 0
tmpfs /c/images/with\\040space tmpfs rw 0 0
"""


def test_mounts_under_a_root_decode_octal_escapes_and_respect_path_boundaries() -> None:
    assert mounts_under(MOUNTS, [Path("/c/images")]) == [
        "/c/images/storage-overlay/overlay/abc/merged", "/c/images/work/base-x/rootfs/proc",
        "/c/images/with space"]
    assert mounts_under(MOUNTS, [Path("/c/images/work")]) == [
        "/c/images/work/base-x/rootfs/proc"]


def test_the_storage_driver() -> None:
    with_overlay = "nodev\tsysfs\nnodev\toverlay\n\text4\n"
    ext4 = "/dev/vda / ext4 rw 0 0\n"
    assert storage_driver(with_overlay, ext4, Path("/root/.cache")) == "overlay"
    assert storage_driver("nodev\tsysfs\n\text4\n", ext4, Path("/root/.cache")) == "vfs"
    on_overlay = "overlay / overlay rw 0 0\n"
    assert storage_driver(with_overlay, on_overlay, Path("/root/.cache")) == "vfs"
    volume = on_overlay + "/dev/vdb /root/.cache ext4 rw 0 0\n"
    assert storage_driver(with_overlay, volume, Path("/root/.cache/derived-views")) == "overlay"


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def test_context_files_are_what_git_sees(tmp_path: Path) -> None:
    _git(tmp_path, "init", "-q")
    (tmp_path / ".gitignore").write_text("__pycache__/\n")
    (tmp_path / "pkg" / "__pycache__").mkdir(parents=True)
    for name in ("pkg/tracked.py", "pkg/gone.py", "pkg/new.py", "pkg/__pycache__/x.pyc",
                 "other.txt"):
        (tmp_path / name).write_text(name)
    _git(tmp_path, "add", "pkg/tracked.py", "pkg/gone.py", ".gitignore")
    (tmp_path / "pkg" / "gone.py").unlink()
    assert context_files(tmp_path, ["pkg/"]) == ["pkg/new.py", "pkg/tracked.py"]
    assert context_files(tmp_path, []) == []


# ------------------------------------------------------------------ the entry point

ENTRYPOINT = RECIPES / "spark-entrypoint.sh"
STUB = """#!/bin/sh
printf '%s\\n' "$(basename "$0")" "$@" > "$ARGS_OUT"
"""


def _run_entrypoint(tmp_path: Path, args: list[str], env: dict[str, str]
                    ) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    spark_home, java_home = tmp_path / "spark", tmp_path / "java"
    for stub in (spark_home / "bin" / "spark-submit", java_home / "bin" / "java"):
        stub.parent.mkdir(parents=True, exist_ok=True)
        stub.write_text(STUB)
        stub.chmod(0o755)
    out = tmp_path / "args"
    done = subprocess.run(
        ["bash", str(ENTRYPOINT), *args], capture_output=True, text=True, timeout=30,
        env={"PATH": os.environ["PATH"], "HOME": str(tmp_path), "ARGS_OUT": str(out),
             "SPARK_HOME": str(spark_home), "JAVA_HOME": str(java_home), **env})
    return done, out.read_text().splitlines() if out.exists() else []


EXECUTOR_ENV = {
    "SPARK_DRIVER_URL": "spark://CoarseGrainedScheduler@driver-svc:7078",
    "SPARK_EXECUTOR_ID": "3", "SPARK_EXECUTOR_CORES": "2", "SPARK_EXECUTOR_MEMORY": "1024m",
    "SPARK_APPLICATION_ID": "spark-abc", "SPARK_EXECUTOR_POD_IP": "10.0.0.7",
    "SPARK_EXECUTOR_POD_NAME": "job-exec-3", "SPARK_RESOURCE_PROFILE_ID": "0",
    "SPARK_CONF_DIR": "/opt/spark/conf",
    "SPARK_JAVA_OPT_0": "-Dspark.driver.port=7078",
    "SPARK_JAVA_OPT_1": "-Dspark.app.name=my job",
    "SPARK_JAVA_OPT_10": "-XX:+UseG1GC",
    "SPARK_JAVA_OPT_2": "-Dspark.x=2",
}


def test_executor_mode_starts_the_kubernetes_executor_backend(tmp_path: Path) -> None:
    done, argv = _run_entrypoint(tmp_path, ["executor"], EXECUTOR_ENV)
    assert done.returncode == 0, done.stderr
    spark_home = tmp_path / "spark"
    assert argv == [
        "java", "-Dspark.driver.port=7078", "-Dspark.app.name=my job", "-Dspark.x=2",
        "-XX:+UseG1GC", "-Xms1024m", "-Xmx1024m",
        "-cp", f"/opt/spark/conf:{spark_home}/jars/*",
        "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend",
        "--driver-url", "spark://CoarseGrainedScheduler@driver-svc:7078",
        "--executor-id", "3", "--cores", "2", "--app-id", "spark-abc",
        "--hostname", "10.0.0.7", "--resourceProfileId", "0", "--podName", "job-exec-3"]


def test_the_executor_classpath_has_the_extra_entries_and_no_empty_one(tmp_path: Path) -> None:
    env = {**EXECUTOR_ENV, "SPARK_CLASSPATH": "/extra/a.jar", "HADOOP_CONF_DIR": "/etc/hadoop",
           "SPARK_EXTRA_CLASSPATH": "/more/*"}
    del env["SPARK_EXECUTOR_POD_NAME"], env["SPARK_RESOURCE_PROFILE_ID"]
    done, argv = _run_entrypoint(tmp_path, ["executor"], env)
    assert done.returncode == 0, done.stderr
    classpath = argv[argv.index("-cp") + 1]
    assert classpath == (f"/opt/spark/conf:/etc/hadoop:/extra/a.jar:{tmp_path}/spark/jars/*:"
                         "/more/*")
    assert argv[-2:] == ["--resourceProfileId", "0"]


def test_an_executor_without_the_backends_environment_says_what_is_missing(
        tmp_path: Path) -> None:
    env = dict(EXECUTOR_ENV)
    del env["SPARK_DRIVER_URL"]
    done, argv = _run_entrypoint(tmp_path, ["executor"], env)
    assert done.returncode == 64
    assert "needs SPARK_DRIVER_URL" in done.stderr
    assert argv == []


def test_driver_mode_submits_in_client_mode_bound_to_the_pod_address(tmp_path: Path) -> None:
    args = ["driver", "--properties-file", "/opt/spark/conf/spark.properties",
            "--class", "org.apache.spark.deploy.PythonRunner", "local:///app/job.py", "--x", "1"]
    done, argv = _run_entrypoint(tmp_path, args, {"SPARK_DRIVER_BIND_ADDRESS": "10.0.0.5"})
    assert done.returncode == 0, done.stderr
    assert argv == ["spark-submit", "--conf", "spark.driver.bindAddress=10.0.0.5",
                    "--deploy-mode", "client", *args[1:]]


def test_driver_mode_without_a_bind_address_leaves_it_to_spark(tmp_path: Path) -> None:
    done, argv = _run_entrypoint(tmp_path, ["driver", "--version"], {})
    assert done.returncode == 0, done.stderr
    assert argv == ["spark-submit", "--deploy-mode", "client", "--version"]


def test_other_commands_pass_through(tmp_path: Path) -> None:
    done, argv = _run_entrypoint(tmp_path, [str(tmp_path / "java" / "bin" / "java"), "-version"],
                                 {})
    assert done.returncode == 0, done.stderr
    assert argv == ["java", "-version"]
    done, _ = _run_entrypoint(tmp_path, [], {})
    assert done.returncode == 64
    assert "usage:" in done.stderr


def test_the_spark_operator_image_copies_exactly_what_the_stack_gives_it() -> None:
    from dvstack.images.build import IMAGE_COMPONENTS
    from dvstack.spark import kubeflow_operator as spark_operator

    component = IMAGE_COMPONENTS[spark_operator.IMAGE]
    recipe = component.containerfile.read_text()
    assert sorted(copied_sources(recipe)) == sorted([spark_operator.BINARY,
                                                     spark_operator.ENTRYPOINT])
    assert dict(component.bases) == {"SPARK_IMAGE": "spark"}  # the Spark image's layout
    assert "USER 185:185" in recipe  # the upstream image's user, as the chart expects
