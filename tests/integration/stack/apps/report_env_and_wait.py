"""A tiny Spark application for the executor tests: report, then wait or exit.

argv: OUT_FILE MODE [MESSAGE]; MODE is `wait` (run until killed), `ok`
(exit 0) or `fail` (leave MESSAGE as the termination message, as the replay
job does, then raise).  It first writes its pid and its environment to
OUT_FILE, and appends its pid to OUT_FILE.attempts, so the test can see what
each run got.
"""

import json
import os
import sys
import time

out, mode = sys.argv[1], sys.argv[2]
with open(out + ".attempts", "a") as fh:
    fh.write(f"{os.getpid()}\n")
with open(out + ".partial", "w") as fh:
    json.dump({"pid": os.getpid(), "argv": sys.argv[1:], "env": dict(os.environ)}, fh)
os.replace(out + ".partial", out)
if mode == "fail":
    message = sys.argv[3] if len(sys.argv) > 3 else "failed on purpose"
    with open(os.environ["DV_TERMINATION_MESSAGE_PATH"], "w") as fh:
        fh.write(message)
    raise RuntimeError(f"the log says more than the termination message: {message}")
if mode == "wait":
    while True:
        time.sleep(3600)
