"""A SQL view's Python driver loads none of the libraries PySpark only probes for.

As a job starts, PySpark imports NumPy (`pyspark.statcounter`, which falls back to the math
module without it), and its first call into the JVM imports `pyspark.testing.utils` (py4j's
NumPy array converter asks it whether NumPy is there), whose module-level probes import
NumPy, pandas, PyArrow, gRPC and protobuf. The job uses none of them, yet they held 17 MB
and a thread of a serving driver on the stand-in for as long as it ran (90 -> 73 MB; the
job image has none of them). A Python transform may use them, so
its driver keeps them; Python workers are other processes and are not touched.
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Iterator, Sequence

from dvjob.config import config_from_argv

OPTIONAL = ("numpy", "pandas", "pyarrow", "grpc", "grpc_status", "google")
"""What PySpark's probes import, top-level names (`google`: protobuf and google.rpc)."""


def wants_optional_libraries(argv: Sequence[str]) -> bool:
    """False only for a configuration that validates and names a SQL transform: in doubt (a
    bad configuration, which `main` then reports) they load as before."""
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            config = config_from_argv(argv)
    except (Exception, SystemExit):
        return True
    return config.transform.python is not None


@contextlib.contextmanager
def without_optional_libraries(argv: Sequence[str]) -> Iterator[None]:
    """Import PySpark inside: importing one of OPTIONAL then raises ImportError, which its
    probes catch; `pyspark.testing.utils` is imported here too, so that its probes' answers
    are kept for the job's life. The markers go afterwards: a library that looks one up in
    `sys.modules` (psycopg's integer dumper looks for NumPy) must not find None there, and
    one that imports it later gets it."""
    left_out = [] if wants_optional_libraries(argv) else [
        name for name in OPTIONAL if name not in sys.modules]
    for name in left_out:
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        yield
        if left_out:
            import pyspark.testing.utils  # noqa: F401
    finally:
        for name in left_out:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]
