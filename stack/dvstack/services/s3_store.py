"""S3Proxy: an S3 API server on loopback, for checkpoints that outlive a Spark driver.

On a cluster the driver and executors share no filesystem, so checkpoints go to
object storage through S3A; the local stack serves the same API with S3Proxy's
`filesystem-nio2` backend (objects are files under the state directory). The
access key and secret are generated once per state directory, and the bucket
is created at start.

Why S3Proxy 3.3.0 and filesystem-nio2: S3A sees an empty directory only through
its marker object (`dir/`) in a listing of the prefix `dir/`. S3Proxy's
`filesystem` backend (and nio2 before 3.3.0) leaves the marker out, so Spark's
first checkpoint write fails with FileNotFoundException on the checkpoint root
(upstream: gaul/s3proxy#1093, fixed for the nio2 backends in 3.3.0).
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import botocore.session
from botocore.config import Config
from botocore.exceptions import ClientError

from dvstack import processes
from dvstack.artefacts import java
from dvstack.settings import Settings
from dvstack.testing.waiting import wait_for

S3_NAME = "s3proxy"
BUCKET = "derived-views"
REGION = "us-east-1"
_HEAP = "-Xmx256m"
_JVM = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
"""The client compiler alone and the serial collector, as the schema registry's: with both
compilers the store was still compiling 18 minutes after it started (0.013 core, against
0.008 for the requests it served), a warm-up that benchmarks/steady_cost.py counted as the
views' share of the checkpoint store."""


def s3_dir(settings: Settings) -> Path:
    return settings.state_dir / "s3"


def endpoint(settings: Settings) -> str:
    return f"http://{settings.host}:{settings.s3_port}"


def credentials(settings: Settings) -> tuple[str, str]:
    """(access key, secret key), created on first use and kept in the state directory."""
    f = s3_dir(settings) / "credentials.json"
    if not f.is_file():
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(json.dumps({"access_key": f"dv-{secrets.token_hex(8)}",
                                 "secret_key": secrets.token_urlsafe(30)}))
        f.chmod(0o600)
    data = json.loads(f.read_text())
    return str(data["access_key"]), str(data["secret_key"])


def info(settings: Settings) -> dict[str, str]:
    """The `s3` block of stack.json: what a client (S3A, botocore) needs."""
    access, secret = credentials(settings)
    return {"endpoint": endpoint(settings), "bucket": BUCKET, "access_key": access,
            "secret_key": secret, "region": REGION}


def client(settings: Settings) -> Any:
    access, secret = credentials(settings)
    return botocore.session.get_session().create_client(
        "s3", region_name=REGION, endpoint_url=endpoint(settings), aws_access_key_id=access,
        aws_secret_access_key=secret,
        config=Config(s3={"addressing_style": "path"}, connect_timeout=2, read_timeout=10,
                      retries={"max_attempts": 1}))


def _write_config(settings: Settings) -> Path:
    d = s3_dir(settings)
    (d / "data").mkdir(parents=True, exist_ok=True)
    access, secret = credentials(settings)
    props = {
        "s3proxy.endpoint": endpoint(settings),
        "s3proxy.authorization": "aws-v2-or-v4",
        "s3proxy.identity": access,
        "s3proxy.credential": secret,
        "jclouds.provider": "filesystem-nio2",
        "jclouds.filesystem.basedir": str(d / "data"),
        # The backend's own login; a local directory checks none, but the provider wants one.
        "jclouds.identity": "local",
        "jclouds.credential": "local",
    }
    path = d / "s3proxy.conf"
    processes.write_properties(path, props)
    path.chmod(0o600)
    return path


def _bucket_ready(settings: Settings) -> bool:
    s3 = client(settings)
    try:
        try:
            s3.head_bucket(Bucket=BUCKET)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") not in ("404", "NoSuchBucket"):
                raise
            s3.create_bucket(Bucket=BUCKET)
        return True
    finally:
        s3.close()


def start_s3(settings: Settings, jar: Path) -> None:
    config = _write_config(settings)
    if not processes.running(settings, S3_NAME):
        processes.start(settings, S3_NAME, [java(), _HEAP, *_JVM, "-jar", str(jar),
                                         "--properties", str(config)])
    wait_for(lambda: _bucket_ready(settings), timeout=90, interval=0.5,
             what=f"S3Proxy at {endpoint(settings)} (bucket {BUCKET})",
             on_timeout=lambda: processes.tail(processes.log_file(settings, S3_NAME)))


def stop_s3(settings: Settings) -> None:
    processes.stop(settings, S3_NAME)
