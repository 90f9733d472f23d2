"""A tiny Spark application for the executor tests: report, then wait or exit.

argv: OUT_FILE MODE [MESSAGE]; MODE is `wait` (run until killed), `ok`
(exit 0) or `fail` (raise with MESSAGE).  It writes its pid and a few
environment variables to OUT_FILE first, so the test can see what it got.
"""

import json
import os
import sys
import time

out, mode = sys.argv[1], sys.argv[2]
attempt_file = out + ".attempts"
with open(attempt_file, "a") as fh:
    fh.write(f"{os.getpid()}\n")
with open(out, "w") as fh:
    json.dump({"pid": os.getpid(), "argv": sys.argv[1:],
               "PGPASSWORD": os.environ.get("PGPASSWORD"),
               "PLAIN": os.environ.get("PLAIN"),
               "FROM_CM": os.environ.get("FROM_CM")}, fh)
if mode == "fail":
    raise RuntimeError(sys.argv[3] if len(sys.argv) > 3 else "failed on purpose")
if mode == "wait":
    while True:
        time.sleep(3600)
