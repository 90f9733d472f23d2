"""Fixtures for the Helm chart's unit tests: `helm lint` / `helm template`, no API server.

The helm binary is built from the Go module proxy on first use (cached).
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from dvstack.chart import CHART
from dvstack.helm import helm_binary
from dvstack.settings import load
from support.chart_render import Render, RenderError


@pytest.fixture(scope="session")
def helm() -> Path:
    return helm_binary(load())


def _template(helm: Path, values: Mapping[str, Any], release: str,
              namespace: str) -> subprocess.CompletedProcess[str]:
    with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="dv-values-") as f:
        json.dump(values, f)
        f.flush()
        return subprocess.run(
            [str(helm), "template", release, str(CHART), "--namespace", namespace,
             "--values", f.name],
            capture_output=True, text=True, check=False, timeout=120)


@pytest.fixture(scope="session")
def render(helm: Path) -> Render:
    """Render the chart with `values`; return the objects, parsed."""

    def run(values: Mapping[str, Any] | None = None, *, release: str = "rel",
            namespace: str = "ops") -> list[dict[str, Any]]:
        proc = _template(helm, values or {}, release, namespace)
        assert proc.returncode == 0, f"helm template failed:\n{proc.stderr}"
        return [doc for doc in yaml.safe_load_all(proc.stdout) if doc]

    return run


@pytest.fixture(scope="session")
def render_error(helm: Path) -> RenderError:
    """Render the chart with `values`, expecting failure; return helm's message."""

    def run(values: Mapping[str, Any], *, release: str = "rel", namespace: str = "ops") -> str:
        proc = _template(helm, values, release, namespace)
        assert proc.returncode != 0, (f"helm template accepted {values!r} but should not have; "
                                      f"rendered:\n{proc.stdout[:2000]}")
        return proc.stderr

    return run
