"""The stack starts from a checkout no other user can enter, in a path with a space.

`git clone`s this checkout's commit into a fresh 0700 directory (under the home
directory, itself private for root), brings a second stack up there on free
ports with the shared cache, checks that every component runs and PostgreSQL
answers a query, and takes it down. As root, PostgreSQL runs as `postgres`,
which cannot enter such a directory: the stack must cope without loosening it.
Slow (a whole second stack): deselect with -m 'not slow'.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import botocore.session
import psycopg
import pytest
from botocore.config import Config

from dvstack import processes
from dvstack.cli import COMPONENTS, components
from dvstack.services import postgres_server
from dvstack.settings import load
from support.paths import REPO

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PORTS = ("DV_ETCD_PORT", "DV_ETCD_PEER_PORT", "DV_APISERVER_PORT", "DV_KCM_PORT",
         "DV_KAFKA_PORT", "DV_KAFKA_CONTROLLER_PORT", "DV_KAFKA_SASL_PORT", "DV_PG_PORT",
         "DV_S3_PORT", "DV_CONNECT_PORT", "DV_OPENSEARCH_PORT", "DV_OPENSEARCH_TRANSPORT_PORT",
         "DV_SCHEMA_REGISTRY_PORT")


def _private_dir() -> Path:
    home = Path.home()
    parent = home if os.access(home, os.W_OK) else None
    return Path(tempfile.mkdtemp(prefix="dv private ", dir=parent))


@pytest.fixture()
def checkout() -> Iterator[Path]:
    """A clone of this checkout's commit in `<0700 dir with a space>/check out`."""
    private = _private_dir()
    try:
        assert stat.S_IMODE(private.stat().st_mode) == 0o700 and " " in str(private)
        clone = private / "check out"
        commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], check=True,
                                capture_output=True, text=True).stdout.strip()
        subprocess.run(["git", "clone", "--quiet", "--no-checkout", str(REPO), str(clone)],
                       check=True, capture_output=True, timeout=300)
        subprocess.run(["git", "-C", str(clone), "checkout", "--quiet", commit], check=True,
                       capture_output=True, timeout=300)
        yield clone
    finally:
        shutil.rmtree(private, ignore_errors=True)


def test_the_stack_runs_from_a_private_checkout_with_a_space(checkout: Path) -> None:
    here = load()
    env = {k: v for k, v in os.environ.items() if k != "DV_STATE_DIR" and k not in PORTS}
    env.update({name: str(processes.free_port()) for name in PORTS})
    env["DV_NODE"] = "0"  # one real node per machine: it is the main stack's
    env.update({"DV_CACHE_DIR": str(here.cache_dir), "PYTHONPATH": os.pathsep.join(
        str(checkout / part) for part in ("operator", "stack"))})
    clone_settings = dataclasses.replace(here, repo=checkout, state_dir=checkout / ".stack",
                                         node=False)

    def dvstack(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "dvstack", *args], cwd=checkout, env=env,
                              capture_output=True, text=True, timeout=timeout)

    try:
        up = dvstack("up")
        assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]
        status = dvstack("status")
        assert status.returncode == 0, status.stdout
        running = {line.split()[0] for line in status.stdout.splitlines()
                   if line.split()[1:2] == ["running"]}
        assert running == set(components(clone_settings))

        info = json.loads((checkout / ".stack" / "stack.json").read_text())
        assert info["repo"] == str(checkout)
        with psycopg.connect(info["pg_dsn"], connect_timeout=10) as conn:
            assert conn.execute("SELECT current_database(), 6 * 7").fetchone() == \
                ("derived_views", 42)
        s3 = info["s3"]
        assert s3["endpoint"] == f"http://127.0.0.1:{env['DV_S3_PORT']}"
        store = botocore.session.get_session().create_client(
            "s3", region_name=s3["region"], endpoint_url=s3["endpoint"],
            aws_access_key_id=s3["access_key"], aws_secret_access_key=s3["secret_key"],
            config=Config(s3={"addressing_style": "path"}))
        store.put_object(Bucket=s3["bucket"], Key="probe", Body=b"ok")
        assert store.get_object(Bucket=s3["bucket"], Key="probe")["Body"].read() == b"ok"
        # Nothing was opened up for the server's user.
        assert stat.S_IMODE(checkout.parent.stat().st_mode) == 0o700
    finally:
        down = dvstack("down", timeout=300)
        shutil.rmtree(postgres_server.cluster_dir(clone_settings), ignore_errors=True)
    assert down.returncode == 0, down.stdout + down.stderr
    leftovers = [n for n in COMPONENTS if n != "postgres"
                 and processes.running(clone_settings, n)]
    assert leftovers == []
