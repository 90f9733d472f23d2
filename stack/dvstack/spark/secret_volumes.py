"""Where the stand-in kubelet mounts a submission's Secret volumes, and how it writes them.

On a cluster each pod has its own file system, so a Secret is mounted at the
path the application names (`driver.secrets[].path`).  Here every process
shares this machine's, so each submission gets its own directory per Secret,
`<work_dir>/secret-volumes/<namespace>/<app_id>/<secret>`; spark-submit's
`spark.kubernetes.{driver,executor}.secrets.<secret>` name that directory (see
`spark_local_command`) and the kubelet writes the Secret there (`local_kubelet`).
Both compute it with `secret_dir`, so they cannot disagree.

The directory has the kubelet's layout (its AtomicWriter, pkg/volume/util/
atomic_writer.go): the keys' files in a timestamped `..<stamp>` directory,
`..data` a symlink to it, and each `<key>` a symlink through `..data`; a
rewrite swaps `..data` in one rename, so a reader sees the old keys or the new
ones, never a mix, and keys gone from the Secret vanish.  Modes are 0700/0600,
not the cluster's 0644: other users of this machine must not read the values.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

ROOT = "secret-volumes"


def conf_key(role: str, secret: str) -> str:
    """spark-submit's setting that mounts `secret` in the `role` ("driver" or "executor")
    pods: written by `spark_local_command`, read back from the line by `kubelet_model`."""
    return f"{conf_prefix(role)}{secret}"


def conf_prefix(role: str) -> str:
    return f"spark.kubernetes.{role}.secrets."

DATA_LINK = "..data"
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def is_dns1123_subdomain(name: str) -> bool:
    """A valid Secret name (Kubernetes' IsDNS1123Subdomain)."""
    return len(name) <= 253 and _DNS1123_SUBDOMAIN.fullmatch(name) is not None


def submission_dir(work_dir: str | Path, namespace: str, app_id: str) -> Path:
    """The directory of every Secret one submission mounts: removed as one when it ends."""
    for part in (namespace, app_id):
        if not part or part in (".", "..") or "/" in part:
            raise ValueError(f"{part!r} cannot name a directory of secret volumes")
    return Path(work_dir) / ROOT / namespace / app_id


def secret_dir(work_dir: str | Path, namespace: str, app_id: str, secret: str) -> Path:
    """Where submission `app_id` in `namespace` finds the files of Secret `secret`."""
    if not is_dns1123_subdomain(secret):
        raise ValueError(f"{secret!r} is not a Secret name (a DNS-1123 subdomain)")
    return submission_dir(work_dir, namespace, app_id) / secret


def write(directory: Path, files: Mapping[str, bytes]) -> None:
    """Make `directory` hold exactly `files` (key -> content), swapped in atomically."""
    for key in files:
        if not key or key.startswith("..") or "/" in key or key == ".":
            raise ValueError(f"{key!r} cannot be the file of a Secret key")
    _mkdirs(directory)
    stamp = dt.datetime.now(dt.UTC).strftime("..%Y_%m_%d_%H_%M_%S.")
    payload = Path(tempfile.mkdtemp(prefix=stamp, dir=directory))  # mode 0700
    for key, content in files.items():
        fd = os.open(payload / key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(content)
    temporary = directory / "..data_tmp"
    temporary.unlink(missing_ok=True)
    os.symlink(payload.name, temporary)
    os.replace(temporary, directory / DATA_LINK)
    for key in files:
        if not (directory / key).is_symlink():
            os.symlink(f"{DATA_LINK}/{key}", directory / key)
    # What an earlier write left: its payload (or a torn one's), and keys gone since.
    for entry in directory.iterdir():
        if entry.name in (DATA_LINK, payload.name) or entry.name in files:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


def remove(directory: Path) -> None:
    """Drop a submission's secret volumes, and its namespace's directory once empty."""
    shutil.rmtree(directory, ignore_errors=True)
    with contextlib.suppress(OSError):
        directory.parent.rmdir()


def remove_all(work_dir: str | Path) -> None:
    """Drop every secret volume under `work_dir` (a kubelet starting has no pods yet)."""
    shutil.rmtree(Path(work_dir) / ROOT, ignore_errors=True)


def _mkdirs(directory: Path) -> None:
    """`directory` and the parents it needs, each 0700 whatever the umask."""
    missing = []
    path = directory
    while not path.exists():
        missing.append(path)
        path = path.parent
    for path in reversed(missing):
        with contextlib.suppress(FileExistsError):
            path.mkdir(mode=0o700)
        path.chmod(0o700)
