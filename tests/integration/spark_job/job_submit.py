"""spark-submit of the project's job against the stack, as the integration tests run it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

JOB = Path(__file__).resolve().parents[3] / "spark_templates" / "derived_view_job.py"


def submit(stack: Any, config: dict[str, Any], timeout: float) -> subprocess.CompletedProcess[str]:
    """Run the job to the end (local[1], PostgreSQL from libpq's PG* variables)."""
    pg = stack.pg
    env = {**os.environ, "PGHOST": str(pg["host"]), "PGPORT": str(pg["port"]),
           "PGDATABASE": str(pg["database"]), "PGUSER": str(pg["user"]),
           "PGPASSWORD": str(pg["password"]), "PYSPARK_PYTHON": sys.executable}
    spark_submit = str(Path(sys.executable).parent / "spark-submit")
    return subprocess.run(
        [spark_submit, "--master", "local[1]", "--jars", ",".join(stack.spark_jars),
         "--conf", "spark.ui.enabled=false", str(JOB), "--config-json", json.dumps(config)],
        env=env, capture_output=True, text=True, timeout=timeout)
