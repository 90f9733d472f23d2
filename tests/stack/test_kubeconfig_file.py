"""dvstack.services.kube_api.write_kubeconfig: a file every reader finds whole."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from types import SimpleNamespace
from typing import cast

from dvstack.services import kube_api
from dvstack.settings import Settings


def settings_in(tmp_path: Path, port: int) -> Settings:
    return cast(Settings, SimpleNamespace(state_dir=tmp_path, host="127.0.0.1",
                                          apiserver_port=port,
                                          kubeconfig=tmp_path / "kube" / "kubeconfig"))


def test_written_again_unchanged_it_is_the_same_file(tmp_path: Path) -> None:
    """`dvstack up` on a running stack: readers keep the file they opened, never a truncated
    one (helm then fell back to localhost:8080)."""
    settings = settings_in(tmp_path, 16443)
    path = kube_api.write_kubeconfig(settings)
    first = path.stat()
    assert kube_api.write_kubeconfig(settings) == path
    again = path.stat()
    assert (again.st_ino, again.st_mtime_ns) == (first.st_ino, first.st_mtime_ns)
    assert json.loads(path.read_text())["clusters"][0]["cluster"]["server"] == \
        "https://127.0.0.1:16443"


def test_a_changed_config_replaces_the_file_whole_and_private(tmp_path: Path) -> None:
    kube_api.write_kubeconfig(settings_in(tmp_path, 16443))
    path = kube_api.write_kubeconfig(settings_in(tmp_path, 17443))
    assert json.loads(path.read_text())["clusters"][0]["cluster"]["server"] == \
        "https://127.0.0.1:17443"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in path.parent.iterdir() if p.name.startswith("kubeconfig")] == \
        ["kubeconfig"]
