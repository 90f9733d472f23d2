"""e2e fixtures: the operator as a user runs it, as its own process."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dvstack.cli import apply_crds

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture()
def operator_process(stack: Any, kube_api_client: Any, tmp_path: Path) -> Iterator[Path]:
    """`derived-views-operator -A` against the local stack; yields its log file."""
    apply_crds(kube_api_client, [REPO / "crds" / "derivedviews.io_derivedviews.yaml"])
    log_path = Path(stack.logs_dir) / f"operator-e2e-{tmp_path.name}.log"
    log = open(log_path, "ab")  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "-m", "derived_views.main", "-A"], stdout=log, stderr=subprocess.STDOUT,
        env={**os.environ, "KUBECONFIG": stack.kubeconfig, "DV_LAG_POLL_SECONDS": "1",
             "DV_LAG_HISTORY_SECONDS": "1",
             "DV_CHECKPOINT_BASE": str(tmp_path / "checkpoints")})
    yield log_path
    proc.terminate()
    proc.wait(timeout=30)
    log.close()


