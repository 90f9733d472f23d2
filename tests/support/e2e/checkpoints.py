"""e2e helpers for checkpoints on the stack's S3 store (stack.json's `s3` block)."""

from __future__ import annotations

from typing import Any

import botocore.session
from botocore.config import Config

from derived_views.core.job.checkpoints import split_s3a
from dvstack.testing import replay


def checkpoint_env(stack: Any, prefix: str) -> dict[str, str]:
    """The operator's checkpoint settings for the stack's S3 store, under `prefix`."""
    s3 = stack.s3
    return {"DV_CHECKPOINT_BASE": f"s3a://{s3['bucket']}/{prefix}",
            "DV_CHECKPOINT_SECRET": replay.CHECKPOINT_SECRET,
            "DV_CHECKPOINT_S3_ENDPOINT": s3["endpoint"],
            "DV_CHECKPOINT_S3_REGION": s3["region"]}


def s3_keys(stack: Any, location: str) -> list[str]:
    """Object keys whose names start with an s3a:// location (so its siblings' too)."""
    bucket, key = split_s3a(location)
    s3 = stack.s3
    client = botocore.session.get_session().create_client(
        "s3", region_name=s3["region"], endpoint_url=s3["endpoint"],
        aws_access_key_id=s3["access_key"], aws_secret_access_key=s3["secret_key"],
        config=Config(s3={"addressing_style": "path"}))
    try:
        return [o["Key"] for page in client.get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix=key) for o in page.get("Contents") or []]
    finally:
        client.close()
