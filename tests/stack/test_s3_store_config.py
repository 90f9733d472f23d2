"""The local S3 store's settings: credentials made once per state directory, kept private."""

from __future__ import annotations

import dataclasses
import stat
from pathlib import Path

from dvstack.services import s3_store
from dvstack.settings import Settings, load


def settings_in(tmp_path: Path) -> Settings:
    return dataclasses.replace(load(), state_dir=tmp_path / "state dir", s3_port=20123)


def test_credentials_are_generated_once_and_private(tmp_path: Path) -> None:
    settings = settings_in(tmp_path)
    first = s3_store.credentials(settings)
    assert first == s3_store.credentials(settings)
    assert len(first[1]) >= 32 and first[0] != first[1]
    other = s3_store.credentials(settings_in(tmp_path / "other"))
    assert other != first
    stored = tmp_path / "state dir" / "s3" / "credentials.json"
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600


def test_stack_json_block_and_server_properties_agree(tmp_path: Path) -> None:
    settings = settings_in(tmp_path)
    info = s3_store.info(settings)
    assert info["endpoint"] == "http://127.0.0.1:20123"
    assert (info["bucket"], info["region"]) == ("derived-views", "us-east-1")
    conf = s3_store._write_config(settings)
    props = dict(line.split("=", 1) for line in conf.read_text().splitlines())
    assert props["s3proxy.endpoint"] == info["endpoint"]
    assert (props["s3proxy.identity"], props["s3proxy.credential"]) == \
        (info["access_key"], info["secret_key"])
    assert props["jclouds.provider"] == "filesystem-nio2"
    assert Path(props["jclouds.filesystem.basedir"]).is_dir()
    assert stat.S_IMODE(conf.stat().st_mode) == 0o600
