"""A SQL view's Python driver starts PySpark without the libraries PySpark only probes for;
a Python transform's keeps them.

Each case runs in a fresh interpreter: the guard acts on `sys.modules` while PySpark is
imported, which this test process has done long since. Every integration test that runs
`derived_view_job.py` goes through it too."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest

from support.paths import REPO
from support.spark_job.configs import VALID

PROBE = """
import sys
from dvjob.lean_imports import without_optional_libraries
with without_optional_libraries(sys.argv[1:]):
    import pyspark.sql
from pyspark.sql.types import NumpyArrayConverter
from pyspark.statcounter import StatCounter
from psycopg.adapt import PyFormat, Transformer
# what py4j asks of every argument of every call into the JVM
assert NumpyArrayConverter().can_convert([1.0]) is False
print(sorted({m.split(".")[0] for m in sys.modules} & {"numpy", "grpc", "google"}),
      round(StatCounter([1.0, 2.0, 4.0]).stdev(), 4),
      bytes(Transformer().get_dumper(5, PyFormat.TEXT).upgrade(5, PyFormat.TEXT).dump(5)))
"""


def _probe(*argv: str) -> tuple[str, str]:
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True,
                          timeout=120, cwd=REPO / "spark_templates", check=True)
    return done.stdout.strip(), done.stderr


def _python_transform() -> str:
    doc = copy.deepcopy(VALID)
    doc["transform"] = {"python": "views.orders:per_customer"}
    return json.dumps(doc)


LOADED = "['google', 'grpc', 'numpy']"


@pytest.mark.parametrize(("argv", "loaded"), [
    (["--config-json", json.dumps(VALID)], "[]"),
    (["--config-json", _python_transform()], LOADED),
    (["--config-json", "{not json"], LOADED),
    ([], LOADED),
], ids=["sql transform", "python transform", "bad configuration", "no configuration"])
def test_optional_libraries_are_left_out_only_for_a_sql_transform(argv: list[str],
                                                                  loaded: str) -> None:
    out, err = _probe(*argv)
    # the statistics PySpark imported NumPy for still work, from the math module: 1.2472;
    # and psycopg, which looks NumPy up in sys.modules to dump an integer, finds nothing there
    assert out == f"{loaded} 1.2472 b'5'"
    assert err == ""  # a bad configuration is main's to report, once
