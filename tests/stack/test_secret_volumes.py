"""The stand-in kubelet writes a Secret volume as a kubelet does, readable by its user only."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from dvstack.spark import secret_volumes as sv


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def keys(directory: Path) -> dict[str, bytes]:
    """What a job reading the mount sees: the entries not starting with a dot."""
    return {p.name: p.read_bytes() for p in directory.iterdir() if not p.name.startswith(".")}


def test_a_secret_is_one_private_file_per_key(tmp_path: Path) -> None:
    directory = sv.secret_dir(tmp_path, "shop", "spark-1", "views-db")
    sv.write(directory, {"password": b"pw\n", "ca.crt": b"\x00\xffbinary"})
    assert keys(directory) == {"password": b"pw\n", "ca.crt": b"\x00\xffbinary"}
    for d in (tmp_path / "secret-volumes", directory.parent.parent, directory.parent, directory):
        assert mode(d) == 0o700, d
    assert mode(directory / "password") == 0o600  # the file itself, through the symlinks
    assert (directory / "..data").is_symlink()


def test_a_rewrite_swaps_in_the_new_keys_and_drops_the_stale(tmp_path: Path) -> None:
    directory = sv.secret_dir(tmp_path, "shop", "spark-1", "views-db")
    sv.write(directory, {"user": b"u", "password": b"old"})
    sv.write(directory, {"password": b"new", "sslmode": b"require"})
    assert keys(directory) == {"password": b"new", "sslmode": b"require"}
    # Only the current payload remains behind `..data`.
    hidden = sorted(p.name for p in directory.iterdir() if p.name.startswith(".."))
    assert hidden == sorted(["..data", os.readlink(directory / "..data")])


@pytest.mark.parametrize("key", ["..data", "a/b", ""])
def test_a_key_that_is_no_file_name_is_refused(tmp_path: Path, key: str) -> None:
    with pytest.raises(ValueError, match="cannot be the file of a Secret key"):
        sv.write(tmp_path / "d", {key: b"x"})


def test_removal_takes_the_submissions_secrets_and_empty_parents(tmp_path: Path) -> None:
    first = sv.submission_dir(tmp_path, "shop", "spark-1")
    second = sv.submission_dir(tmp_path, "shop", "spark-2")
    sv.write(first / "db", {"password": b"pw"})
    sv.write(second / "db", {"password": b"pw"})
    sv.remove(first)
    assert not first.exists() and second.exists()
    sv.remove(second)
    assert not second.parent.exists()  # the namespace's directory, once empty
    sv.write(first / "db", {"password": b"pw"})
    sv.remove_all(tmp_path)
    assert not (tmp_path / "secret-volumes").exists()


def test_secret_names_are_dns1123_subdomains() -> None:
    assert sv.is_dns1123_subdomain("views-db") and sv.is_dns1123_subdomain("kafka.creds-1")
    for bad in ("", "Views", "-db", "db-", "a_b", "a..b", "x" * 254):
        assert not sv.is_dns1123_subdomain(bad), bad
