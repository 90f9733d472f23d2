"""The Kubeflow Spark Operator's SparkApplication CRD, pinned and fetched through the Go module proxy.

The local stack installs the real, fully structural CRD of the operator it
stands in for, so a manifest the API server accepts here is one the real
operator's cluster accepts too.  The operator's repository is a Go module, so
`go mod download` fetches the tagged sources (verified against the checksum
database) into the Go module cache; the CRD is copied from
`charts/spark-operator-chart/crds/` into our cache so later runs need no `go`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from dvstack.settings import Settings

MODULE = "github.com/kubeflow/spark-operator/v2"
VERSION = "v2.5.2"
CRD_FILE = "sparkoperator.k8s.io_sparkapplications.yaml"
CHART_CRDS = Path("charts") / "spark-operator-chart" / "crds"


def sparkapplications_crd(settings: Settings) -> Path:
    """The path of the pinned SparkApplication CRD, fetched on first use."""
    cached = settings.cache_dir / f"spark-operator-{VERSION}" / CRD_FILE
    if cached.is_file():
        return cached
    cached.parent.mkdir(parents=True, exist_ok=True)
    source = module_dir(cached.parent) / CHART_CRDS / CRD_FILE
    if not source.is_file():
        raise SystemExit(f"{MODULE}@{VERSION} has no {CHART_CRDS / CRD_FILE}: the pin is wrong")
    partial = cached.with_suffix(".partial")
    shutil.copyfile(source, partial)
    partial.replace(cached)
    return cached


def module_dir(work_dir: Path) -> Path:
    """`go mod download` the pinned module; its extracted sources' directory."""
    go = shutil.which("go")
    if go is None:
        raise SystemExit("'go' was not found on PATH: install Go >= 1.24; the stack fetches "
                         f"the Spark Operator CRD as the Go module {MODULE}@{VERSION}")
    # Outside any module; -mod=mod from a caller's GOFLAGS would only make go complain.
    env = {**os.environ, "GOFLAGS": "", "GO111MODULE": "on"}
    proc = subprocess.run([go, "mod", "download", "-json", f"{MODULE}@{VERSION}"],
                          capture_output=True, text=True, check=False, env=env, cwd=work_dir)
    try:
        info = json.loads(proc.stdout)
    except json.JSONDecodeError:
        info = {}
    if proc.returncode != 0 or not info.get("Dir"):
        reason = info.get("Error") or proc.stderr.strip().splitlines()[-1:] or ["no output"]
        raise SystemExit(f"go mod download {MODULE}@{VERSION} failed: "
                         f"{reason if isinstance(reason, str) else reason[0]} "
                         "(check GOPROXY and network access to the Go module proxy)")
    return Path(info["Dir"])
