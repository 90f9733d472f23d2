"""The view's logic: parsed events in, index rows out, as a pure DataFrame function.

Two kinds, chosen by the configuration:
- `sql`: the events are the temp view `events`; the SQL's result is the output.
- `python`: "package.module:function", called with the events DataFrame; the
  module must be importable by the driver (ship it with `--py-files` or in the
  image).  It must return a DataFrame and must not start queries itself.
The same function serves the streaming job and tests on static DataFrames.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame

from dvjob.config import TransformConfig
from dvjob.errors import ConfigError
from dvjob.sql import guard as sql_guard
from dvjob.sql.guard import EVENTS_VIEW

TransformFunction = Callable[[DataFrame], DataFrame]


def resolve_python_transform(ref: str) -> TransformFunction:
    """Import "package.module:function" and return the function."""
    module_name, _, function_name = ref.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"transform.python: cannot import {module_name!r}: {exc}") from None
    function: Any = getattr(module, function_name, None)
    if not callable(function):
        raise ConfigError(f"transform.python: {module_name!r} has no function {function_name!r}")
    return function  # type: ignore[no-any-return]


def apply_transform(transform: TransformConfig, events: DataFrame) -> DataFrame:
    """The view's output for `events` (static or streaming alike)."""
    if transform.sql is not None:
        spark = events.sparkSession
        sql_guard.harden(spark)  # before any of the author's SQL is parsed
        events.createOrReplaceTempView(EVENTS_VIEW)
        return sql_guard.query(spark, transform.sql)  # parsed, then analysed plan checked
    assert transform.python is not None  # the config guarantees exactly one kind
    result = resolve_python_transform(transform.python)(events)
    if not isinstance(result, DataFrame):
        raise ConfigError(f"transform.python: {transform.python} returned "
                          f"{type(result).__name__}, not a DataFrame")
    return result
