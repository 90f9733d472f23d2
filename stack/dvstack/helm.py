"""The `helm` binary: built from the Go module proxy once (`stack/build-helm.sh`), then cached."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from dvstack.settings import Settings

HELM_VERSION = "v3.22.0"


def cached_helm(settings: Settings) -> Path | None:
    """DV_HELM (a helm you already have) or the pinned build, when there is one: None
    rather than a build (for `down`, which must not start one)."""
    given = os.environ.get("DV_HELM")
    if given:
        return Path(given) if Path(given).is_file() else None
    built = _built(settings)
    return built if built.is_file() else None


def _built(settings: Settings) -> Path:
    return settings.cache_dir / f"helm-{HELM_VERSION}" / "bin" / "helm"


def helm_binary(settings: Settings) -> Path:
    """Honour DV_HELM (a helm you already have), else build the pinned version once."""
    given = os.environ.get("DV_HELM")
    if given:
        if not Path(given).is_file():
            raise SystemExit(f"DV_HELM={given!r} is not a file")
        return Path(given)
    built = _built(settings)
    if built.is_file():
        return built
    if not shutil.which("go"):
        raise SystemExit("'go' was not found on PATH: install Go >= 1.26 (Debian: golang-go), "
                         "or set DV_HELM to a helm v3 binary")
    print(f"building helm {HELM_VERSION} from the Go module proxy (first run only; takes a "
          "couple of minutes)...", file=sys.stderr, flush=True)
    subprocess.run(
        ["bash", str(settings.repo / "stack" / "build-helm.sh")],
        env={**os.environ, "DV_CACHE_DIR": str(settings.cache_dir), "HELM_VERSION": HELM_VERSION},
        check=True, stdout=subprocess.DEVNULL,
    )
    if not built.is_file():
        raise SystemExit(f"stack/build-helm.sh finished but {built} is missing")
    return built
