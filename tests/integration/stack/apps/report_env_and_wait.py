"""A tiny Spark application for the executor tests: report, then wait or exit.

argv: OUT_FILE MODE [MESSAGE]; MODE is `wait` (run until killed), `secrets`
(also report the mounted Secrets, then wait), `ok` (exit 0) or `fail` (leave
MESSAGE as the termination message, as the replay job does, then raise).  It
first writes its pid and its environment to OUT_FILE, and appends its pid to
OUT_FILE.attempts, so the test can see what each run got.
"""

import json
import os
import sys
import time
from pathlib import Path

SECRET_KEYS = ("spark.kubernetes.driver.secrets.", "spark.kubernetes.executor.secrets.")


def mounted_secrets():
    """{SparkConf key: {"dir", "files"}} of each mounted Secret, read as the replay job reads
    them: the directory its SparkConf key names, one file per key (dot entries are the
    kubelet's own)."""
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()  # the gateway to spark-submit's JVM, not a context
    found = {}
    for key, directory in SparkConf().getAll():
        if key.startswith(SECRET_KEYS):
            files = sorted(p for p in Path(directory).iterdir() if not p.name.startswith("."))
            found[key] = {"dir": directory, "files": {p.name: p.read_text() for p in files}}
    return found


out, mode = sys.argv[1], sys.argv[2]
with open(out + ".attempts", "a") as fh:
    fh.write(f"{os.getpid()}\n")
report = {"pid": os.getpid(), "argv": sys.argv[1:], "env": dict(os.environ)}
if mode == "secrets":
    report["secrets"] = mounted_secrets()
with open(out + ".partial", "w") as fh:
    json.dump(report, fh)
os.replace(out + ".partial", out)
if mode == "fail":
    message = sys.argv[3] if len(sys.argv) > 3 else "failed on purpose"
    with open(os.environ["DV_TERMINATION_MESSAGE_PATH"], "w") as fh:
        fh.write(message)
    raise RuntimeError(f"the log says more than the termination message: {message}")
if mode in ("wait", "secrets"):
    while True:
        time.sleep(3600)
