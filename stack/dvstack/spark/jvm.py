"""The stand-in's driver JVMs start in seconds: a class-data-sharing archive and a quick JIT.

A stand-in driver is a `spark-submit` on a shared 2-core machine, and most of a
test's CPU went into starting them: loading and verifying some 15,000 classes, then
compiling them with both JIT tiers, about 20 s of CPU for a job that reads a hundred
records. Two JVM options, what a container image sets in its environment, cut that:

- a dynamic CDS archive of the classes a Spark session loads (`-XX:SharedArchiveFile`),
  dumped once per Java and PySpark version into the cache by a short training job;
- C1 only (`-XX:TieredStopAtLevel=1`): jobs that live a minute never repay C2's
  compilations. A SparkApplication wanting steady-state speed (the replay benchmark)
  sets `driver.javaOptions: -XX:TieredStopAtLevel=4`, which comes later on the JVM's
  command line and wins, as on a cluster.

`-Xshare:auto` is the JVM's default: an archive that does not match the classpath is
ignored, never an error. Measured on the 2-core machine (trivial PySpark job, CPU
user+sys): 20.6 s default, 12.6 s with the archive, 7.1 s with both.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

from dvstack import artefacts
from dvstack.settings import SPARK_VERSION, Settings

QUICK_JIT = "-XX:TieredStopAtLevel=1"
TRAINING_JOB = Path(__file__).with_name("jvm_training.py")
TRAINING_TIMEOUT_SECONDS = 600.0


def _java_version() -> str:
    out = subprocess.run([artefacts.java(), "-version"], capture_output=True, text=True,
                         timeout=60)
    return out.stderr.strip()


def archive_path(settings: Settings, spark_submit: Path) -> Path:
    """One archive per Java build, Spark version and PySpark install (the classpath)."""
    key = hashlib.sha256("\n".join(
        [_java_version(), SPARK_VERSION, str(spark_submit.resolve())]).encode()).hexdigest()[:16]
    return settings.cache_dir / "spark-cds" / f"spark-{SPARK_VERSION}-{key}.jsa"


def ensure_archive(settings: Settings, spark_submit: Path, jars: list[Path]) -> Path | None:
    """The archive, dumped first when missing; None (and a line saying why) when the dump
    fails: drivers then start without it, slower but the same."""
    archive = archive_path(settings, spark_submit)
    if archive.is_file():
        return archive
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_suffix(f".{os.getpid()}.partial")
    began = time.monotonic()
    try:
        done = subprocess.run(
            [str(spark_submit), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
             "--jars", ",".join(str(j) for j in jars),
             "--driver-java-options", f"-XX:ArchiveClassesAtExit={partial}",
             str(TRAINING_JOB)],
            env={**os.environ, "PYSPARK_PYTHON": sys.executable,
                 "PYSPARK_DRIVER_PYTHON": sys.executable},
            capture_output=True, text=True, timeout=TRAINING_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        done = None
    if done is None or done.returncode != 0 or not partial.is_file():
        partial.unlink(missing_ok=True)
        tail = "" if done is None else (done.stderr or done.stdout).strip()[-500:]
        print(f"Spark class archive not built (drivers start without it): {tail or 'timed out'}",
              flush=True)
        return None
    partial.replace(archive)
    print(f"Spark class archive built in {time.monotonic() - began:.0f}s: {archive.name}",
          flush=True)
    return archive


def driver_java_options(archive: Path | None) -> str:
    """What the stand-in's "image" gives every driver JVM (as SPARK_SUBMIT_OPTS)."""
    options = [QUICK_JIT]
    if archive is not None:
        options.insert(0, f"-XX:SharedArchiveFile={archive}")
    return " ".join(options)
