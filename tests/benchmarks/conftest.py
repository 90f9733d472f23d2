"""Fixtures of the benchmark scripts' tests."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from types import ModuleType

import pytest

from support.paths import REPO

BENCHMARKS = REPO / "benchmarks"


@pytest.fixture(scope="session")
def bench_script() -> Callable[[str], ModuleType]:
    """benchmarks/ is a folder of scripts, not a package: a loader of one by its name."""
    loaded: dict[str, ModuleType] = {}

    def load(name: str) -> ModuleType:
        if name not in loaded:
            spec = importlib.util.spec_from_file_location(f"benchmarks_{name}",
                                                          BENCHMARKS / f"{name}.py")
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module  # its dataclasses look their module up by name
            spec.loader.exec_module(module)
            loaded[name] = module
        return loaded[name]

    return load
