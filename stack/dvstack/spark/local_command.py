"""A SparkApplication's spec as one local `spark-submit --master local[N]` command line.

The stand-in's answer to "which container image runs this": the driver pod's
command is this line, run by the stand-in kubelet on this machine.  Image paths
(`local:///opt/derived-views/...`) are mapped to a checkout by `path_map`, and
the mount path of each `driver.secrets`/`executor.secrets` entry to the
directory the stand-in kubelet writes that Secret to (`secret_volumes`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from dvstack.spark.secret_volumes import conf_key, is_dns1123_subdomain, secret_dir

# secretTypes for which upstream also sets an environment variable to a file of the mount.
_TYPES_WITH_ENV = {"GCPServiceAccount": "GOOGLE_APPLICATION_CREDENTIALS",
                   "HadoopDelegationToken": "HADOOP_TOKEN_FILE_LOCATION"}


class SubmissionError(Exception):
    """spark-submit would refuse this application (or the stand-in cannot run it)."""


@dataclass(frozen=True)
class LocalSpark:
    """This machine's Spark: where spark-submit is, and what every job gets."""

    spark_submit: str
    work_dir: str
    max_cores: int
    jars: tuple[str, ...] = ()
    path_map: dict[str, str] = field(default_factory=dict)


def local_path(uri: str, path_map: dict[str, str]) -> str:
    """`local://` and `file://` URIs and image paths as paths of this machine."""
    path = uri
    for scheme in ("local://", "file://"):
        path = path.removeprefix(scheme)
    for prefix, target in path_map.items():
        root = prefix.rstrip("/")
        if path == root or path.startswith(root + "/"):
            return target.rstrip("/") + path[len(root):]
    return path


def spark_memory(quantity: str) -> str:
    """Kubernetes (512Mi, 1Gi) or Spark (512m, 1g) quantities in Spark's form."""
    m = re.fullmatch(r"(\d+)([KMGT]i?|[kmgt]b?)?", quantity.strip())
    if not m:
        raise SubmissionError(f"memory {quantity!r} is not a quantity like 512m or 1Gi")
    number, unit = m.groups()
    return number + (unit[0].lower() if unit else "")


def command(app_name: str, namespace: str, spec: dict[str, Any], *, app_id: str,
            spark: LocalSpark) -> list[str]:
    """The spark-submit argv of one submission; SubmissionError when it cannot be built."""
    if spec.get("type") != "Python":
        raise SubmissionError(f"the local stand-in runs Python applications only, not "
                              f"type {spec.get('type')!r}")
    main = spec.get("mainApplicationFile")
    if not main:
        raise SubmissionError("spec.mainApplicationFile is required")
    executor = spec.get("executor") or {}
    cores = int(executor.get("instances", 1) or 1) * int(executor.get("cores", 1) or 1)
    cores = max(1, min(cores, spark.max_cores))
    argv = [spark.spark_submit, "--master", f"local[{cores}]", "--name", app_name]
    driver = spec.get("driver") or {}
    if driver.get("memory"):
        argv += ["--driver-memory", spark_memory(str(driver["memory"]))]
    deps = spec.get("deps") or {}
    jars = [*spark.jars, *(local_path(j, spark.path_map) for j in deps.get("jars") or [])]
    if jars:
        argv += ["--jars", ",".join(jars)]
    py_files = [local_path(p, spark.path_map) for p in deps.get("pyFiles") or []]
    if py_files:
        argv += ["--py-files", ",".join(py_files)]
    files = [local_path(p, spark.path_map) for p in deps.get("files") or []]
    if files:
        argv += ["--files", ",".join(files)]
    conf: dict[str, str] = {
        "spark.ui.enabled": "false",
        "spark.local.dir": f"{spark.work_dir.rstrip('/')}/tmp",
        "spark.kubernetes.namespace": namespace,
    }
    conf.update({f"spark.hadoop.{k}": str(v) for k, v in (spec.get("hadoopConf") or {}).items()})
    conf.update({str(k): str(v) for k, v in (spec.get("sparkConf") or {}).items()})
    if driver.get("javaOptions"):
        # upstream passes it after sparkConf, so it wins over a sparkConf key of the same name;
        # on the JVM's command line it follows the image's SPARK_SUBMIT_OPTS, and so wins too
        conf["spark.driver.extraJavaOptions"] = str(driver["javaOptions"])
    # After sparkConf, as upstream passes them (driverSecretOption, executorSecretOption).
    conf.update(secret_conf(namespace, spec, app_id=app_id, work_dir=spark.work_dir))
    conf["spark.app.id"] = app_id
    for key, value in conf.items():
        argv += ["--conf", f"{key}={value}"]
    argv.append(local_path(str(main), spark.path_map))
    argv += [str(a) for a in spec.get("arguments") or []]
    return argv


def secret_conf(namespace: str, spec: dict[str, Any], *, app_id: str,
                work_dir: str) -> dict[str, str]:
    """`spark.kubernetes.{driver,executor}.secrets.<name>` of `driver.secrets` and
    `executor.secrets`: the directory this submission's Secret is mounted at here.

    Not the cluster's `path`: all processes share this machine's file system, so the job
    (which finds each Secret under this key) reads the stand-in kubelet's directory of
    it.  Executors are threads of the driver here: their key names the same directory."""
    conf: dict[str, str] = {}
    for role in ("driver", "executor"):
        for i, entry in enumerate((spec.get(role) or {}).get("secrets") or []):
            where = f"spec.{role}.secrets[{i}]"
            if not isinstance(entry, dict):
                raise SubmissionError(f"{where} must be an object with name, path and secretType")
            name, path = str(entry.get("name") or ""), str(entry.get("path") or "")
            if not is_dns1123_subdomain(name):
                raise SubmissionError(f"{where}.name {name!r} is not a valid Secret name "
                                      "(a DNS-1123 subdomain)")
            if not path.startswith("/"):
                raise SubmissionError(f"{where}.path {path!r} must be an absolute path")
            kind = str(entry.get("secretType") or "")
            if kind in _TYPES_WITH_ENV:
                raise SubmissionError(f"{where}.secretType {kind}: the local stand-in mounts "
                                      f"Generic Secrets only, without upstream's "
                                      f"{_TYPES_WITH_ENV[kind]} variable")
            conf[conf_key(role, name)] = \
                str(secret_dir(work_dir, namespace, app_id, name))
    return conf
